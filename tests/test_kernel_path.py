"""Issue 33, round 4: the all-reduce + RMSNorm fusion as a server knob, the fixed time of a MoE layer by its expert
kernel path, the ``@experts_<format>`` scopes that set it, and the silicon rows' launch flags."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest
from core_helpers import step_shape as step

from twin.cost.kernel_path import fusion_default, nccl_ll_allreduce_latency_s
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.scoped import EXPERT_SCOPES, SCOPES, in_scope, params_for, routed_expert_format
from twin.fitting.silicon_rows import silicon_dir
from twin.hardware.catalog import resolve_model
from twin.hardware.weight_formats import WeightFormats
from twin.scenario import ScenarioBody
from twin.sim.deployment import resolve_deployment


def _config(file_name: str):
    """A model from the silicon ground truth's config.json files (outside the repository: skip without them)."""
    path = silicon_dir() / "model_configs" / file_name
    if not path.is_file():
        pytest.skip(f"no silicon ground truth here: {path}")
    return resolve_model(str(path))


def test_nccl_ll_allreduce_latency_by_tp():
    # NCCL tuning.cc: baseLat 6.6 us + 2 (n - 1) hops x 0.6 us
    assert nccl_ll_allreduce_latency_s(1) == 0.0
    assert nccl_ll_allreduce_latency_s(2) == pytest.approx(7.8e-6, abs=1e-12)
    assert nccl_ll_allreduce_latency_s(4) == pytest.approx(10.2e-6, abs=1e-12)
    assert nccl_ll_allreduce_latency_s(8) == pytest.approx(15.0e-6, abs=1e-12)


def test_fusion_default_by_release_generation_and_tp():
    assert fusion_default((0, 18), "blackwell", 2) is True
    assert fusion_default((0, 19), "hopper", 8) is True
    assert fusion_default((0, 17), "blackwell", 2) is False
    assert fusion_default((0, 18), "blackwell", 1) is False
    assert fusion_default((0, 28), "ampere", 4) is False


def test_fusion_swaps_each_layers_allreduce_latency_only():
    kw = dict(model="mixtral-8x7b", gpu="B200", tensor_parallel_size=4)
    plain = RooflineCostModel(**kw)
    fused = RooflineCostModel(**kw, allreduce_fusion=True)
    given = RooflineCostModel(**kw, allreduce_fusion=True, fused_allreduce_latency_s=5e-6)
    layers = plain.model.num_hidden_layers
    for s in (step([1] * 8, [500] * 8), step([2048], [0]), step([300, 1, 1], [0, 40, 900])):
        assert fused.step_time_s(s) == plain.step_time_s(s)     # not fitted: priced as the unfused one
        assert plain.step_time_s(s) - given.step_time_s(s) == pytest.approx(
            2 * layers * (plain.allreduce_latency_s - 5e-6), rel=1e-9)
        assert fused.explain(s)["total_s"] == fused.step_time_s(s)
    # one GPU: no all-reduce to fuse
    one = dict(model="mixtral-8x7b", gpu="B200")
    s = step([1] * 4, [100] * 4)
    assert RooflineCostModel(**one, allreduce_fusion=True).step_time_s(s) == RooflineCostModel(**one).step_time_s(s)
    assert fused.parameters()["fused_allreduce_latency_s"] == plain.allreduce_latency_s
    assert "allreduce_fusion" not in plain.parameters()
    with pytest.raises(TwinInputError, match="fused_allreduce_latency_s"):
        RooflineCostModel(**kw, allreduce_fusion=True, fused_allreduce_latency_s=-1e-6)


def test_moe_layer_overhead_is_per_moe_layer_per_step_and_dense_models_ignore_it():
    s = step([1] * 8, [500] * 8)
    moe = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2)
    moe_x = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2, moe_layer_overhead_s=40e-6)
    assert moe_x.step_time_s(s) - moe.step_time_s(s) == pytest.approx(40e-6 * moe.model.moe_layers, rel=1e-9)
    dense = RooflineCostModel("llama-3.1-8b", "H100-SXM")
    dense_x = RooflineCostModel("llama-3.1-8b", "H100-SXM", moe_layer_overhead_s=40e-6)
    assert dense_x.step_time_s(s) == dense.step_time_s(s)
    # the vectorised costing (the fit's surrogate) agrees with the step-by-step one
    args = (np.array([8.0, 2048.0]), np.array([8, 1]), np.array([8, 1]), np.array([4000, 0]),
            np.array([4008.0, 2048 * 2049 / 2]))
    by_step = [moe_x.step_time_s(s), moe_x.step_time_s(step([2048], [0]))]
    assert list(moe_x.step_times_s(*args)) == pytest.approx(by_step, rel=1e-12)
    with pytest.raises(TwinInputError, match="moe_layer_overhead_s"):
        RooflineCostModel("mixtral-8x7b", "H100-SXM", moe_layer_overhead_s=-1.0)


@dataclass
class _Dep:
    model: object
    weight_formats: WeightFormats | None
    gpu: str = "B200"


def test_expert_scopes_select_by_the_routed_experts_format_only():
    kimi = _Dep(_config("moonshotai--Kimi-K2.5_config.json"), None)
    kimi = replace(kimi, weight_formats=kimi.model.checkpoint_formats)          # INT4 experts, bf16 elsewhere
    oss = _Dep(_config("openai--gpt-oss-120b_config.json"), None)
    oss = replace(oss, weight_formats=oss.model.checkpoint_formats)             # MXFP4 experts, bf16 attention
    minimax_fp4 = _Dep(_config("MiniMaxAI--MiniMax-M2.5_config.json"),
                       WeightFormats.uniform("nvfp4"))
    mixtral = _Dep(resolve_model("mixtral-8x7b"), WeightFormats.uniform("bf16"))
    llama_fp8 = _Dep(resolve_model("llama-3.1-8b"), WeightFormats.uniform("fp8"))
    assert [routed_expert_format(d) for d in (kimi, oss, minimax_fp4, mixtral, llama_fp8)] == \
        ["int4", "mxfp4", "nvfp4", "bf16", None]
    assert set(EXPERT_SCOPES) <= set(SCOPES)
    assert [s for s in EXPERT_SCOPES if in_scope(s, kimi)] == ["experts_int4"]
    assert [s for s in EXPERT_SCOPES if in_scope(s, oss)] == ["experts_mxfp4"]
    assert [s for s in EXPERT_SCOPES if in_scope(s, llama_fp8)] == []        # dense: never an expert scope
    params = {"moe_layer_overhead_s@experts_int4": 5e-5, "moe_layer_overhead_s@experts_mxfp4": 1e-5,
              "step_overhead_s": 1e-3}
    assert params_for(params, kimi) == {"step_overhead_s": 1e-3, "moe_layer_overhead_s": 5e-5}
    assert params_for(params, oss) == {"step_overhead_s": 1e-3, "moe_layer_overhead_s": 1e-5}
    assert params_for(params, mixtral) == {"step_overhead_s": 1e-3}
    # the weight scope @int4 covers Kimi through its experts too, but not gpt-oss
    assert in_scope("int4", kimi) and not in_scope("int4", oss)


def test_fit_parameters_name_the_new_terms():
    for f in ("bf16", "fp8", "int4", "nvfp4", "mxfp4"):
        p = PARAMETERS_BY_NAME[f"moe_layer_overhead_s@experts_{f}"]
        assert (p.scale, p.prior) == (1e-6, 0.0)
    assert PARAMETERS_BY_NAME["fused_allreduce_latency_s"].prior == 24.7     # the unfused latency


def _body(tp: int, version: str, fuse: bool | None = None, gpu: str = "B200") -> ScenarioBody:
    server = {"vllm_version": version, **({} if fuse is None else {"fuse_allreduce_rms": fuse})}
    return ScenarioBody.model_validate({
        "name": "x", "deployment": {"gpu": gpu, "model": "mixtral-8x7b", "tensor_parallel_size": tp},
        "server": server,
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": 1.0}, "num_requests": 1,
                     "classes": [{"name": "x", "share": 1.0, "prompt": {"suffix_tokens": 8}, "output_tokens": 2}]}})


def test_deployment_resolves_the_fusion_knob_and_its_cost_model_uses_it():
    assert resolve_deployment(_body(2, "0.19")).allreduce_fusion is True          # the release's default
    assert resolve_deployment(_body(2, "0.14")).allreduce_fusion is False
    assert resolve_deployment(_body(2, "0.14", True)).allreduce_fusion is True     # the flag, as passed
    assert resolve_deployment(_body(2, "0.19", False)).allreduce_fusion is False
    assert resolve_deployment(_body(1, "0.19", True)).allreduce_fusion is False    # nothing to fuse on one GPU
    assert resolve_deployment(_body(2, "0.19", gpu="A100-SXM-80GB")).allreduce_fusion is False
    on, off = resolve_deployment(_body(2, "0.14", True)), resolve_deployment(_body(2, "0.14"))
    assert on.cost_model_factory().allreduce_fusion is True
    assert off.cost_model_factory().allreduce_fusion is False


def test_silicon_rows_carry_their_scripts_fusion_flag():
    from twin.fitting.silicon import kv_dtype, model_family, not_expressible, row_server
    from twin.fitting.silicon_rows import CSV_NAME, read_silicon, silicon_dir
    seen = {}
    for r in read_silicon(silicon_dir() / CSV_NAME):
        if not_expressible(r) or r.tp < 2:
            continue
        key = (model_family(r.model_path), r.system, r.vllm_version)
        seen.setdefault(key, set()).add(row_server(r).get("fuse_allreduce_rms", False))
    assert seen[("gpt-oss", "b200_sxm", "0.15.1")] == {True}        # passed by the script
    assert seen[("kimi", "b200_sxm", "0.15.1")] == {True}
    assert seen[("llama", "b200_sxm", "0.10.2")] == {True}
    assert seen[("llama", "h100_sxm", "0.10.2")] == {False}         # not passed, not 0.10's default
    assert seen[("minimax", "b200_sxm", "0.17.0")] == {False}       # not passed; 0.17 taken as off
    assert seen[("minimax", "b200_sxm", "0.19.0")] == {True}        # 0.19's default
    assert seen[("gpt-oss", "h100_sxm", "0.18.0")] == {True}        # 0.18's default (the twin maps 0.18 on 0.14)
    row = next(r for r in read_silicon(silicon_dir() / CSV_NAME)
               if model_family(r.model_path) == "gpt-oss" and r.system == "b200_sxm" and r.vllm_version == "0.15.1")
    assert kv_dtype(row) == "fp8" and row_server(row)["enable_prefix_caching"] is False


def test_minimax_qk_norm_adds_one_unfused_allreduce_per_layer_with_tp():
    from dataclasses import replace as dc_replace
    mm = _config("MiniMaxAI--MiniMax-M2.5_config.json")
    assert mm.qk_norm_allreduce and resolve_model("minimax-m2.5").qk_norm_allreduce
    assert not _config("Qwen--Qwen3-32B_config.json").qk_norm_allreduce   # per-head norms
    plain = dc_replace(mm, qk_norm_allreduce=False)
    s = step([1] * 8, [500] * 8)
    for fusion in (False, True):
        with_norm = RooflineCostModel(mm, "B200", tensor_parallel_size=2, weight_dtype="fp8", allreduce_fusion=fusion)
        without = RooflineCostModel(plain, "B200", tensor_parallel_size=2, weight_dtype="fp8",
                                    allreduce_fusion=fusion)
        # the norm's all-reduce is not the fusion's pattern: always the unfused latency
        assert with_norm.step_time_s(s) - without.step_time_s(s) == pytest.approx(62 * 24.7e-6, rel=1e-9)
    one = RooflineCostModel(mm, "B200", weight_dtype="fp8")
    assert one.step_time_s(s) == RooflineCostModel(plain, "B200", weight_dtype="fp8").step_time_s(s)


def test_fused_allreduce_latency_is_held_where_no_run_fuses():
    from types import SimpleNamespace
    from twin.fitting.identify import held_at_prior
    case = SimpleNamespace(target=SimpleNamespace(tensor_parallel_size=2))
    held = held_at_prior([case], ["fused_allreduce_latency_s"], [SimpleNamespace(allreduce_fusion=False)])
    assert held == {"fused_allreduce_latency_s": "no run fuses its all-reduces with RMSNorm "
                                                 "(server.fuse_allreduce_rms)"}
    assert held_at_prior([case], ["fused_allreduce_latency_s"], [SimpleNamespace(allreduce_fusion=True)]) == {}
