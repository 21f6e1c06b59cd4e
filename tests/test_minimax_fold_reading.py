"""The pure helpers of benchmarks/minimax_fold_reading.py (issue 33, round 15): held-out cases read from a report,
the decode-tracking tag, GPU counts and the split per-request form, group medians."""

from __future__ import annotations

import math

import pytest
from benchmark_module import load_benchmark

from twin.errors import TwinInputError

mod = load_benchmark("minimax_fold_reading")


def _report() -> dict:
    return {"folds": {"family": {"folds": [
        {"held_out": "minimax", "errors": {
            "minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c4_cfg1": {"mean_ttft_ms": -0.2, "mean_tpot_ms": 0.01},
            "2026_03_25_minimax_m2_5_b200_sxm_vllm_fp4_x": {"mean_ttft_ms": 0.1, "mean_tpot_ms": 0.2}}},
        {"held_out": "kimi", "errors": {"kimi_k2_5_b200_x": {"mean_ttft_ms": 0.3, "mean_tpot_ms": 0.0}}}]}}}


def test_held_out_errors_keeps_the_family_of_every_fold():
    out = mod.held_out_errors(_report())
    assert sorted(out) == ["family:2026_03_25_minimax_m2_5_b200_sxm_vllm_fp4_x",
                           "family:minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c4_cfg1"]
    kind, group, errs = out["family:minimaxm2_5_b200_vllm_fp8_agg_1024x1024_c4_cfg1"]
    assert (kind, group, errs["mean_ttft_ms"]) == ("family", "minimax", -0.2)
    assert list(mod.held_out_errors(_report(), family="kimi")) == ["family:kimi_k2_5_b200_x"]


def test_held_out_errors_without_folds_is_an_input_error():
    with pytest.raises(TwinInputError, match="no folds"):
        mod.held_out_errors({"cases": []})


@pytest.mark.parametrize(("ttft", "tpot", "expected"), [
    (0.15, 0.12, True), (-0.2, -0.09, True), (0.15, -0.12, False), (0.15, 0.04, False),
    (0.15, 0.05, True), (None, 0.2, False), (0.1, None, False)])
def test_tracks_decode(ttft, tpot, expected):
    assert mod.tracks_decode(ttft, tpot) is expected


def test_layout_gpus_and_the_split_form():
    assert mod.layout_gpus(2, 1) == 2 and mod.layout_gpus(2, 2) == 4 and mod.layout_gpus(4, 4) == 16
    assert mod.split_request_s(11.35e-3, 4) == pytest.approx(11.35e-3)        # read at TP 4: unchanged there
    assert mod.split_request_s(11.35e-3, 2) == pytest.approx(22.7e-3)
    assert mod.split_request_s(11.35e-3, 16) == pytest.approx(2.8375e-3)
    with pytest.raises(TwinInputError):
        mod.layout_gpus(0, 1)
    with pytest.raises(TwinInputError):
        mod.split_request_s(-1.0, 2)
    with pytest.raises(TwinInputError):
        mod.split_request_s(1.0, 0)


def test_group_medians():
    recs = [{"g": "a", "mean_ttft_ms": -0.2, "mean_tpot_ms": 0.0}, {"g": "a", "mean_ttft_ms": 0.0, "mean_tpot_ms": 0.1},
            {"g": "a", "mean_ttft_ms": 0.4, "mean_tpot_ms": None}, {"g": "b", "mean_ttft_ms": None, "mean_tpot_ms": None}]
    out = mod.group_medians(recs, lambda r: (r["g"],))
    assert out[("a",)] == {"n": 3, "mean_ttft_ms": 0.0, "mean_tpot_ms": pytest.approx(0.05)}
    assert out[("b",)]["n"] == 1 and math.isnan(out[("b",)]["mean_ttft_ms"])
