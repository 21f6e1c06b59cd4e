"""Issue 33, round 15: MiniMax-M2's q / k norm all-reduce at the exchange's latency on Blackwell's NVFP4 expert path
(embedded), and the MiniMax NVFP4 checkpoint's bf16 attention (opt-in) (twin.cost.qk_norm_allreduce,
twin.fitting.silicon_layout, benchmarks/nvfp4_decode_rows.py)."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import replace as dc_replace
from types import SimpleNamespace
from unittest import mock

import pytest
from benchmark_module import load_benchmark
from core_helpers import step_shape as step

from twin.cost.default_terms import NO_FLOOR_LINK_S
from twin.cost.kernel_path import nccl_ll_allreduce_latency_s
from twin.cost.qk_norm_allreduce import qk_norm_allreduce_latency_s, qk_norm_step_s
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.fitting.silicon_layout import MINIMAX_NVFP4_CHECKPOINT_GROUPS, weight_formats
from twin.hardware.catalog import resolve_model

B200, H100 = "B200", "H100-SXM"
ROUND14 = mock.patch("twin.cost.qk_norm_allreduce.QK_EXCHANGE_PATHS", frozenset())   # every path: fitted
CHECKPOINT = mock.patch("twin.fitting.silicon_layout.MINIMAX_NVFP4_GROUPS", MINIMAX_NVFP4_CHECKPOINT_GROUPS)


def test_round14_pricing_keeps_the_fitted_latency_on_every_path():
    with ROUND14:
        for gpu in (B200, H100):
            for fmt in ("nvfp4", "fp8", None):
                assert qk_norm_allreduce_latency_s(gpu, 4, 24.7e-6, 6e-6, fmt) == 24.7e-6
        assert qk_norm_allreduce_latency_s(B200, 1, 24.7e-6, 6e-6, "nvfp4") == 0.0


def test_embedded_prices_the_exchange_alone_on_blackwell_nvfp4():
    assert qk_norm_allreduce_latency_s(B200, 4, 24.7e-6, 6e-6, "nvfp4") == pytest.approx(6e-6, abs=1e-15)
    for tp in (2, 4, 8):        # no link part known (a fold that holds its rows out): NCCL's LL figure
        for link in (None, NO_FLOOR_LINK_S):
            assert qk_norm_allreduce_latency_s(B200, tp, 24.7e-6, link, "nvfp4") == nccl_ll_allreduce_latency_s(tp)
    assert qk_norm_allreduce_latency_s(B200, 8, 9e-6, None, "nvfp4") == 9e-6      # never above the fitted one
    assert qk_norm_allreduce_latency_s(B200, 4, 24.7e-6, 6e-6, "fp8") == 24.7e-6   # block FP8: kept
    assert qk_norm_allreduce_latency_s(H100, 4, 24.7e-6, 6e-6, "nvfp4") == 24.7e-6
    assert qk_norm_allreduce_latency_s(B200, 1, 24.7e-6, 6e-6, "nvfp4") == 0.0
    with pytest.raises(TwinInputError):
        qk_norm_allreduce_latency_s(B200, 4, 24.7e-6, -1e-6, "nvfp4")


def test_step_time_counts_one_per_layer_only_where_the_norm_spans_heads():
    mm = resolve_model("minimax-m2.5")
    plain = dc_replace(mm, qk_norm_allreduce=False)
    assert qk_norm_step_s(plain, B200, 4, 24.7e-6, 6e-6, "nvfp4") == 0.0
    s = step([1] * 8, [500] * 8)

    def diff(gpu, fmt, **kw):
        a = RooflineCostModel(mm, gpu, tensor_parallel_size=4, weight_dtype=fmt, **kw)
        b = RooflineCostModel(plain, gpu, tensor_parallel_size=4, weight_dtype=fmt, **kw)
        return a.step_time_s(s) - b.step_time_s(s)
    with ROUND14:
        assert diff(B200, "nvfp4") == pytest.approx(62 * 24.7e-6, rel=1e-9)
    assert diff(B200, "nvfp4") == pytest.approx(62 * 6e-6, rel=1e-9)                  # embedded: Blackwell's link part
    assert diff(B200, "nvfp4", unsharded_allreduce_link_s=NO_FLOOR_LINK_S) == pytest.approx(62 * 10.2e-6, rel=1e-9)
    assert diff(B200, "fp8") == pytest.approx(62 * 24.7e-6, rel=1e-9)
    assert diff(H100, "nvfp4") == pytest.approx(62 * 24.7e-6, rel=1e-9)


def _row(model_path: str, precision: str = "fp4", gemm: str = "nvfp4"):
    return SimpleNamespace(model_path=model_path, precision=precision, gemm_quant=gemm, moe_quant=gemm)


def test_minimax_nvfp4_rows_keep_their_label_unless_the_checkpoint_is_switched_on():
    assert weight_formats(_row("MiniMaxAI/MiniMax-M2.5")) is None
    with CHECKPOINT:    # the FP32 gate's FLOPs are twin.cost.router_gemm's: its group stays bf16 (no second count)
        assert weight_formats(_row("MiniMaxAI/MiniMax-M2.5")) == {"attention": "bf16", "router": "bf16"}
        assert weight_formats(_row("MiniMaxAI/MiniMax-M2.5", "fp8", "fp8")) is None
    assert weight_formats(_row("moonshotai/Kimi-K2.5")) == {"attention": "bf16", "router": "bf16"}


def test_bf16_attention_adds_the_projections_bytes_at_decode():
    """62 layers x (3072 x (48 + 2 x 8) x 128 + 48 x 128 x 3072) attention weights and the 256 x 3072 router per
    layer: 1.4375 bytes more per weight than NVFP4's 0.5625, per TP rank (the twin divides every group by TP)."""
    from twin.hardware.weight_formats import resolve_formats
    mm = resolve_model("minimax-m2.5")
    uniform = resolve_formats("nvfp4")
    mixed = dc_replace(uniform, attention="bf16", router="bf16")
    extra_params = 62 * (3072 * (48 + 16) * 128 + 48 * 128 * 3072) + 62 * 256 * 3072
    for tp in (1, 4):
        extra = mm.weight_read_bytes(mixed, tp, 4) - mm.weight_read_bytes(uniform, tp, 4)
        assert extra == pytest.approx(extra_params * (2 - 0.5625) / tp, rel=1e-3)


def test_the_script_switches_each_fact_on_and_checks_its_names():
    mod = load_benchmark("nvfp4_decode_rows")
    mm = resolve_model("minimax-m2.5")
    row = _row("MiniMaxAI/MiniMax-M2.5")
    for names, qk_s, formats in (((), 6e-6, None), (("no-qk",), 24.7e-6, None),
                                 (("bf16-attention",), 6e-6, {"attention": "bf16", "router": "bf16"}),
                                 (("no-qk", "bf16-attention"), 24.7e-6, {"attention": "bf16", "router": "bf16"})):
        with ExitStack() as stack:       # the patches are carried context managers (round 23)
            for p in mod.patches(names):
                stack.enter_context(p)
            assert qk_norm_step_s(mm, B200, 4, 24.7e-6, 6e-6, "nvfp4") == pytest.approx(62 * qk_s, rel=1e-12)
            assert weight_formats(row) == formats
    assert mod.facts("no-qk,bf16-attention") == ("no-qk", "bf16-attention") and mod.facts("") == ()
    with pytest.raises(TwinInputError):
        mod.facts("qk,fp8")
    lines = mod.summary([{"conc": 4, "tpot": 0.1, "ttft": -0.2}, {"conc": 64, "tpot": -0.3, "ttft": 0.0}])
    assert lines[0].split() == ["TPOT", "all", "n=", "2", "|error|", "20.0%", "signed", "-10.0%"]
