"""benchmarks/whatif_fidelity.py and whatif_pairs.py: held-out pairs one knob apart and the error of the predicted
change between them (issue 33, round 22). Exact tests on hand-built reports and attributes."""

from __future__ import annotations

import json
import sys

import pytest

from benchmarks.fold_report import FoldReport
from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError

wp = load_benchmark("whatif_pairs")
wf = load_benchmark("whatif_fidelity")
TTFT, TPOT, E2E, THR = "mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "request_throughput"


def attrs(**over) -> dict:
    """Attributes of a case: every one at a base value, ``over`` as (key, label) or a bare value (its own label)."""
    base = {a: ((0,), "x") for a in wp.ATTRIBUTES}
    for k, v in over.items():
        base[k] = v if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], tuple) else ((v,), f"{k} {v}")
    return base


KNOBS = {"a": attrs(concurrency=4), "b": attrs(concurrency=16), "c": attrs(concurrency=16, layout=2),
         "d": attrs(concurrency=16, model=1), "e": attrs(concurrency=4, client=1)}


def test_pairs_differ_in_exactly_one_knob_and_run_from_the_smaller_value():
    pairs = wp.find_pairs(["b", "a", "c", "d", "e"], KNOBS)
    # b-a: concurrency (oriented a -> b whatever the order given); b-c: layout; a-c two knobs; d: another model,
    # e: another client (held equal, never a knob)
    assert pairs == [("concurrency", "a", "b"), ("layout", "b", "c")]


def test_a_pair_needs_attributes_for_every_case():
    with pytest.raises(TwinInputError, match="'z' has no attributes"):
        wp.find_pairs(["a", "z"], KNOBS)
    bad = dict(KNOBS, a={k: v for k, v in KNOBS["a"].items() if k != "gpu"})
    with pytest.raises(TwinInputError, match="no gpu attribute"):
        wp.find_pairs(["a", "b"], bad)
    with pytest.raises(TwinInputError, match="not \\(order key tuple, label\\)"):
        wp.find_pairs(["a"], {"a": attrs(gpu=((1,), 2))})


def test_bias_that_cancels_gives_the_change_exactly():
    m = wp.pair_metric(-0.2, -0.2, 100.0, 150.0, TTFT)
    assert m["ratio_error"] == pytest.approx(0.0) and m["measured_change"] == pytest.approx(0.5)
    assert m["predicted_change"] == pytest.approx(0.5) and m["direction"] is True
    assert m["abs_error"] == pytest.approx(0.2) and m["cancels"] and not m["compounds"]


def test_a_wrong_direction_and_bias_that_compounds():
    # measured +10 %, the larger predicted 20 % low, the smaller exact: predicted change 1.1 x 0.8 - 1 = -12 %
    m = wp.pair_metric(0.0, -0.2, 100.0, 110.0, TTFT)
    assert m["ratio_error"] == pytest.approx(-0.2) and m["predicted_change"] == pytest.approx(-0.12)
    assert m["direction"] is False
    assert m["abs_error"] == pytest.approx(0.1) and m["compounds"] and not m["cancels"]   # 0.1 meets the 10 % target


def test_direction_is_judged_only_beyond_the_repeat_floor():
    assert wp.pair_metric(0.0, 0.1, 100.0, 102.0, TTFT)["direction"] is None          # 2 % < 3 % TTFT floor
    assert wp.pair_metric(0.0, 0.1, 100.0, 102.0, TTFT, floor_scale=0.5)["direction"] is True   # > 1.5 %
    assert wp.pair_metric(0.0, 0.0, 100.0, 100.5, TPOT)["direction"] is True          # 0.5 % > 0.4 % TPOT floor
    assert wp.pair_metric(0.0, 0.0, 100.0, 100.3, TPOT)["direction"] is None


def test_bad_errors_and_measured_values_are_one_line():
    with pytest.raises(TwinInputError, match="above -100 %"):
        wp.pair_metric(-1.0, 0.0, 1.0, 2.0, TTFT)
    with pytest.raises(TwinInputError, match="not a finite"):
        wp.pair_metric(float("nan"), 0.0, 1.0, 2.0, TTFT)
    with pytest.raises(TwinInputError, match="not both positive"):
        wp.pair_metric(0.0, 0.0, 0.0, 2.0, TTFT)
    with pytest.raises(TwinInputError, match="not both positive"):
        wp.pair_metric(0.0, 0.0, None, 2.0, TTFT)


ERRORS = {"a": {TTFT: 0.10, TPOT: -0.05}, "b": {TTFT: 0.32, TPOT: -0.05}, "c": {TTFT: 0.10}}
MEASURED = {"a": {TTFT: 100.0, TPOT: 20.0}, "b": {TTFT: 200.0, TPOT: 30.0}, "c": {TTFT: 100.0}}


def test_fold_pairs_and_their_summary():
    pairs = wp.fold_pairs("GPU", "B200", ERRORS, KNOBS, MEASURED)
    assert [(p["knob"], p["small"], p["large"], p["from"], p["to"]) for p in pairs] == [
        ("concurrency", "a", "b", "concurrency 4", "concurrency 16"), ("layout", "b", "c", "x", "layout 2")]
    conc = pairs[0]["metrics"]
    assert conc[TTFT]["ratio_error"] == pytest.approx(1.32 / 1.10 - 1)          # +20 %
    assert conc[TPOT]["ratio_error"] == pytest.approx(0.0)
    assert set(pairs[1]["metrics"]) == {TTFT}                                   # c has no TPOT
    # layout b -> c: measured 200 -> 100 (-50 %), predicted 264 -> 110
    assert pairs[1]["metrics"][TTFT]["predicted_change"] == pytest.approx(110 / 264 - 1)
    table = wp.table(pairs)
    assert list(table) == ["GPU"] and list(table["GPU"]) == ["concurrency", "layout"]
    s = table["GPU"]["concurrency"][TTFT]
    assert s["n"] == 1 and s["ratio_abs_median"] == pytest.approx(0.2) and s["ratio_signed_median"] == pytest.approx(0.2)
    assert s["abs_error_median"] == pytest.approx(0.21) and s["direction_judged"] == 1 and s["direction_right"] == 1.0
    assert s["cancels"] == 0 and s["compounds"] == 0          # both miss the 10 % target: neither
    assert table["GPU"]["layout"][TTFT]["ratio_signed_median"] == pytest.approx(1.10 / 1.32 - 1)
    assert TPOT not in table["GPU"]["layout"]


def test_medians_over_several_pairs():
    rows = [{"kind": "family", "knob": "rate", "metrics": {TTFT: wp.pair_metric(0.0, e, 10.0, 20.0, TTFT)}}
            for e in (0.1, -0.3, 0.05)]
    s = wp.summarize(rows)[TTFT]
    assert s["n"] == 3 and s["ratio_abs_median"] == pytest.approx(0.1) and s["ratio_signed_median"] == pytest.approx(0.05)
    assert s["direction_judged"] == 3 and s["direction_right"] == 1.0        # +100 % measured, every prediction up


def report(folds: dict[str, dict], kind: str = "family") -> FoldReport:
    return FoldReport({"folds": {kind: {"folds": [{"held_out": g, "errors": e} for g, e in folds.items()]}}})


def test_pairs_come_from_one_fold_only():
    # a and b are held out in different folds: not a pair (two fitted models); the " [..]" suffix is read off
    rep = report({"llama": {"a": ERRORS["a"]}, "kimi": {"b [2]": ERRORS["b"], "c": ERRORS["c"]}})
    pairs = wf.report_pairs(rep, ["family"], KNOBS, MEASURED)
    assert [(p["held_out"], p["knob"], p["small"], p["large"]) for p in pairs] == [("kimi", "layout", "b", "c")]
    with pytest.raises(TwinInputError, match="no GPU folds"):
        wf.report_pairs(rep, ["GPU"], KNOBS, MEASURED)


def test_the_table_prints_one_line_per_kind_knob_and_metric():
    lines = wf.table_lines(wp.table(wp.fold_pairs("GPU", "B200", ERRORS, KNOBS, MEASURED)))
    assert len(lines) == 1 + 2 + 1            # header, concurrency TTFT and TPOT, layout TTFT
    assert lines[1].split()[:6] == ["GPU", "concurrency", "TTFT", "mean", "1", "20.0%"]


def test_the_script_refuses_a_missing_ground_truth_and_a_bad_floor(tmp_path, monkeypatch, capsys):
    rep = tmp_path / "r.json"
    rep.write_text(json.dumps({"folds": {"GPU": {"folds": [{"held_out": "B200", "errors": {}}]}}}))
    monkeypatch.setattr(sys, "argv", ["whatif_fidelity.py", str(rep), "--ground-truth", str(tmp_path / "none")])
    with pytest.raises(TwinInputError, match="not a folder"):
        wf.main()
    monkeypatch.setattr(sys, "argv", ["whatif_fidelity.py", str(rep), "--ground-truth", str(tmp_path),
                                      "--floor-scale", "0"])
    with pytest.raises(SystemExit):
        wf.main()
    assert "--floor-scale" in capsys.readouterr().err


def test_orientation_keys_of_the_format_and_release_labels():
    assert wf._bits("fp8") == 8 and wf._bits("NVFP4") == 4 and wf._bits("bf16") == 16 and wf._bits(None) == 16
    assert wf._release_key("0.10.2") > wf._release_key("0.9.1")               # numeric, not text order
    assert wf._release_key("nightly-5b8c30d62b754b57") == ()
    assert wf._release_key("") == ()


GT = wf.Path(__file__).resolve().parents[1].parent / "shared" / "ground-truth"


@pytest.mark.skipif(not GT.is_dir(), reason="ground truth not present beside the project")
def test_ground_truth_attributes_pair_what_one_knob_separates():
    knobs, measured = wf.ground_truth_attributes(None)
    c32 = "2026_04_06_gpt_oss_120b_h100_sxm_vllm_fp4_agg_8192x1024_c32_tp8_ep1_399"
    c64 = "2026_04_06_gpt_oss_120b_h100_sxm_vllm_fp4_agg_8192x1024_c64_tp8_ep1_319"
    s0, s1 = "20260217-155451-llama-2-7b-tp1-codegen/stage0", "20260217-155451-llama-2-7b-tp1-codegen/stage1"
    assert wp.differing(knobs[c32], knobs[c64]) == ["concurrency"]
    assert wp.differing(knobs[s0], knobs[s1]) == ["rate"]
    assert wp.find_pairs([c64, c32, s1, s0], knobs) == [("concurrency", c32, c64), ("rate", s0, s1)]
    assert knobs[c32]["layout"][1] == "TP 8" and knobs[c32]["lengths"][1] == "8192x1024"
    assert measured[c32][TTFT] > 0


def test_a_looser_pairing_lets_the_release_differ_too():
    knobs = {"a": attrs(gpu=1, release=1), "b": attrs(gpu=2, release=2)}
    assert wp.find_pairs(["a", "b"], knobs) == []
    assert wp.find_pairs(["a", "b"], knobs, ignore=("release",)) == [("gpu", "a", "b")]
    with pytest.raises(TwinInputError, match="not an attribute a pair may differ in"):
        wp.find_pairs(["a", "b"], knobs, ignore=("model",))
