"""benchmarks/window_tail_trial.py (round 23): a run simulated over a window shorter than its span loses its mean
and p90 TTFT as fit targets; closed loops and runs simulated whole keep every target; one window is required."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from benchmarks.window_tail_trial import WINDOW_TAIL, _window, windowed_targets
from twin.errors import TwinInputError

TARGETS = [("mean_tpot_ms", 10.0, 2.0), ("mean_ttft_ms", 50.0, 1.0), ("median_ttft_ms", 40.0, 1.0),
           ("p90_ttft_ms", 90.0, 0.5)]


def _case(closed: bool, duration_s: float | None, queueing: bool = False):
    return SimpleNamespace(run=SimpleNamespace(closed_loop=closed, duration_s=duration_s, queueing=queueing))


def test_a_windowed_stage_keeps_its_median_and_tpot_only():
    targets = windowed_targets(lambda case: list(TARGETS), 30.0)
    assert targets(_case(False, 600.0)) == [TARGETS[0], TARGETS[2]]
    assert WINDOW_TAIL == ("mean_ttft_ms", "p90_ttft_ms")
    assert targets(_case(False, 30.0)) == TARGETS          # simulated whole: no window tail
    assert targets(_case(True, None)) == TARGETS           # a closed loop (silicon row): whole
    assert targets(_case(False, None)) == TARGETS          # no span read: nothing to compare the window with


def test_the_trial_needs_one_window_in_seconds():
    assert _window(["--fold", "family:kimi", "--windows", "30"]) == 30.0
    for argv in (["--fold", "family:kimi"], ["--windows", "30,60"], ["--windows", "whole"]):
        with pytest.raises(TwinInputError, match="^--windows: give one window in seconds"):
            _window(argv)
