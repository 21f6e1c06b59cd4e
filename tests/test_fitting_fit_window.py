"""twin.fitting.fit_window (issue 33, round 12): a fold trained on inference-perf runs alone fits them over the
held-out prediction window; any fold with a closed-loop silicon row among its training rows keeps the report's."""

from __future__ import annotations

from types import SimpleNamespace

from twin.fitting.fit_window import fold_first, fold_fit_window_s


def _case(name: str, closed: bool, group: str) -> SimpleNamespace:
    return SimpleNamespace(run=SimpleNamespace(name=name, closed_loop=closed), group=group)


CASES = [_case("ip1", False, "inference-perf"), _case("ip2", False, "inference-perf"),
         _case("si1", True, "silicon"), _case("si2", True, "silicon")]


def group_of(c):
    return c.group


def test_open_loop_training_rows_alone_fit_over_the_prediction_window():
    assert fold_fit_window_s(CASES[:2], 30.0, 60.0) == 60.0
    assert fold_fit_window_s(CASES[:2], 90.0, 60.0) == 90.0          # never shorter than asked


def test_a_closed_loop_training_row_keeps_the_report_window():
    assert fold_fit_window_s(CASES, 30.0, 60.0) == 30.0
    assert fold_fit_window_s(CASES[2:], 30.0, 60.0) == 30.0          # silicon rows only: the ip-held-out fold
    assert fold_fit_window_s(CASES[:2], 30.0, None) is None          # whole-run predictions: whole (round 21)
    assert fold_fit_window_s([], 30.0, 60.0) == 30.0


def test_fold_first_resimulates_only_the_open_loop_training_runs_once():
    calls = []

    def simulate(cases, s):
        calls.append(([c.run.name for c in cases], s))
        return [f"{c.run.name}@{s:g}" for c in cases]

    first = [f"{c.run.name}@30" for c in CASES]
    memo: dict = {}
    window, sims = fold_first(CASES, "silicon", group_of, first, 30.0, 60.0, simulate, memo)
    assert window == 60.0
    assert sims == ["ip1@60", "ip2@60", "si1@30", "si2@30"]           # held-out rows untouched
    assert first == [f"{c.run.name}@30" for c in CASES]              # the shared list is not changed
    window, sims = fold_first(CASES, "silicon", group_of, first, 30.0, 60.0, simulate, memo)
    assert calls == [(["ip1", "ip2"], 60.0)]                         # the memo serves the second fold
    window, sims = fold_first(CASES, "inference-perf", group_of, first, 30.0, 60.0, simulate, memo)
    assert (window, sims) == (30.0, first) and len(calls) == 1


def test_nothing_fitted_passes_first_through():
    assert fold_first(CASES, "silicon", group_of, None, 30.0, 60.0, lambda *_: [], {}) == (30.0, None)
