"""Issue 33, round 11: the block-FP8 expert path's fixed GPU time per MoE layer in prompt steps
(``twin.cost.prompt_moe_fixed``, ``moe_prompt_layer_s``) and its held-out prior across GPU generations
(``twin.fitting.prompt_fixed_prior``): the embedded values by path, the charge by hand on prompt steps only (step
by step, the fit's arrays, ``explain()``), under the eager floor, the scoped fit names, bad values, and the fold
prior scaled by the FP8 tensor rates."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest
from core_helpers import check_prompt_only_term
from core_helpers import step_shape as step

from twin.cost.generation_experts import GENERATION_EXPERT_TERMS
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.prompt_fixed_prior import key, prompt_fixed_prior, rate_ratio
from twin.fitting.provenance import REFIT, RESET
from twin.hardware.catalog import resolve_model

MINIMAX = "MiniMaxAI/MiniMax-M2.5"


def test_embedded_on_the_block_fp8_path_of_both_generations_only():
    for gpu, want in (("B200", 0.183e-3), ("H100-SXM", 0.42e-3)):
        m = RooflineCostModel(MINIMAX, gpu, tensor_parallel_size=4, weight_dtype="fp8")
        assert m.moe_prompt_layer_s == want
        assert m.moe_prompt_fixed_s == pytest.approx(62 * want, rel=1e-12)
    for gpu, dtype in (("B200", "nvfp4"), ("H100-SXM", "bf16")):
        assert RooflineCostModel(MINIMAX, gpu, tensor_parallel_size=4, weight_dtype=dtype).moe_prompt_fixed_s == 0.0
    dense = RooflineCostModel("llama-3.1-70b", "B200", tensor_parallel_size=2, weight_dtype="fp8",
                              moe_prompt_layer_s=1e-3)
    assert dense.moe_prompt_fixed_s == 0.0      # no MoE layer


def test_prompt_steps_pay_it_per_moe_layer_and_decodes_do_not():
    plain = RooflineCostModel(MINIMAX, "B200", tensor_parallel_size=4, weight_dtype="fp8", moe_prompt_layer_s=0.0)
    m = RooflineCostModel(MINIMAX, "B200", tensor_parallel_size=4, weight_dtype="fp8", moe_prompt_layer_s=0.25e-3)
    assert resolve_model(MINIMAX).moe_layers == 62
    check_prompt_only_term(m, plain, "moe_prompt_layer_s", 62 * 0.25e-3)


def test_gpu_time_under_the_eager_floor():
    kw = dict(model=MINIMAX, gpu="B200", tensor_parallel_size=4, weight_dtype="fp8", cudagraph_tokens=(8, 0),
              eager_layer_host_s=1e-3, eager_moe_layer_host_s=0.0)
    s = step([1024], [0])
    floor = 62 * 1e-3
    gpu_s = RooflineCostModel(**(kw | dict(eager_layer_host_s=0.0)), moe_prompt_layer_s=0.0).step_time_s(s)
    assert RooflineCostModel(**kw, moe_prompt_layer_s=0.0).step_time_s(s) == floor
    assert gpu_s < floor - 62 * 0.1e-3          # the floor binds with room for the term under it
    assert RooflineCostModel(**kw, moe_prompt_layer_s=0.1e-3).step_time_s(s) == pytest.approx(floor, rel=1e-12)
    big = RooflineCostModel(**kw, moe_prompt_layer_s=1e-3)
    assert big.step_time_s(s) == pytest.approx(gpu_s + 62e-3, rel=1e-12)     # GPU time beyond the floor


def test_scoped_fit_names_and_bad_values():
    from twin.fitting.scoped import params_for
    from twin.hardware.catalog import resolve_gpu
    from twin.hardware.weight_formats import WeightFormats
    for g in ("hopper", "blackwell"):
        assert PARAMETERS_BY_NAME[key(g, "fp8")].prior == 0.0
    dep = NS(gpu=resolve_gpu("H100-SXM"), weight_formats=WeightFormats.uniform("fp8"), model=resolve_model(MINIMAX))
    got = params_for({key("hopper", "fp8"): 0.4e-3, key("blackwell", "fp8"): 0.2e-3}, dep)
    assert got == {"moe_prompt_layer_s": 0.4e-3}
    for bad in (-1e-3, float("nan"), "x"):
        with pytest.raises(TwinInputError, match="moe_prompt_layer_s"):
            RooflineCostModel(MINIMAX, "B200", tensor_parallel_size=4, weight_dtype="fp8", moe_prompt_layer_s=bad)


def _plan(actions):
    return NS(actions=actions)


def test_fold_prior_scales_the_kept_generation_by_the_fp8_rates():
    table = {("hopper", "fp8"): {"moe_prompt_layer_s": 0.42e-3}, ("blackwell", "fp8"): {"moe_prompt_layer_s": 0.183e-3},
             ("blackwell", "mxfp4"): {"fused_allreduce_latency_s": 11e-6}}
    assert rate_ratio("H100-SXM", "B200") == pytest.approx(1979.0 / 4500.0, rel=1e-12)
    # B200 held out: its entry reset, Hopper's kept -> 0.42 ms x 1979 / 4500
    got = prompt_fixed_prior(_plan({key("blackwell", "fp8"): ("rows", RESET)}), table)
    assert got == {key("blackwell", "fp8"): pytest.approx(0.42e-3 * 1979.0 / 4500.0, rel=1e-12)}
    got = prompt_fixed_prior(_plan({key("hopper", "fp8"): ("rows", RESET)}), table)
    assert got == {key("hopper", "fp8"): pytest.approx(0.183e-3 * 4500.0 / 1979.0, rel=1e-12)}
    # both held (the MiniMax family fold, the silicon fold): nothing; refit or kept: nothing
    both = {key(g, "fp8"): ("rows", RESET) for g in ("hopper", "blackwell")}
    assert prompt_fixed_prior(_plan(both), table) == {}
    assert prompt_fixed_prior(_plan({key("blackwell", "fp8"): ("rows", REFIT)}), table) == {}
    assert prompt_fixed_prior(_plan({}), table) == {}


def test_the_embedded_readings_predict_each_other_within_two_percent():
    h = GENERATION_EXPERT_TERMS[("hopper", "fp8")]["moe_prompt_layer_s"]
    b = GENERATION_EXPERT_TERMS[("blackwell", "fp8")]["moe_prompt_layer_s"]
    assert h * rate_ratio("H100-SXM", "B200") == pytest.approx(b, rel=0.02)
