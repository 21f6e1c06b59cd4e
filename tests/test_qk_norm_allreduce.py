"""Issue 33, round 15: MiniMax-M2's q / k norm all-reduce at the exchange's latency on Blackwell, and the MiniMax
NVFP4 checkpoint's bf16 attention and FP32 router (twin.cost.qk_norm_allreduce, twin.fitting.silicon_layout)."""

from __future__ import annotations

from dataclasses import replace as dc_replace
from types import SimpleNamespace

import pytest
from core_helpers import step_shape as step

from twin.cost.default_terms import NO_FLOOR_LINK_S
from twin.cost.kernel_path import nccl_ll_allreduce_latency_s
from twin.cost.qk_norm_allreduce import qk_norm_allreduce_latency_s, qk_norm_step_s
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.fitting.silicon_layout import MINIMAX_NVFP4_GROUPS, weight_formats
from twin.hardware.catalog import resolve_model

B200, H100 = "B200", "H100-SXM"


def test_blackwell_prices_the_exchange_alone():
    assert qk_norm_allreduce_latency_s(B200, 4, 24.7e-6, 6e-6) == pytest.approx(6e-6, abs=1e-15)
    # no link part known (a fold that holds its rows out): NCCL's LL figure at the TP size
    for tp in (2, 4, 8):
        for link in (None, NO_FLOOR_LINK_S):
            assert qk_norm_allreduce_latency_s(B200, tp, 24.7e-6, link) == nccl_ll_allreduce_latency_s(tp)
    # never above the fitted latency
    assert qk_norm_allreduce_latency_s(B200, 8, 9e-6, None) == 9e-6
    assert qk_norm_allreduce_latency_s(B200, 2, 5e-6, 6e-6) == 5e-6


def test_other_generations_and_tp1_keep_the_old_price():
    assert qk_norm_allreduce_latency_s(H100, 4, 24.7e-6, 6e-6) == 24.7e-6
    assert qk_norm_allreduce_latency_s(B200, 1, 24.7e-6, 6e-6) == 0.0
    assert qk_norm_allreduce_latency_s(H100, 1, 24.7e-6, None) == 0.0


def test_a_negative_link_part_is_a_one_line_error():
    with pytest.raises(TwinInputError):
        qk_norm_allreduce_latency_s(B200, 4, 24.7e-6, -1e-6)


def test_step_time_counts_one_per_layer_only_where_the_norm_spans_heads():
    mm = resolve_model("minimax-m2.5")
    assert qk_norm_step_s(mm, B200, 4, 24.7e-6, 6e-6) == pytest.approx(62 * 6e-6, rel=1e-12)
    assert qk_norm_step_s(dc_replace(mm, qk_norm_allreduce=False), B200, 4, 24.7e-6, 6e-6) == 0.0
    s = step([1] * 8, [500] * 8)
    plain = dc_replace(mm, qk_norm_allreduce=False)
    for gpu, per in ((B200, 6e-6), (H100, 24.7e-6)):      # Blackwell's embedded link part; Hopper: the latency
        a = RooflineCostModel(mm, gpu, tensor_parallel_size=4, weight_dtype="fp8")
        b = RooflineCostModel(plain, gpu, tensor_parallel_size=4, weight_dtype="fp8")
        assert a.step_time_s(s) - b.step_time_s(s) == pytest.approx(62 * per, rel=1e-9)
    # a fold without the link part: NCCL's figure
    a = RooflineCostModel(mm, B200, tensor_parallel_size=8, weight_dtype="fp8", unsharded_allreduce_link_s=NO_FLOOR_LINK_S)
    b = RooflineCostModel(plain, B200, tensor_parallel_size=8, weight_dtype="fp8",
                          unsharded_allreduce_link_s=NO_FLOOR_LINK_S)
    assert a.step_time_s(s) - b.step_time_s(s) == pytest.approx(62 * 15.0e-6, rel=1e-9)


def _row(model_path: str, precision: str = "fp4", gemm: str = "nvfp4"):
    return SimpleNamespace(model_path=model_path, precision=precision, gemm_quant=gemm, moe_quant=gemm)


def test_minimax_nvfp4_rows_keep_the_checkpoints_bf16_attention():
    # the FP32 gate's FLOPs are twin.cost.router_gemm's; its group stays in the activation dtype (no second count)
    assert weight_formats(_row("MiniMaxAI/MiniMax-M2.5")) == dict(MINIMAX_NVFP4_GROUPS) \
        == {"attention": "bf16", "router": "bf16"}
    assert weight_formats(_row("MiniMaxAI/MiniMax-M2.5", "fp8", "fp8")) is None      # the FP8 checkpoint: as labelled


def test_bf16_attention_adds_the_projections_bytes_at_decode():
    """62 layers x (3072 x (48 + 2 x 8) x 128 + 48 x 128 x 3072) attention weights: 1.4375 bytes more per weight
    than NVFP4's 0.5625, per TP rank; the router's 256 x 3072 per layer in bf16 (the twin divides every group by
    TP, the replicated gate included)."""
    from twin.hardware.weight_formats import resolve_formats
    mm = resolve_model("minimax-m2.5")
    uniform = resolve_formats("nvfp4")
    mixed = dc_replace(uniform, attention="bf16", router="bf16")
    attn = 62 * (3072 * (48 + 16) * 128 + 48 * 128 * 3072)
    router = 62 * 256 * 3072
    for tp in (1, 4):
        extra = mm.weight_read_bytes(mixed, tp, 4) - mm.weight_read_bytes(uniform, tp, 4)
        assert extra == pytest.approx((attn + router) * (2 - 0.5625) / tp, rel=1e-3)
