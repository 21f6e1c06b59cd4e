"""benchmarks/gptoss_ttft_terms.py and gptoss_first_wave.py (round 13's reading of gpt-oss's held-out TTFT): the
values a held-out gpt-oss case is simulated at, per fold and embedded, on hand-made folds; the implied rest of a
run's mean TTFT."""

from __future__ import annotations

import json

import pytest

from benchmark_module import load_benchmark
from twin.cost.marlin_mxfp4 import MARLIN_MXFP4_HOPPER_TERMS
from twin.fitting.joint import default_start


def test_fold_values_fall_back_to_the_unscoped_fitted_value_only_where_the_fold_carries_no_entry():
    t = load_benchmark("gptoss_ttft_terms")
    fold = {"params": {"request_path_s": 0.004, "layer_token_overhead_s": 1e-9,
                       "layer_token_overhead_s@hopper+experts_mxfp4": 1.9e-7}}
    v = t.fold_values(fold)
    assert v["request_path_s@client_vllm_bench"] == 0.004            # not fitted: the unscoped fitted value
    assert v["layer_token_overhead_s@blackwell"] == 1e-9
    assert v["layer_token_overhead_s@hopper+experts_mxfp4"] == 1.9e-7  # carried: kept
    assert "step_overhead_s" not in v                                  # neither: the cost model's embedded default


def test_embedded_values_resolve_a_path_without_an_entry_to_its_generation_then_the_unscoped_default():
    t = load_benchmark("gptoss_ttft_terms")
    emb = t.embedded_values()
    gen = default_start(("layer_token_overhead_s@blackwell", "eager_moe_layer_host_s@blackwell"))
    assert emb["layer_token_overhead_s@blackwell+experts_mxfp4"] == gen["layer_token_overhead_s@blackwell"]
    assert emb["eager_moe_layer_host_s@blackwell+experts_mxfp4"] == gen["eager_moe_layer_host_s@blackwell"]
    assert emb["layer_token_overhead_s@hopper+experts_mxfp4"] == pytest.approx(
        MARLIN_MXFP4_HOPPER_TERMS["layer_token_overhead_s"])           # the path's own entry
    assert emb["layer_token_decode_share@hopper+experts_mxfp4"] == default_start(("layer_token_decode_share",))[
        "layer_token_decode_share"]
    assert set(emb) == set(t.ALL)


def test_fold_of_picks_the_fold_holding_the_group_out(tmp_path):
    t = load_benchmark("gptoss_ttft_terms")
    report = tmp_path / "r.json"
    folds = [{"held_out": g, "params": {"x": i}, "errors": {}} for i, g in enumerate(("llama", "gpt-oss"))]
    report.write_text(json.dumps({"folds": {"family": {"folds": folds}}}))
    assert t.fold_of(report, "family", "gpt-oss")["params"] == {"x": 1}


def test_implied_rest_is_what_the_measured_mean_leaves_after_the_first_wave():
    w = load_benchmark("gptoss_first_wave")
    assert w.implied_rest_ms(40.0, 10, 130.0, 1) == pytest.approx(30.0)          # (400 - 130) / 9
    assert w.implied_rest_ms(50.0, 80, 50.0, 8) == pytest.approx(50.0)           # a first wave at the mean


def test_a_fold_the_report_lacks_is_a_one_line_input_error(tmp_path):
    from twin.errors import TwinInputError
    t = load_benchmark("gptoss_ttft_terms")
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"folds": {"GPU": {"folds": [{"held_out": "B200", "params": {}, "errors": {}}]}}}))
    with pytest.raises(TwinInputError, match="held out: B200"):
        t.fold_of(report, "GPU", "H100")
    with pytest.raises(TwinInputError, match="no family folds"):
        t.fold_of(report, "family", "gpt-oss")


def test_a_path_without_an_entry_falls_back_to_its_generations_fitted_value_before_the_unscoped_one():
    t = load_benchmark("gptoss_ttft_terms")
    fold = {"params": {"layer_token_overhead_s": 1e-20, "layer_token_overhead_s@blackwell": 1.6e-7,
                       "eager_moe_layer_host_s@blackwell": 1.4e-3}}
    v = t.fold_values(fold)
    assert v["layer_token_overhead_s@blackwell+experts_mxfp4"] == 1.6e-7     # params_for's resolution, not 1e-20
    assert v["eager_moe_layer_host_s@blackwell+experts_mxfp4"] == 1.4e-3
    assert v["layer_token_overhead_s@hopper+experts_mxfp4"] == 1e-20          # no Hopper entry: the unscoped one
