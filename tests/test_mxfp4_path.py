"""Issue 33, round 5: the MXFP4 expert kernel path by GPU generation (``twin.cost.mxfp4_path``): MXFP4 experts on
Blackwell at the FP8 tensor rate (MXFP8 activations), and the fused all-reduce latency of the B200 MXFP4 path."""

from __future__ import annotations

from fractions import Fraction

import pytest
from core_helpers import step_shape as step

from twin.cost.default_terms import embedded
from twin.cost.generation_experts import GENERATION_EXPERT_TERMS, generation_expert_term
from twin.cost.mxfp4_path import MXFP4_BLACKWELL_RATE, group_rate_dtype
from twin.cost.roofline import ALLREDUCE_LATENCY_FAST_S, RooflineCostModel
from twin.hardware.catalog import resolve_gpu, resolve_model
from twin.hardware.quant import bytes_per_weight
from twin.hardware.weight_formats import WeightFormats

GPT_OSS = WeightFormats(attention="bf16", dense_mlp="mxfp4", routed_experts="mxfp4", shared_experts="mxfp4")
B200_FUSED_S = GENERATION_EXPERT_TERMS[("blackwell", "mxfp4")]["fused_allreduce_latency_s"]


def test_mxfp4_groups_run_at_the_fp8_rate_on_blackwell_only():
    b200, h100 = resolve_gpu("B200"), resolve_gpu("H100-SXM")
    assert MXFP4_BLACKWELL_RATE == "fp8"
    assert group_rate_dtype(b200, GPT_OSS, "routed_experts") == "fp8"
    assert group_rate_dtype(b200, GPT_OSS, "attention") == "bf16"
    assert group_rate_dtype(h100, GPT_OSS, "routed_experts") == "fp4"        # Hopper: the format's path (bf16 rate)
    nvfp4 = WeightFormats.uniform("nvfp4")
    assert group_rate_dtype(b200, nvfp4, "routed_experts") == "fp4"          # NVFP4 x NVFP4 keeps the FP4 rate
    assert b200.flops(group_rate_dtype(b200, GPT_OSS, "routed_experts")) == 4500.0e12


def test_prefill_expert_flops_cost_the_fp8_rate_on_b200():
    m = RooflineCostModel("gpt-oss-120b", "B200", weight_dtype=GPT_OSS)
    model = m.model
    # the decoder's linear FLOPs per token, by rate: bf16 attention (+ router), MXFP4 experts at FP8's 4.5 PFLOP/s
    active = model.active_group_params()
    bf16 = sum(active[g] for g in ("attention", "router"))
    fp4_groups = sum(active[g] for g in ("dense_mlp", "routed_experts", "shared_experts"))
    ce = m.compute_efficiency
    expected = 2 * bf16 / (2250.0e12 * ce) + 2 * fp4_groups / (4500.0e12 * ce)
    assert m._k_linear == pytest.approx(expected, rel=1e-12)
    assert m.describe()["compute_paths"]["routed_experts"] == "fp8"
    # decode is unchanged: memory-bound, it streams the stored 4.25-bit weights (E2M1 + one E8M0 scale per 32)
    assert bytes_per_weight("mxfp4") == Fraction(17, 32)
    e = m.explain(step([1] * 4, [1000] * 4))
    assert e["linear_compute_s"] + e["weight_read_s"] == pytest.approx(m._moe_weights_s(4), rel=1e-12)


def test_b200_mxfp4_path_prices_a_fused_allreduce_at_its_embedded_latency():
    assert B200_FUSED_S == 11.0e-6
    kw = dict(model="gpt-oss-120b", gpu="B200", tensor_parallel_size=4, weight_dtype=GPT_OSS)
    plain = RooflineCostModel(**kw)
    fused = RooflineCostModel(**kw, allreduce_fusion=True)
    assert fused.fused_allreduce_latency_s == B200_FUSED_S
    assert plain.allreduce_latency_s == ALLREDUCE_LATENCY_FAST_S       # unfused: unchanged
    layers = plain.model.num_hidden_layers
    s = step([1] * 4, [1500] * 4)
    assert plain.step_time_s(s) - fused.step_time_s(s) == pytest.approx(
        2 * layers * (ALLREDUCE_LATENCY_FAST_S - 11.0e-6), rel=1e-9)
    assert fused.explain(s)["allreduce_s"] == pytest.approx(
        2 * layers * 11.0e-6 + fused._k_allreduce * 4, rel=1e-12)
    # a value given (a fit) wins over the path's
    assert RooflineCostModel(**kw, allreduce_fusion=True,
                             fused_allreduce_latency_s=20e-6).fused_allreduce_latency_s == 20e-6


def test_path_terms_reach_only_their_generation_and_expert_format():
    gpt_oss, mixtral = resolve_model("gpt-oss-120b"), resolve_model("mixtral-8x7b")
    b200, h100 = resolve_gpu("B200"), resolve_gpu("H100-SXM")
    assert generation_expert_term(b200, gpt_oss, GPT_OSS, "fused_allreduce_latency_s") == 11.0e-6
    assert generation_expert_term(h100, gpt_oss, GPT_OSS, "fused_allreduce_latency_s") == 18e-6   # Hopper's Marlin path
    assert generation_expert_term(b200, mixtral, WeightFormats.uniform("bf16"), "fused_allreduce_latency_s") is None
    assert generation_expert_term(b200, gpt_oss, GPT_OSS, "layer_overhead_s") is None
    dense = resolve_model("llama-3.1-70b")
    assert generation_expert_term(b200, dense, WeightFormats.uniform("mxfp4"), "fused_allreduce_latency_s") is None
    # through the embedded defaults: the path's value on its path, the generation's / flat default elsewhere
    assert embedded(b200, gpt_oss, GPT_OSS, fused_allreduce_latency_s=None)["fused_allreduce_latency_s"] == 11.0e-6
    assert embedded(b200, mixtral, WeightFormats.uniform("bf16"),
                    fused_allreduce_latency_s=None)["fused_allreduce_latency_s"] is None
    assert embedded(h100, gpt_oss, GPT_OSS, fused_allreduce_latency_s=None)["fused_allreduce_latency_s"] == 18e-6
    # other families' fused all-reduce stays at the unfused latency (round 4's pricing)
    other = RooflineCostModel("mixtral-8x7b", "B200", tensor_parallel_size=4, allreduce_fusion=True)
    assert other.fused_allreduce_latency_s == other.allreduce_latency_s


def test_gpt_oss_h100_rows_carry_their_scripts_server_flags():
    from twin.fitting.silicon import kv_dtype, model_family, row_server
    from twin.fitting.silicon_rows import CSV_NAME, read_silicon, silicon_dir
    path = silicon_dir() / CSV_NAME
    if not path.is_file():
        pytest.skip(f"no silicon ground truth here: {path}")
    rows = [r for r in read_silicon(path) if model_family(r.model_path) == "gpt-oss" and r.system == "h100_sxm"
            and r.vllm_version == "0.18.0"]
    assert rows
    for r in rows:        # single_node/gptoss_fp4_h100.sh, cec542a9a
        server = row_server(r)
        assert server["max_num_seqs"] == r.concurrency and server["max_num_batched_tokens"] == 8192
        assert server["enable_prefix_caching"] is False and server["gpu_memory_utilization"] == 0.9
        assert kv_dtype(r) == "bf16"
        assert server.get("fuse_allreduce_rms", False) == (r.tp > 1)      # 0.18's default
