"""benchmarks/eval_window_reading.py: its option parsing, a fold's parameters out of a saved report, and the
report's pooled medians with the inference-perf stages' errors replaced (exact, no simulation)."""

import pytest

from benchmarks.eval_window_reading import fold_params, parse_windows, pooled_of, spliced
from twin.errors import TwinInputError


def test_windows_parse_numbers_and_whole():
    assert parse_windows("60,whole") == [60.0, None]
    assert parse_windows(" 30 , 120 ") == [30.0, 120.0]


@pytest.mark.parametrize("text", ["", "60,60", "abc", "0", "-5", "inf", "nan", "60,whole,whole"])
def test_windows_hostile_is_one_line_error(text):
    with pytest.raises(TwinInputError) as err:
        parse_windows(text)
    assert "--windows" in str(err.value) and "\n" not in str(err.value)


REPORT = {"folds": {
    "source": {"pooled": None, "folds": [
        {"held_out": "inference-perf", "params": {"step_overhead_s": 0.002},
         "errors": {"a/stage0": {"mean_ttft_ms": 0.10, "mean_tpot_ms": -0.02},
                    "a/stage1": {"mean_ttft_ms": -0.30, "mean_tpot_ms": 0.04}}},
        {"held_out": "silicon", "params": {}, "errors": {"row1": {"mean_ttft_ms": 0.2, "mean_tpot_ms": -0.1}}}]},
    "family": {"pooled": None, "folds": [
        {"held_out": "llama", "params": {}, "errors": {"a/stage0": {"mean_ttft_ms": 0.5}}}]}}}


def test_fold_params_found_and_missing():
    assert fold_params(REPORT, "source:inference-perf") == ("source", "inference-perf", {"step_overhead_s": 0.002})
    for bad in ("source:nope", "nokind:x", "source:", "defaults"):
        with pytest.raises(TwinInputError) as err:
            fold_params(REPORT, bad)
        assert "\n" not in str(err.value)


def test_pooled_of_medians():
    got = pooled_of([{"mean_ttft_ms": 0.1}, {"mean_ttft_ms": -0.3}, {"mean_ttft_ms": 0.2, "mean_tpot_ms": 0.05}])
    assert got["mean_ttft_ms"] == {"n": 3, "abs": 0.2, "signed": 0.1}
    assert got["mean_tpot_ms"] == {"n": 1, "abs": 0.05, "signed": 0.05}
    assert got["median_ttft_ms"] == {"n": 0, "abs": None, "signed": None}


def test_spliced_replaces_stage_errors_and_keeps_silicon():
    variants = {"source:inference-perf": {
        "cases": ["a/stage0", "a/stage1"],
        "errors": {"60 s": {"a/stage0": {"mean_ttft_ms": 0.10, "mean_tpot_ms": -0.02},
                            "a/stage1": {"mean_ttft_ms": -0.30, "mean_tpot_ms": 0.04}},
                   "whole": {"a/stage0": {"mean_ttft_ms": 0.0, "mean_tpot_ms": -0.01},
                             "a/stage1": {"mean_ttft_ms": -0.5, "mean_tpot_ms": 0.02}}}}}
    out = spliced(REPORT, variants, ["60 s", "whole"])
    assert set(out) == {"source"}          # the family kind holds a stage this reading did not run: left out
    assert out["source"]["60 s"]["mean_ttft_ms"] == {"n": 3, "abs": 0.2, "signed": 0.1}
    assert out["source"]["whole"]["mean_ttft_ms"] == {"n": 3, "abs": 0.2, "signed": 0.0}
    assert out["source"]["whole"]["mean_tpot_ms"] == {"n": 3, "abs": 0.02, "signed": -0.01}


def test_eval_window_option_takes_seconds_or_whole_and_defaults_to_whole():
    import argparse

    from benchmarks.cli_checks import seconds_or_whole
    from benchmarks.fidelity_real import OPEN_LOOP_FOLD_FIT_S, parser
    assert seconds_or_whole("whole") is None and seconds_or_whole("60") == 60.0
    for bad in ("0", "-1", "nan", "inf", "all"):
        with pytest.raises(argparse.ArgumentTypeError):
            seconds_or_whole(bad)
    assert parser().parse_args([]).eval_sim_s is None
    assert parser().parse_args(["--eval-sim-s", "60"]).eval_sim_s == 60.0
    assert OPEN_LOOP_FOLD_FIT_S is None          # round 21: a fold trained on the stages alone fits them whole
