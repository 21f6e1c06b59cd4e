"""How many seconds of each inference-perf run a held-out fold's fit simulates (issue 33, round 12;
docs/fidelity.md "Round 12: the silicon-held-out source fold again").

The default report fits the folds on the first 30 s of each inference-perf run (a time budget on 2 cores) and
predicts a held-out run on its first 60 s. Where silicon rows (closed loops, simulated whole) are among the training
rows they carry the serving terms and the short window costs little. A fold whose training rows are inference-perf
runs only (the silicon-held-out source fold) reads its per-sequence time, per-step time, all-reduce latency and
decode bandwidth off those windows alone; on 30 s of its 600-1200 s stages the fit moves decode time from the
batch (per sequence) to the step (7.5 +/- 5.3 us per sequence on 30 s, 20.7 +/- 3.9 us on 60 s, 20.4 +/- 5.2 us
on 120 s; the full-stage serving fit's 18.7 +/- 4.4 us). Such a fold fits on the window its held-out predictions
use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def open_loop_fold_window_s(fit_sim_s: float, eval_sim_s: float | None) -> float | None:
    """The window of a fold whose training cases are all open-loop runs: the longer of ``fit_sim_s`` and the
    held-out prediction window ``eval_sim_s`` (``None``: whole runs, the longest; round 21)."""
    return None if eval_sim_s is None else max(fit_sim_s, eval_sim_s)


def fold_fit_window_s(train_cases: Sequence, fit_sim_s: float, eval_sim_s: float | None) -> float | None:
    """The seconds of each open-loop run the fold's fit simulates: ``fit_sim_s``, or, where every training case is
    an open-loop run (no closed-loop silicon row reads the serving terms whole), ``open_loop_fold_window_s``."""
    if not train_cases or any(c.run.closed_loop for c in train_cases):
        return fit_sim_s
    return open_loop_fold_window_s(fit_sim_s, eval_sim_s)


def fold_first(cases: Sequence, group: str, group_of: Callable, first: list | None, fit_sim_s: float,
               eval_sim_s: float | None, simulate: Callable, memo: dict) -> tuple[float | None, list | None]:
    """(the fold's fit window, ``first`` with its open-loop training runs simulated over that window): ``first``
    holds ``cases`` simulated at the fit's start over ``fit_sim_s``; ``simulate(cases, max_sim_s)`` simulates at
    the same start; ``memo`` keeps the longer window's simulations by case index across folds."""
    train = [i for i, c in enumerate(cases) if group_of(c) != group]
    window = fold_fit_window_s([cases[i] for i in train], fit_sim_s, eval_sim_s)
    if first is None or window == fit_sim_s:
        return fit_sim_s, first
    todo = [i for i in train if not cases[i].run.closed_loop and (i, window) not in memo]
    for i, r in zip(todo, simulate([cases[i] for i in todo], window) if todo else []):
        memo[(i, window)] = r
    out = list(first)
    for i in train:
        if (i, window) in memo:
            out[i] = memo[(i, window)]
    return window, out
