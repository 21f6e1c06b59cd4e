"""A fit's objective over K draws of each training run (issue 33, round 23; docs/fidelity.md "Round 23: a
seed-robust fit for the GPU and family folds").

A fold's fit simulates each training run once at the fit's start and re-costs those steps (``twin.fitting.
surrogate``) at every trial parameter set. That one simulation is one random draw of the run's arrivals, lengths
and request path (an inference-perf stage read over the fit's 30 s window, a silicon row's closed loop whole): the
re-costed metrics carry that draw's noise, and the fitted terms move with the seed (round 22:
``per_seq_overhead_s`` 1.4-2.6 standard errors over seeds 0-2 in the folds that read the stages).

With ``draws`` K > 1 each run the fit keeps is simulated at K draw seeds (``draw_seeds``: the run's own seed first,
then seeds ``DRAW_SEED_STRIDE`` apart, so no two seeds of a report share a draw), and the fit's prediction of the
run is the mean over the K re-costed draws (``MeanSurrogate``): an estimate of the twin's expected metric whose
draw variance falls as 1/K, the windows unchanged (their bias stays). The same K seeds serve every evaluation of the
objective (common random numbers). A run that queued (simulated whole, left out of the fit) keeps one draw, and so
do the held-out predictions. K = 1 is the fit as before, exactly. (Round 23 first drew the open-loop stages alone:
the seed still moved the fit as much; the silicon rows' own draws carry it too.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from twin.errors import TwinInputError
from twin.fitting.replay import Replayed
from twin.fitting.surrogate import Surrogate

DRAW_SEED_STRIDE = 1_000_003     # a prime above any seed a report uses: seed s's draws never meet seed s + 1's
MAX_DRAWS = 16


def check_draws(draws: int, flag: str = "draws") -> int:
    """``draws`` if it is a whole number 1..``MAX_DRAWS``, else a one-line error naming ``flag``."""
    if isinstance(draws, bool) or not isinstance(draws, int) or not 1 <= draws <= MAX_DRAWS:
        raise TwinInputError(f"{flag} {draws!r}: must be a whole number from 1 to {MAX_DRAWS}")
    return draws


def check_draws_option(draws: int, flag: str, *, fitting: bool) -> int:
    """A script's draws option: ``check_draws``, and a one-line error where nothing is fitted (K > 1 would be a
    knob that changes nothing)."""
    check_draws(draws, flag)
    if draws != 1 and not fitting:
        raise TwinInputError(f"{flag} {draws}: nothing is fitted here (--no-refit, --defaults-only), so no fit "
                             "draws a run")
    return draws


def draw_seeds(seed: int, draws: int) -> tuple[int, ...]:
    """The K draw seeds of a run simulated at ``seed``: ``seed`` itself, then ``seed + j * DRAW_SEED_STRIDE``."""
    return tuple(seed + j * DRAW_SEED_STRIDE for j in range(check_draws(draws)))


def is_drawn(case) -> bool:
    """Whether the fit draws ``case`` K times: a run the fit keeps (one that queued is left out of it)."""
    return not case.run.queueing


@dataclass(frozen=True)
class Draws:
    """K simulations of one run at ``seeds`` (the first at the run's own seed)."""

    replays: tuple[Replayed, ...]
    seeds: tuple[int, ...]

    @property
    def metrics(self) -> dict:
        """The first draw's metrics (the run at its own seed, as with one draw): a reader of a simulation's
        ``metrics`` (the embedded defaults' predictions of a closed loop) gets what K = 1 gives; only the fit's
        surrogate averages the draws."""
        return self.replays[0].metrics


def case_seeds(case, seed: int, draws: int) -> tuple[int, ...]:
    """The seeds ``case`` is simulated at: K draw seeds for a drawn run, else ``seed`` alone."""
    return draw_seeds(seed, draws) if draws > 1 and is_drawn(case) else (seed,)


def grouped(cases: Sequence, replays: Sequence[Replayed], seed: int, draws: int) -> list:
    """``replays`` (every case's simulations at ``case_seeds``, in order) as one entry per case: a ``Replayed``
    where the case has one seed, else a ``Draws``."""
    out, k = [], 0
    for c in cases:
        seeds = case_seeds(c, seed, draws)
        part = tuple(replays[k:k + len(seeds)])
        k += len(seeds)
        out.append(part[0] if len(seeds) == 1 else Draws(part, seeds))
    return out


class MeanSurrogate:
    """The mean of K surrogates' predictions, metric by metric (one run, K draws)."""

    def __init__(self, surrogates: Sequence[Surrogate]) -> None:
        self.surrogates = tuple(surrogates)

    def predict(self, params: dict[str, float]) -> dict[str, float]:
        preds = [s.predict(params) for s in self.surrogates]
        return {k: sum(p[k] for p in preds) / len(preds) for k in preds[0] if all(k in p for p in preds)}


def surrogate_for(run, target, deployment, replayed, params: dict[str, float], seed: int):
    """A ``Surrogate`` of one simulation (``replayed`` a ``Replayed``, at ``seed``), or the ``MeanSurrogate`` of a
    ``Draws`` (each draw at its own seed, whose request-path draws it re-costs)."""
    if isinstance(replayed, Draws):
        return MeanSurrogate([Surrogate(run, target, deployment, r, params, s)
                              for r, s in zip(replayed.replays, replayed.seeds)])
    return Surrogate(run, target, deployment, replayed, params, seed)
