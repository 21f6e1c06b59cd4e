"""Leave-one-group-out: fit on every experiment (or model) but one, predict the one left out, for each in turn.

The held-out runs are simulated in full (every request of the run) at the fold's parameters; those errors are
what a user can expect when the twin predicts a configuration it was not fitted on."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from twin.fitting.fit import Case, fit, simulate_cases
from twin.fitting.parameters import PARAMETER_NAMES


def by_experiment(case: Case) -> str:
    return case.run.group


def by_model(case: Case) -> str:
    return case.target.model


@dataclass
class Fold:
    held_out: str                     # the group left out (an experiment, a model, ...)
    params: dict[str, float]
    cases: list[Case]                 # the held-out runs
    predicted: list[dict[str, float]]


def leave_one_group_out(cases: Sequence[Case], group_of: Callable[[Case], str] = by_experiment, *, names: tuple[str, ...] = PARAMETER_NAMES,
                             fixed: dict[str, float] | None = None, start: dict[str, float] | None = None,
                             outer_iterations: int = 3, max_sim_s: float | None = 120.0,
                             eval_sim_s: float | None = None, workers: int = 1, seed: int = 0,
                             progress: Callable[[str], None] | None = None) -> list[Fold]:
    """One fold per group (``group_of``: by experiment, by model, ...), in first-seen order."""
    groups = list(dict.fromkeys(group_of(c) for c in cases))
    params0 = {**(fixed or {}), **(start or {})}
    first = simulate_cases(cases, params0, seed=seed, max_sim_s=max_sim_s, workers=workers)
    folds = []
    for group in groups:
        train = [i for i, c in enumerate(cases) if group_of(c) != group]
        test = [c for c in cases if group_of(c) == group]
        result = fit([cases[i] for i in train], names=names, fixed=fixed, start=start,
                     outer_iterations=outer_iterations, max_sim_s=max_sim_s, workers=workers, seed=seed,
                     first=[first[i] for i in train])
        predicted = [r.metrics for r in simulate_cases(test, result.params, seed=seed, max_sim_s=eval_sim_s,
                                                       workers=workers)]
        folds.append(Fold(group, result.params, test, predicted))
        if progress:
            progress(group)
    return folds
