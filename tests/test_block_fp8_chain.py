"""Issue 33, round 16: the block-FP8 path's counted layer chain, so that MiniMax-M2's q / k norm all-reduce can be an
exchange on that path too (opt-in; twin.cost.block_fp8_chain, twin.cost.qk_norm_allreduce,
benchmarks/minimax_fp8_chain.py)."""

from __future__ import annotations

from unittest import mock

import pytest
from benchmark_module import load_benchmark

from twin.cost import block_fp8_chain as bfc
from twin.cost.kernel_path import nccl_ll_allreduce_latency_s
from twin.cost.qk_norm_allreduce import qk_norm_allreduce_latency_s, qk_norm_step_s
from twin.errors import TwinInputError
from twin.hardware.catalog import resolve_model

B200, H100 = "B200", "H100-SXM"
CHAINED = mock.patch.object(bfc, "CHAIN_PATHS", frozenset({("blackwell", "fp8")}))


def test_the_chain_is_opt_in_and_the_fp8_path_keeps_the_fitted_latency():
    assert bfc.CHAIN_PATHS == frozenset()
    assert qk_norm_allreduce_latency_s(B200, 4, 24.7e-6, 6e-6, "fp8") == 24.7e-6


def test_a_chained_point_is_the_exchange_plus_the_counted_kernels():
    # per kernel (24.7 - 6) / 7 us; 3 kernels: 6 + 3 x 18.7 / 7 = 14.014... us
    assert bfc.chained_point_s(6e-6, 24.7e-6, 3) == pytest.approx(6e-6 + 3 * 18.7e-6 / 7, rel=1e-12)
    assert bfc.chained_point_s(6e-6, 24.7e-6, 7) == pytest.approx(24.7e-6, rel=1e-12)     # round 15's pricing
    assert bfc.chained_point_s(6e-6, 24.7e-6, 0) == 6e-6                                 # the exchange alone
    assert bfc.chained_point_s(6e-6, 24.7e-6, 20) == 24.7e-6                              # never above L
    assert bfc.chained_point_s(30e-6, 24.7e-6, 3) == 24.7e-6                              # exchange above L: L
    with pytest.raises(TwinInputError):
        bfc.chained_point_s(6e-6, 24.7e-6, -1)
    with pytest.raises(TwinInputError):
        bfc.chained_point_s(-1e-6, 24.7e-6, 3)


def test_chained_pricing_by_path_tp_and_link():
    with CHAINED:
        assert qk_norm_allreduce_latency_s(B200, 4, 24.7e-6, 6e-6, "fp8") == pytest.approx(
            bfc.chained_point_s(6e-6, 24.7e-6, 3), rel=1e-12)
        ll = nccl_ll_allreduce_latency_s(2)            # the link part held out: NCCL's LL figure is the exchange
        assert qk_norm_allreduce_latency_s(B200, 2, 24.7e-6, None, "fp8") == pytest.approx(
            bfc.chained_point_s(ll, 24.7e-6, 3), rel=1e-12)
        assert qk_norm_allreduce_latency_s(B200, 1, 24.7e-6, 6e-6, "fp8") == 0.0          # TP 1: no all-reduce
        assert qk_norm_allreduce_latency_s(B200, 4, 24.7e-6, 6e-6, "nvfp4") == 6e-6      # NVFP4: the exchange
        assert qk_norm_allreduce_latency_s(H100, 4, 24.7e-6, 6e-6, "fp8") == 24.7e-6     # Hopper: unchanged
        with mock.patch.dict(bfc.EXTRA_KERNELS, {"fp8": 7}):
            assert qk_norm_allreduce_latency_s(B200, 4, 24.7e-6, 6e-6, "fp8") == pytest.approx(24.7e-6)
        mm = resolve_model("minimax-m2.5")
        assert qk_norm_step_s(mm, B200, 4, 24.7e-6, 6e-6, "fp8") == pytest.approx(
            62 * bfc.chained_point_s(6e-6, 24.7e-6, 3), rel=1e-12)


def test_the_script_patches_the_chain_and_reads_fold_parameters():
    mod = load_benchmark("minimax_fp8_chain")
    ps = mod.chain_patches(5)
    for p in ps:
        p.start()
    try:
        assert bfc.CHAIN_PATHS == frozenset({("blackwell", "fp8")}) and bfc.EXTRA_KERNELS["fp8"] == 5
    finally:
        for p in reversed(ps):
            p.stop()
    assert bfc.CHAIN_PATHS == frozenset() and bfc.EXTRA_KERNELS["fp8"] == 3
    with pytest.raises(TwinInputError):
        mod.chain_patches(-1)
    report = {"folds": {"family": {"folds": [{"held_out": "minimax", "params": {"a": 1.0}},
                                             {"held_out": "kimi", "params": {"a": 2.0}}]},
                        "GPU": {"folds": [{"held_out": "B200", "params": {"b": 3.0}}]}}}
    assert mod.fold_params(report) == {"family:minimax": {"a": 1.0}, "GPU:B200": {"b": 3.0}}
    with pytest.raises(TwinInputError):
        mod.fold_params({"cases": []})
