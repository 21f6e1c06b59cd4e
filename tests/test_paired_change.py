"""benchmarks/paired_change.py: the paired bootstrap of a change between two held-out reports (issue 33, round 19)."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks.fold_report import FoldReport
from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError

pc = load_benchmark("paired_change")
TTFT, TPOT = "mean_ttft_ms", "mean_tpot_ms"
MOE = {"x": False, "y": True, "z": False, "w": True}


def report(errors_by_group: dict[str, dict[str, dict[str, float]]], kind: str = "GPU") -> FoldReport:
    return FoldReport({"folds": {kind: {"folds": [{"held_out": g, "errors": e} for g, e in errors_by_group.items()]}}})


BEFORE = {"H100": {"x": {TTFT: 0.10, TPOT: -0.02}, "y": {TTFT: 0.30}}, "B200": {"z": {TTFT: 0.05}, "w": {TTFT: 0.2}}}


def test_the_same_report_changes_nothing():
    out = pc.compare(report(BEFORE), report(BEFORE), MOE, resamples=200)
    cell = out["kinds"]["GPU"]["pooled"][TTFT]
    assert cell["n"] == 4 and cell["abs"]["change"] == 0.0 and cell["abs"]["bootstrap"] == [0.0, 0.0]
    assert out["kinds"]["GPU"]["H100"][TPOT]["signed"]["bootstrap"] == [0.0, 0.0]
    assert out["kinds"]["GPU"]["B200"][TPOT] is None                 # no case of B200 has TPOT


def test_a_shift_of_every_case_is_the_change_in_every_resample():
    after = {g: {n: {m: e + 0.01 for m, e in errs.items()} for n, errs in cases.items()} for g, cases in BEFORE.items()}
    out = pc.compare(report(BEFORE), report(after), MOE, resamples=300, seed=5)
    cell = out["kinds"]["GPU"]["pooled"][TTFT]
    # every error positive: |error| moves by +0.01 with the signed one, whatever the draw
    assert cell["abs"]["before"] == pytest.approx(0.15) and cell["abs"]["after"] == pytest.approx(0.16)
    assert cell["abs"]["bootstrap"] == pytest.approx([0.01, 0.01]) and cell["signed"]["change"] == pytest.approx(0.01)
    assert out == pc.compare(report(BEFORE), report(after), MOE, resamples=300, seed=5)       # seeded
    assert "| GPU | pooled | 15.0 -> 16.0: +1.0 [+1.0, +1.0] (signed +1.0 [+1.0, +1.0]) |" in pc.markdown(out)


def test_one_case_moving_is_not_resolved_when_the_median_need_not_see_it():
    before = {"g": {n: {TTFT: e} for n, e in zip("abcde", (0.02, 0.04, 0.06, 0.08, 0.10))}}
    after = json.loads(json.dumps(before))
    after["g"]["e"][TTFT] = 0.01                   # one case of five improves: the median 0.06 -> 0.04
    moe = dict.fromkeys("abcde", False)
    cell = pc.compare(report(before), report(after), moe, resamples=2000)["kinds"]["GPU"]["pooled"][TTFT]
    assert cell["abs"]["change"] == pytest.approx(-0.02)
    lo, hi = cell["abs"]["bootstrap"]
    # a third of the draws hold no copy of e (0.8^5) and do not move; none can move up
    assert lo < 0.0 and hi == 0.0


def test_reports_that_do_not_pair_are_one_line():
    moved = {"H100": {"x": BEFORE["H100"]["x"]}, "B200": {**BEFORE["B200"], "y": BEFORE["H100"]["y"]}}
    with pytest.raises(TwinInputError, match="case 'y' is held out with 'H100' before, 'B200' after"):
        pc.compare(report(BEFORE), report(moved), MOE)
    fewer = {"H100": BEFORE["H100"], "B200": {"z": BEFORE["B200"]["z"]}}
    with pytest.raises(TwinInputError, match="case 'w' is in one report only"):
        pc.compare(report(BEFORE), report(fewer), MOE)
    with pytest.raises(TwinInputError, match="share no fold kind"):
        pc.compare(report(BEFORE), report(BEFORE, kind="family"), MOE)
    with pytest.raises(TwinInputError, match="case 'w' is not in the ground truth"):
        pc.compare(report(BEFORE), report(BEFORE), {k: v for k, v in MOE.items() if k != "w"})
    with pytest.raises(TwinInputError, match="resamples 0 must be >= 1"):
        pc.compare(report(BEFORE), report(BEFORE), MOE, resamples=0)


def test_cli_bad_report_is_one_line(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "r.json"
    bad.write_text("{\"folds\": {}}")
    monkeypatch.setattr(sys, "argv", ["paired_change.py", str(bad), str(bad)])
    with pytest.raises(SystemExit) as exc:
        pc.run_script(pc.main)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no folds" in err[0]
