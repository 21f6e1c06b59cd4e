"""benchmarks/token_frame_prior.py and benchmarks/gptoss_token_frame.py (round 18's reading: the held-out Hopper
MXFP4 path's carried per-token cost in the fold's Blackwell frame): exact values on made-up readings and folds."""

from __future__ import annotations

import math

import pytest

from benchmark_module import load_benchmark
from twin.errors import TwinInputError
from benchmarks import token_frame_prior as tf

KEY, SHARE_KEY = "layer_token_overhead_s@hopper+experts_mxfp4", "layer_token_decode_share@hopper+experts_mxfp4"
READINGS = (("B200 a", 0.24e-6, lambda c, d: c == "kimi"), ("B200 b", 0.15e-6, lambda c, d: c == "minimax"),
            ("H100 c", 0.2e-6, lambda c, d: c == "gpt-oss"))


@pytest.fixture
def readings(monkeypatch):
    monkeypatch.setattr(tf, "MOE_TOKEN_READINGS", READINGS)


def test_frame_ratio_is_the_fitted_blackwell_term_over_the_embedded_one_and_none_without_a_positive_fit():
    assert tf.EMBEDDED_FRAME_S == pytest.approx(0.2e-6)
    assert tf.frame_ratio({"layer_token_overhead_s@blackwell": 0.16e-6}) == pytest.approx(0.8)
    assert tf.frame_ratio({}) is None
    assert tf.frame_ratio({"layer_token_overhead_s@blackwell": 0.0}) is None


def test_framed_value_scales_only_the_blackwell_readings_and_drops_the_held_out_ones(readings):
    held = [("gpt-oss", None)]
    assert tf.framed_value(held, 0.8) == pytest.approx(math.sqrt(0.24e-6 * 0.8 * 0.15e-6 * 0.8))
    assert tf.framed_value([("kimi", None)], 0.5) == pytest.approx(math.sqrt(0.15e-6 * 0.5 * 0.2e-6))
    assert tf.framed_value([("kimi", None), ("minimax", None), ("gpt-oss", None)], 0.8) is None


def test_framed_prior_replaces_the_per_token_entries_and_sets_the_share_only_when_asked(readings):
    params = {"layer_token_overhead_s@blackwell": 0.16e-6}
    prior = {KEY: 0.19e-6, SHARE_KEY: 0.0, "moe_expert_compute_efficiency@hopper+experts_mxfp4": 1.0}
    v = math.sqrt(0.24e-6 * 0.8 * 0.15e-6 * 0.8)
    assert tf.framed_prior(prior, params, [("gpt-oss", None)]) == {KEY: pytest.approx(v)}
    assert tf.framed_prior(prior, params, [("gpt-oss", None)], decode_share=1.0) == {KEY: pytest.approx(v),
                                                                                      SHARE_KEY: 1.0}
    assert tf.framed_prior(prior, {}, [("gpt-oss", None)]) == {}          # no Blackwell fit: no frame
    with pytest.raises(TwinInputError, match="decode share"):
        tf.framed_prior(prior, params, [], decode_share=1.5)


def test_a_reading_on_an_unknown_gpu_is_one_line(monkeypatch):
    monkeypatch.setattr(tf, "MOE_TOKEN_READINGS", (("A100 x", 0.1e-6, lambda c, d: False),))
    with pytest.raises(TwinInputError, match="A100 x"):
        tf.framed_value([], 0.8)


def test_the_real_readings_name_known_gpus():
    assert {tf.reading_generation(label) for label, _, _ in tf.MOE_TOKEN_READINGS} == {"hopper", "blackwell"}


def test_script_pooled_cells_and_variants():
    g = load_benchmark("gptoss_token_frame")
    every = {"a": {"mean_ttft_ms": 0.3}, "b": {"mean_ttft_ms": -0.1}, "c": {"mean_tpot_ms": 0.2}}
    assert g.pooled(every, {"a": {"mean_ttft_ms": 0.05}}, "mean_ttft_ms") == [0.05, -0.1]
    assert g.cell([0.05, -0.1, 0.2]) == "10.0 (+5.0)"
    assert g.cell([]) == "-"
    values = {KEY: 0.19e-6, SHARE_KEY: 0.0, "step_overhead_s": 2e-3}
    framed = {KEY: 0.15e-6, SHARE_KEY: 1.0}
    v = g.variants(values, framed)
    assert v["fold"] == values
    assert v["framed, share kept"] == values | {KEY: 0.15e-6}
    assert v["framed, share 1"] == values | framed
    assert v["share 1 alone"] == values | {SHARE_KEY: 1.0}
    with pytest.raises(TwinInputError, match="nothing to vary"):
        g.variants(values, {})


def test_script_refuses_a_gpu_off_hoppers_mxfp4_path(monkeypatch, tmp_path):
    g = load_benchmark("gptoss_token_frame")
    monkeypatch.setattr("sys.argv", ["gptoss_token_frame.py", str(tmp_path / "r.json"), "--gpu", "B200"])
    with pytest.raises(TwinInputError, match="not a Hopper GPU"):
        g.main()
