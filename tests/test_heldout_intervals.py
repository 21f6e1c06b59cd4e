"""benchmarks/heldout_intervals.py: seeded bootstrap and measured-again intervals of the held-out medians (issue 33,
round 19). Exact where the resampling distribution is known by hand; seeded where it is not."""

from __future__ import annotations

import json
import math
import statistics
import sys

import numpy as np
import pytest

from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError

hi = load_benchmark("heldout_intervals")
TTFT, TPOT = "mean_ttft_ms", "mean_tpot_ms"


def case(group: str, errs: dict[str, float], moe: bool = False, silicon: bool = False):
    return (group, moe, silicon, errs)


def test_two_values_give_the_hand_computed_interval():
    # resampling [0.1, -0.3] twice: {0.1, 0.1} (1/4), {0.1, -0.3} (1/2), {-0.3, -0.3} (1/4); each end holds a quarter
    # of the draws, so the 5th and 95th percentiles are the ends exactly
    out = hi.kind_intervals([case("a", {TTFT: 0.1}), case("a", {TTFT: -0.3})], resamples=2000)
    cell = out["pooled"][TTFT]
    assert cell["n"] == 2 and cell["abs"] == pytest.approx(0.2) and cell["signed"] == pytest.approx(-0.1)
    assert cell["bootstrap"]["abs"] == pytest.approx([0.1, 0.3])
    assert cell["bootstrap"]["signed"] == pytest.approx([-0.3, 0.1])
    assert out["groups"]["a"][TTFT]["bootstrap"]["abs"] == pytest.approx([0.1, 0.3])


def test_one_case_per_stratum_leaves_nothing_to_resample():
    # dense 0.02 and MoE -0.04 in one group: two strata of one case each, every resample the same
    out = hi.kind_intervals([case("g", {TPOT: 0.02}), case("g", {TPOT: -0.04}, moe=True)], resamples=50)
    assert out["pooled"][TPOT]["bootstrap"] == {"abs": pytest.approx([0.03, 0.03]),
                                                "signed": pytest.approx([-0.01, -0.01])}
    assert out["dense models"][TPOT]["abs"] == pytest.approx(0.02)
    assert out["MoE models"][TPOT]["signed"] == pytest.approx(-0.04)
    diff = out["moe_minus_dense"][TPOT]
    assert diff["point"] == pytest.approx(0.02) and diff["bootstrap"] == pytest.approx([0.02, 0.02])
    assert TTFT not in out["pooled"]                       # no case has it: no cell


def _cases(seed: int = 1, n: int = 30):
    rng = np.random.default_rng(seed)
    return [case(f"g{i % 3}", {TTFT: float(rng.normal(-0.05, 0.1)), TPOT: float(rng.normal(0.0, 0.04))},
                 moe=i % 2 == 0, silicon=i % 4 != 0) for i in range(n)]


def test_the_same_seed_gives_the_same_intervals_and_the_points_are_the_medians():
    cases = _cases()
    pool = {TTFT: [0.05, -0.02, 0.1], TPOT: [0.004, -0.01]}
    a = hi.kind_intervals(cases, seed=3, repeats=pool)
    assert a == hi.kind_intervals(cases, seed=3, repeats=pool)
    # each interval draws from its own stream: the bootstrap ones do not move when measured-again ones are added
    b = hi.kind_intervals(cases, seed=3)
    assert all(a[k][m]["bootstrap"] == b[k][m]["bootstrap"] for k in ("pooled", "dense models", "MoE models")
               for m in (TTFT, TPOT))
    assert list(hi.stream(3, "all", TTFT).integers(0, 10**9, 4)) \
        != list(hi.stream(4, "all", TTFT).integers(0, 10**9, 4))
    xs = [c[3][TTFT] for c in cases]
    assert a["pooled"][TTFT]["abs"] == pytest.approx(statistics.median(abs(x) for x in xs), abs=1e-15)
    assert a["pooled"][TTFT]["signed"] == pytest.approx(statistics.median(xs), abs=1e-15)
    lo, hi_ = a["pooled"][TTFT]["bootstrap"]["abs"]
    assert lo <= a["pooled"][TTFT]["abs"] <= hi_
    # 30 draws of N(0.05, 0.1): the 90 % interval of the |median| is a few points wide (a stated tolerance)
    assert 0.01 < hi_ - lo < 0.12


def test_measured_again_moves_only_the_silicon_cases_by_the_repeat_pairs():
    r = math.log(1.21)
    out = hi.kind_intervals([case("g", {TTFT: 0.0}, silicon=True)], resamples=400, repeats={TTFT: [r]})
    d = r / math.sqrt(2.0)                             # one measurement's deviation: the pair's over sqrt(2), +/-
    again = out["pooled"][TTFT]["measured_again"]
    assert again["abs"] == pytest.approx([1.0 - math.exp(-d), math.exp(d) - 1.0])     # half the draws each way
    assert again["signed"] == pytest.approx([math.exp(-d) - 1.0, math.exp(d) - 1.0])
    kept = hi.kind_intervals([case("g", {TTFT: 0.07})], resamples=50, repeats={TTFT: [r]})
    assert "measured_again" not in kept["pooled"][TTFT]          # an inference-perf case repeats nothing
    flat = hi.kind_intervals([case("g", {TTFT: 0.07}, silicon=True)], resamples=50, repeats={TTFT: [0.0]})
    assert flat["pooled"][TTFT]["measured_again"]["abs"] == pytest.approx([0.07, 0.07])


def test_where_an_interval_lies_against_a_target():
    assert hi._where([0.04, 0.06], 0.03, True) == "past"
    assert hi._where([0.01, 0.02], 0.03, True) == "short"
    assert hi._where([0.02, 0.04], 0.03, True) == "across"
    assert hi._where([-0.09, -0.06], -0.05, False) == "past"     # a signed miss below -5 %
    assert hi._where([-0.06, -0.04], -0.05, False) == "across"
    assert hi._where(None, 0.03, True) is None


def _ints(abs_value, boot, again=None, diff=None):
    cell = {"n": 9, "abs": abs_value, "signed": 0.0, "bootstrap": {"abs": boot, "signed": [-0.01, 0.01]}}
    if again:
        cell["measured_again"] = {"abs": again, "signed": [-0.01, 0.01]}
    return {"pooled": {"request_throughput": cell}, "moe_minus_dense": {"request_throughput": diff} if diff else {}}


def test_misses_say_whether_the_target_is_inside_either_interval():
    row = hi.misses("family", _ints(0.032, [0.022, 0.045], [0.028, 0.039]))
    assert [r["verdict"] for r in row] == ["NOT met, the target inside the bootstrap and measured-again intervals"]
    row = hi.misses("source", _ints(0.055, [0.045, 0.076], [0.052, 0.067]))
    assert row[0]["verdict"] == "NOT met, outside both intervals" and row[0]["target"] == 0.03
    row = hi.misses("GPU", _ints(0.026, [0.014, 0.041], [0.021, 0.027]))
    assert row[0]["verdict"] == "met; the bootstrap interval reaches past the target"
    assert hi.misses("GPU", _ints(0.01, [0.005, 0.02], [0.008, 0.012])) == []
    diff = {"point": 0.036, "bootstrap": [0.013, 0.044], "measured_again": [0.031, 0.042]}
    row = hi.misses("GPU", _ints(0.01, [0.005, 0.02], diff=diff))
    assert row[0]["what"] == "MoE - dense abs error" and row[0]["verdict"] == "NOT met, outside both intervals"
    row = hi.misses("source", _ints(0.05, [0.045, 0.076]))
    assert row[0]["verdict"] == "NOT met, outside the bootstrap interval (no measured-again one)"


@pytest.mark.parametrize("cases, kw, message", [
    ([], {}, "no held-out cases"),
    ([case("g", {TTFT: math.nan})], {}, "held-out group 'g': mean_ttft_ms error nan is not a finite number > -1"),
    ([case("g", {TTFT: -1.0})], {}, "is not a finite number > -1"),
    ([case("g", {TTFT: 0.1})], {"resamples": 0}, "resamples 0 must be >= 1"),
    ([case("g", {TTFT: 0.1})], {"level": 1.0}, "level 1.0 in (0, 1)")])
def test_hostile_input_is_one_line(cases, kw, message):
    with pytest.raises(TwinInputError) as exc:
        hi.kind_intervals(cases, **kw)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def _report(errors_by_group: dict[str, dict[str, dict[str, float]]]) -> dict:
    return {"folds": {"family": {"pooled": {}, "folds": [{"held_out": g, "errors": e}
                                                         for g, e in errors_by_group.items()]}}}


def test_a_saved_report_gives_its_cases_and_the_intervals_key():
    from benchmarks.fold_report import FoldReport
    rep = FoldReport(_report({"a": {"x": {TTFT: 0.1}, "y": {TTFT: -0.3}}, "b": {"z": {TPOT: 0.02}}}))
    info = {"x": (False, True), "y": (True, True), "z": (False, False)}
    cases = hi.report_cases(rep, "family", info)
    assert cases == [("a", False, True, {TTFT: 0.1}), ("a", True, True, {TTFT: -0.3}),
                     ("b", False, False, {TPOT: 0.02})]
    out = hi.report_intervals({"family": cases}, {TTFT: [0.02]}, resamples=100)
    assert out["kinds"]["family"]["pooled"][TTFT]["n"] == 2 and out["repeat_pairs"] == {TTFT: 1}
    assert "| family | pooled | 2 |" in hi.markdown(out)
    # a kind whose every group --groups left out holds nothing out: no intervals, no error (fidelity_real's case)
    assert list(hi.report_intervals({"family": cases, "GPU": []}, None, resamples=10)["kinds"]) == ["family"]
    # a capped run's name (--silicon-max-requests) finds its row
    assert hi.case_of(info, "x [160/640]") == (False, True)
    with pytest.raises(TwinInputError, match="case 'z' is not in the ground truth"):
        hi.report_cases(rep, "family", {"x": (False, True), "y": (True, True)})
    with pytest.raises(TwinInputError, match="no GPU folds"):
        hi.report_cases(rep, "GPU", info)


def test_a_nan_in_a_saved_report_is_one_line():
    from benchmarks.fold_report import FoldReport
    rep = FoldReport(_report({"a": {"x": {TTFT: math.nan}}}))
    with pytest.raises(TwinInputError, match="not a finite number"):
        hi.report_cases(rep, "family", {"x": (False, True)})


@pytest.mark.parametrize("argv, message", [
    (["--resamples", "0"], "argument --resamples: '0': must be >= 1"),
    (["--level", "1"], "argument --level: '1': must be <= 0.999"),
    (["--seed", "-1"], "argument --seed: '-1': must be >= 0")])
def test_cli_bad_options_are_one_line(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.setattr(sys, "argv", ["heldout_intervals.py", str(tmp_path / "r.json"), *argv])
    with pytest.raises(SystemExit) as exc:
        hi.run_script(hi.main)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]


def test_cli_bad_report_is_one_line(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({"folds": {}}))
    monkeypatch.setattr(sys, "argv", ["heldout_intervals.py", str(bad)])
    with pytest.raises(SystemExit) as exc:
        hi.run_script(hi.main)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no folds" in err[0]
