"""Issue 33, round 6: Marlin MoE's padded token blocks in prompt steps (``twin.cost.marlin_blocks``): vLLM's block
size heuristic, the expected padded rows (hand-computed), where the term applies, and that it enters every step
function the same way (step by step, from sums, the fit's arrays, ``explain()``) and prompt steps only."""

from __future__ import annotations

import numpy as np
import pytest
from core_helpers import PROMPT_PAIRS, check_prompt_only_term
from core_helpers import step_shape as step

from twin.cost.marlin_blocks import (expected_padded_rows, marlin_block_rows, on_marlin_path,
                                     seconds_per_routed_row)
from twin.cost.roofline import RooflineCostModel
from twin.hardware.weight_formats import WeightFormats

GPT_OSS = WeightFormats(attention="bf16", dense_mlp="mxfp4", routed_experts="mxfp4", shared_experts="mxfp4")


def test_block_size_follows_vllms_heuristic():
    # first of 8, 16, 32, 48, 64 with tokens x top_k / experts / B < 0.9, else 64
    assert marlin_block_rows(4, 4, 128) == 8            # 0.125 / 8
    assert marlin_block_rows(230, 4, 128) == 8          # 7.19 / 8 = 0.898
    assert marlin_block_rows(231, 4, 128) == 16         # 7.22 / 8 = 0.902
    assert marlin_block_rows(1024, 4, 128) == 48        # 32 / 32 = 1.0, 32 / 48 = 0.67
    assert marlin_block_rows(1027, 4, 128) == 48
    assert marlin_block_rows(8192, 4, 128) == 64        # 256 / 64 = 4: never below 0.9
    assert marlin_block_rows(8, 8, 8) == 16             # 8 pairs per expert: 8 / 8 = 1.0, 8 / 16 = 0.5


def test_expected_padded_rows_by_hand():
    # 2 tokens, top-1 of 2 experts: n ~ Binomial(2, 1/2) = 0, 1, 2 with 1/4, 1/2, 1/4; B = 8 (2 x 1 / 2 / 8 < 0.9)
    # E[ceil(n / 8) x 8] = (1/2 + 1/4) x 8 = 6 rows per expert, 12 in all
    assert expected_padded_rows(2, 1, 2) == pytest.approx(12.0, rel=1e-12)
    # 3 tokens, top-1 of 3: n ~ Binomial(3, 1/3); P(n = 0) = 8/27; B = 8; 3 x (19/27) x 8 = 152/9
    assert expected_padded_rows(3, 1, 3) == pytest.approx(152 / 9, rel=1e-12)
    # every token to every expert (top_k = experts): each expert has exactly `tokens` pairs
    assert expected_padded_rows(20, 4, 4) == 4 * 32     # B = 32 (20 / 16 >= 0.9, 20 / 32 < 0.9): ceil(20/32) x 32
    assert expected_padded_rows(0, 4, 128) == 0.0
    # gpt-oss-120b (128 experts, top-4): a 1k prompt step pads ~50 %, an 8k one ~12 %
    assert expected_padded_rows(1027, 4, 128) / (4 * 1027) == pytest.approx(1.4999, abs=1e-3)
    assert expected_padded_rows(8192, 4, 128) / (4 * 8192) == pytest.approx(1.1209, abs=1e-3)


def test_applies_to_the_hopper_mxfp4_path_only():
    from twin.hardware.catalog import resolve_gpu, resolve_model
    oss = resolve_model("gpt-oss-120b")
    assert on_marlin_path(resolve_gpu("H100-SXM"), oss, GPT_OSS)
    assert not on_marlin_path(resolve_gpu("B200"), oss, GPT_OSS)              # FlashInfer TRTLLM-gen there
    assert not on_marlin_path(resolve_gpu("H100-SXM"), resolve_model("llama-3.1-70b"), WeightFormats.uniform("fp8"))
    assert RooflineCostModel("gpt-oss-120b", "B200", weight_dtype=GPT_OSS).marlin_padding_s is None


def test_prompt_steps_pay_the_padded_rows_at_the_paths_rate_and_decodes_do_not(monkeypatch):
    from twin.cost import marlin_blocks
    kw = dict(model="gpt-oss-120b", gpu="H100-SXM", tensor_parallel_size=2, weight_dtype=GPT_OSS,
              moe_expert_compute_efficiency=0.5)
    m = RooflineCostModel(**kw)
    with monkeypatch.context() as mp:         # the same deployment off the Marlin path: no padded rows
        mp.setattr(marlin_blocks, "MARLIN_PATHS", set())
        plain = RooflineCostModel(**kw)
    assert plain.marlin_padding_s is None
    # one routed row: top-1 expert FLOPs per GPU (2 x 3 x 2880^2 per layer x 36 / TP 2) at bf16 x 0.6 x 0.5
    per_row = 2 * 3 * 2880 * 2880 * 36 / 2 / (989.5e12 * 0.6 * 0.5)
    assert seconds_per_routed_row(m) == pytest.approx(per_row, rel=1e-3)
    pad = (expected_padded_rows(1027, 4, 128) - 4 * 1027) * seconds_per_routed_row(m)
    assert pad == pytest.approx((6161.40 - 4108) * per_row, rel=1e-3)     # ~6,161 rows run for 4,108 pairs
    e, arr = check_prompt_only_term(m, plain, "moe_block_padding_s", pad)
    assert "eager_host_floor_s" not in e
    assert arr[0] - plain.step_times_s(np.array([1027]), np.array([4]), np.array([4]), np.array([2700]),
                                       np.array([PROMPT_PAIRS]))[0] == pytest.approx(pad, rel=1e-9)


def test_the_hopper_marlin_mxfp4_entry_acts_on_its_path_only():
    from twin.cost.generation_experts import GENERATION_EXPERT_TERMS
    from twin.cost.marlin_mxfp4 import MARLIN_MXFP4_HOPPER_TERMS
    assert GENERATION_EXPERT_TERMS[("hopper", "mxfp4")] is MARLIN_MXFP4_HOPPER_TERMS
    assert MARLIN_MXFP4_HOPPER_TERMS == {"moe_expert_compute_efficiency": 0.35, "layer_token_overhead_s": 0.15e-6,
                                         "fused_allreduce_latency_s": 18e-6}
    h100 = RooflineCostModel("gpt-oss-120b", "H100-SXM", tensor_parallel_size=4, weight_dtype=GPT_OSS)
    assert (h100.moe_expert_compute_efficiency, h100.layer_token_overhead_s) == (0.35, 0.15e-6)
    fused = RooflineCostModel("gpt-oss-120b", "H100-SXM", tensor_parallel_size=4, weight_dtype=GPT_OSS,
                              allreduce_fusion=True)
    assert (fused.fused_allreduce_latency_s, h100.allreduce_latency_s) == (18e-6, 24.7e-6)
    d = step([1] * 4, [1500] * 4)      # a decode step: 72 all-reduces, each 6.7 us shorter when fused
    assert h100.step_time_s(d) - fused.step_time_s(d) == pytest.approx(72 * 6.7e-6, rel=1e-9)
    b200 = RooflineCostModel("gpt-oss-120b", "B200", tensor_parallel_size=4, weight_dtype=GPT_OSS)
    assert (b200.moe_expert_compute_efficiency, b200.layer_token_overhead_s) == (1.0, 0.2e-6)    # Blackwell's own
    dense = RooflineCostModel("llama-3.1-70b", "H100-SXM", tensor_parallel_size=4, weight_dtype="fp8")
    assert dense.layer_token_overhead_s == 0.0 and dense.marlin_padding_s is None
    # an 8k prompt step at TP4: the experts' extra time and the per-token part, by hand (36 layers)
    e = h100.explain(step([8192], [0]))
    assert e["layer_token_overhead_s"] == pytest.approx(8192 * 36 * 0.15e-6, rel=1e-12)
    dense_expert_s = 2 * 4 * 3 * 2880 * 2880 * 36 / 4 / (989.5e12 * 0.6) * 8192    # top-4, bf16 x 0.6, TP4
    assert e["moe_expert_compute_extra_s"] == pytest.approx(dense_expert_s * (1 / 0.35 - 1), rel=2e-3)


def test_the_entry_declares_the_h100_gpt_oss_rows_as_its_evidence():
    from types import SimpleNamespace as NS

    from twin.fitting.provenance import embedded_entries
    entries = {e.parameter: e for e in embedded_entries() if e.parameter.endswith("@hopper+experts_mxfp4")}
    assert set(entries) == {"moe_expert_compute_efficiency@hopper+experts_mxfp4",
                            "layer_token_overhead_s@hopper+experts_mxfp4", "fused_allreduce_latency_s@hopper+experts_mxfp4"}
    e = entries["layer_token_overhead_s@hopper+experts_mxfp4"]
    assert (e.evidence, e.prior) == ("the H100 gpt-oss-120b rows", 0.0)
    h100 = NS(row=NS(system="h100_sxm", model_path="openai/gpt-oss-120b"))
    b200 = NS(row=NS(system="b200_sxm", model_path="openai/gpt-oss-120b"))
    llama = NS(row=NS(system="h100_sxm", model_path="meta-llama/Llama-3.1-70B-Instruct"))
    assert e.is_evidence(h100, None) and not e.is_evidence(b200, None) and not e.is_evidence(llama, None)


def test_int4_experts_take_marlin_on_every_generation_with_kimis_blocks():
    """Round 7: compressed-tensors W4A16 experts load as ``CompressedTensorsWNA16MarlinMoEMethod``, whose ``apply``
    calls ``fused_marlin_moe``: Kimi-K2.5 INT4 (384 experts, top-8) pays the padded blocks on B200 and H100."""
    from twin.hardware.catalog import resolve_gpu, resolve_model
    kimi, int4 = resolve_model("kimi-k2.5"), WeightFormats(routed_experts="int4-g32-sym")
    for gpu in ("B200", "H100-SXM"):
        assert on_marlin_path(resolve_gpu(gpu), kimi, int4)
    assert not on_marlin_path(resolve_gpu("B200"), kimi, WeightFormats.uniform("nvfp4"))
    assert not on_marlin_path(resolve_gpu("B200"), resolve_model("llama-3.1-8b"), WeightFormats.uniform("int4"))
    # a 1k prompt: 1024 x 8 / 384 = 21.3 pairs per expert: 21.3 / 16 >= 0.9, 21.3 / 32 < 0.9 -> B = 32, ~52 % padded
    assert marlin_block_rows(1024, 8, 384) == 32 and marlin_block_rows(8192, 8, 384) == 64
    assert expected_padded_rows(1024, 8, 384) / (8 * 1024) == pytest.approx(1.516, abs=1e-3)
    assert expected_padded_rows(8192, 8, 384) / (8 * 8192) == pytest.approx(1.143, abs=1e-3)     # B = 64: ~14 %


def test_the_padded_rows_are_gpu_time_under_the_eager_floor():
    """On a step no CUDA graph covers the step takes max(GPU time + padded rows, host floor): the rows are GPU
    work the host's launches overlap, not time after the floor (round 6 added them on top)."""
    from twin.hardware.catalog import resolve_model
    kw = dict(model=resolve_model("kimi-k2.5"), gpu="B200", tensor_parallel_size=8,
              weight_dtype=WeightFormats(routed_experts="int4-g32-sym"))
    graphed = RooflineCostModel(**kw, eager_layer_host_s=0.0, eager_moe_layer_host_s=0.0)
    prompt = step([1024, 1, 1, 1], [0, 900, 900, 900])
    gpu_s = graphed.step_time_s(prompt)                   # GPU time with the padded rows in it
    pad = graphed.marlin_padding_s(1027)
    assert pad > 0 and graphed.explain(prompt)["moe_block_padding_s"] == pytest.approx(pad, rel=1e-12)
    arr = lambda m: m.step_times_s(np.array([1027]), np.array([4]), np.array([4]), np.array([2700]),   # noqa: E731
                                   np.array([3 * 900 + 0.5 * (1024 * 1024 + 3 + 1027)]))[0]
    for host_s in (0.5 * gpu_s, gpu_s - 0.5 * pad, 2.0 * gpu_s):      # the floor below, between, above
        per_layer = host_s / 61                           # 61 decoder layers, no MoE-layer part
        eager = RooflineCostModel(**kw, eager_layer_host_s=per_layer, eager_moe_layer_host_s=0.0,
                                  cudagraph_tokens=(512, 512))
        want = max(gpu_s, 61 * per_layer)
        assert eager.step_time_s(prompt) == pytest.approx(want, rel=1e-12)
        assert arr(eager) == pytest.approx(want, rel=1e-12)
        e = eager.explain(prompt)
        assert e["moe_block_padding_s"] == pytest.approx(pad, rel=1e-12)
        assert e.get("eager_host_floor_s", 0.0) == pytest.approx(max(0.0, 61 * per_layer - gpu_s), abs=1e-12)
        assert sum(v for k, v in e.items() if k != "total_s") == pytest.approx(e["total_s"], rel=1e-12)
