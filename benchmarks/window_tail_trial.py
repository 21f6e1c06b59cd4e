"""A trial (round 23, issue 33): one fold fitted as ``fit_seed_robustness.py`` fits it, with a windowed stage's TTFT
tail left out of the fit's targets. An inference-perf stage simulated over the fit's window (30 s of a 600-1,200 s
stage) is measured over the whole stage; over the window its mean and p90 TTFT are the queue one burst builds or
not (Llama-2-70B general stage 1: +39..+274 % over five draws, ``stage_window_draws.py``), and the fit shortens the
large-batch step to drain it. Here such a run keeps its median TTFT and TPOT as targets, not its mean or p90 TTFT
(as a cold run leaves its one-off tail to the evaluation, ``measured_run.COLD_START_UNFITTED``); closed loops and
runs simulated whole keep every target. The held-out predictions and everything else are the fold's as before.

    python benchmarks/window_tail_trial.py --fold family:minimax --windows 30 --seeds 0,1,2 --workers 1 --json out.json

It takes ``fit_seed_robustness.py``'s options (one window, given in ``--windows``); the fits run in this process
(workers simulate only), so the rule reaches every fit. docs/fidelity.md "Round 23: a seed-robust fit for the GPU
and family folds".
"""

from __future__ import annotations

import sys
from pathlib import Path
from unittest.mock import patch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fit_seed_robustness  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting import fit as fit_module  # noqa: E402

WINDOW_TAIL = ("mean_ttft_ms", "p90_ttft_ms")


def windowed_targets(measured, window_s: float):
    """``fit._measured`` with a run simulated over ``window_s`` (an open loop longer than the window) stripped of
    ``WINDOW_TAIL``."""
    def targets(case):
        out = measured(case)
        run = case.run
        if not run.closed_loop and not run.queueing and run.duration_s and run.duration_s > window_s:
            out = [t for t in out if t[0] not in WINDOW_TAIL]
        return out
    return targets


def _window(argv: list[str]) -> float:
    """The one numeric ``--windows`` value in ``argv`` (the rule needs the window it strips)."""
    text = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--windows"), None)
    wins = fit_seed_robustness.windows(text) if text is not None else []
    if len(wins) != 1 or wins[0] is None:
        raise TwinInputError("--windows: give one window in seconds (a whole stage has no window tail to leave out)")
    return wins[0]


def main() -> None:
    window_s = _window(sys.argv[1:])
    # the fit reads its targets in this process (the workers only simulate), so a scoped patch reaches it
    with patch.object(fit_module, "_measured", windowed_targets(fit_module._measured, window_s)):
        fit_seed_robustness.main()


if __name__ == "__main__":
    run_script(main)
