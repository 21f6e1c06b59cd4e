"""Issue 33, round 11: the block-FP8 expert path's per-request time (``twin.cost.expert_path_request``,
``expert_path_request_s``) and its held-out prior across GPU generations (``twin.fitting.expert_request_prior``):
the embedded values by path, added to the request path and nowhere in the steps, the scoped fit names, bad values
and the fold prior scaled by the FP8 tensor rates."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest
from core_helpers import step_shape as step

from twin.cost.generation_experts import GENERATION_EXPERT_TERMS
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.fitting.expert_request_prior import expert_request_prior, key, rate_ratio
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.provenance import REFIT, RESET
from twin.hardware.catalog import resolve_model

MINIMAX = "MiniMaxAI/MiniMax-M2.5"


def test_embedded_on_the_block_fp8_path_of_both_generations_only():
    for gpu, want in (("B200", 11.35e-3), ("H100-SXM", 26.15e-3)):
        m = RooflineCostModel(MINIMAX, gpu, tensor_parallel_size=4, weight_dtype="fp8", request_path_s=4e-3)
        assert m.expert_path_request_s == want
        assert m.request_path_s == pytest.approx(4e-3 + want, rel=1e-12)
    for gpu, dtype in (("B200", "nvfp4"), ("H100-SXM", "bf16")):
        m = RooflineCostModel(MINIMAX, gpu, tensor_parallel_size=4, weight_dtype=dtype, request_path_s=4e-3)
        assert m.expert_path_request_s == 0.0 and m.request_path_s == 4e-3
    dense = RooflineCostModel("llama-3.1-70b", "B200", tensor_parallel_size=2, weight_dtype="fp8",
                              request_path_s=4e-3, expert_path_request_s=1e-3)
    assert dense.request_path_s == 4e-3      # no routed experts: no expert path


def test_no_step_pays_it():
    kw = dict(model=MINIMAX, gpu="B200", tensor_parallel_size=4, weight_dtype="fp8")
    plain, m = RooflineCostModel(**kw, expert_path_request_s=0.0), RooflineCostModel(**kw, expert_path_request_s=0.02)
    for s in (step([1024, 1, 1], [0, 900, 900]), step([1, 1], [900, 900])):
        assert m.step_time_s(s) == plain.step_time_s(s)
        assert m.explain(s) == plain.explain(s)
    assert m.request_path_s - plain.request_path_s == pytest.approx(0.02, rel=1e-12)


def test_scoped_fit_names_and_bad_values():
    from twin.fitting.scoped import params_for
    from twin.hardware.catalog import resolve_gpu
    from twin.hardware.weight_formats import WeightFormats
    for g in ("hopper", "blackwell"):
        assert PARAMETERS_BY_NAME[key(g, "fp8")].prior == 0.0
    dep = NS(gpu=resolve_gpu("H100-SXM"), weight_formats=WeightFormats.uniform("fp8"), model=resolve_model(MINIMAX))
    got = params_for({key("hopper", "fp8"): 0.03, key("blackwell", "fp8"): 0.01}, dep)
    assert got == {"expert_path_request_s": 0.03}
    for bad in (-1e-3, float("nan"), "x"):
        with pytest.raises(TwinInputError, match="expert_path_request_s"):
            RooflineCostModel(MINIMAX, "B200", tensor_parallel_size=4, weight_dtype="fp8", expert_path_request_s=bad)


def _plan(actions):
    return NS(actions=actions)


def test_fold_prior_scales_the_kept_generation_by_the_fp8_rates():
    table = {("hopper", "fp8"): {"expert_path_request_s": 0.026}, ("blackwell", "fp8"): {"expert_path_request_s": 0.011},
             ("blackwell", "mxfp4"): {"fused_allreduce_latency_s": 11e-6}}
    assert rate_ratio("H100-SXM", "B200") == pytest.approx(1979.0 / 4500.0, rel=1e-12)
    # B200 held out: its entry reset, Hopper's kept -> 26 ms x 1979 / 4500
    got = expert_request_prior(_plan({key("blackwell", "fp8"): ("rows", RESET)}), table)
    assert got == {key("blackwell", "fp8"): pytest.approx(0.026 * 1979.0 / 4500.0, rel=1e-12)}
    got = expert_request_prior(_plan({key("hopper", "fp8"): ("rows", RESET)}), table)
    assert got == {key("hopper", "fp8"): pytest.approx(0.011 * 4500.0 / 1979.0, rel=1e-12)}
    # both held (the MiniMax family fold, the silicon fold): nothing; refit or kept: nothing
    both = {key(g, "fp8"): ("rows", RESET) for g in ("hopper", "blackwell")}
    assert expert_request_prior(_plan(both), table) == {}
    assert expert_request_prior(_plan({key("blackwell", "fp8"): ("rows", REFIT)}), table) == {}
    assert expert_request_prior(_plan({}), table) == {}


def test_the_embedded_readings_predict_each_other_within_two_percent():
    h = GENERATION_EXPERT_TERMS[("hopper", "fp8")]["expert_path_request_s"]
    b = GENERATION_EXPERT_TERMS[("blackwell", "fp8")]["expert_path_request_s"]
    assert h * rate_ratio("H100-SXM", "B200") == pytest.approx(b, rel=0.02)
