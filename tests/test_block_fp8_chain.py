"""Issue 33, round 16: the block-FP8 path's counted layer chain, so that MiniMax-M2's q / k norm all-reduce can be an
exchange on that path too (opt-in; twin.cost.block_fp8_chain, twin.cost.qk_norm_allreduce's ``chain_paths``,
benchmarks/minimax_fp8_chain.py)."""

from __future__ import annotations

from unittest import mock

import pytest
from benchmark_module import load_benchmark

from twin.cost import block_fp8_chain as bfc
from twin.cost.kernel_path import nccl_ll_allreduce_latency_s
from twin.cost.qk_norm_allreduce import qk_norm_allreduce_latency_s, qk_norm_step_s
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.hardware.catalog import resolve_model

B200, H100 = "B200", "H100-SXM"
CHAINED = {("blackwell", "fp8"): bfc.BLOCK_FP8_EXTRA_KERNELS}     # the trial's table: Blackwell's FP8 path, 3


def test_the_chain_is_opt_in_and_the_fp8_path_keeps_the_fitted_latency():
    assert bfc.CHAIN_PATHS == {} and bfc.BLOCK_FP8_EXTRA_KERNELS == 3
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
    assert qk_norm_allreduce_latency_s(B200, 4, 24.7e-6, 6e-6, "fp8", CHAINED) == pytest.approx(
        bfc.chained_point_s(6e-6, 24.7e-6, 3), rel=1e-12)
    ll = nccl_ll_allreduce_latency_s(2)            # the link part held out: NCCL's LL figure is the exchange
    assert qk_norm_allreduce_latency_s(B200, 2, 24.7e-6, None, "fp8", CHAINED) == pytest.approx(
        bfc.chained_point_s(ll, 24.7e-6, 3), rel=1e-12)
    assert qk_norm_allreduce_latency_s(B200, 1, 24.7e-6, 6e-6, "fp8", CHAINED) == 0.0          # TP 1: none
    assert qk_norm_allreduce_latency_s(B200, 4, 24.7e-6, 6e-6, "nvfp4", CHAINED) == 6e-6      # NVFP4: the exchange
    assert qk_norm_allreduce_latency_s(H100, 4, 24.7e-6, 6e-6, "fp8", CHAINED) == 24.7e-6     # Hopper: unchanged
    seven = {("blackwell", "fp8"): 7}
    assert qk_norm_allreduce_latency_s(B200, 4, 24.7e-6, 6e-6, "fp8", seven) == pytest.approx(24.7e-6)
    mm = resolve_model("minimax-m2.5")
    assert qk_norm_step_s(mm, B200, 4, 24.7e-6, 6e-6, "fp8", CHAINED) == pytest.approx(
        62 * bfc.chained_point_s(6e-6, 24.7e-6, 3), rel=1e-12)
    assert qk_norm_step_s(mm, B200, 4, 24.7e-6, 6e-6, "fp8") == 62 * 24.7e-6                 # None: the module's


def test_a_cost_model_made_while_the_table_holds_a_path_prices_its_chain():
    def cost():
        return RooflineCostModel("minimax-m2.5", B200, 4, "fp8", "fp8", unsharded_allreduce_link_s=6e-6)
    plain = cost()
    with mock.patch.dict(bfc.CHAIN_PATHS, CHAINED):
        chained = cost()
    step, latency_s = (8, 8, 8000, 0, 8, 0), plain.allreduce_latency_s
    gap_s = 62 * (latency_s - bfc.chained_point_s(6e-6, latency_s, 3))    # 62 layers, one q / k point each
    assert gap_s > 0
    assert plain.step_time_from_sums(*step) - chained.step_time_from_sums(*step) == pytest.approx(gap_s, rel=1e-9)
    assert cost().step_time_from_sums(*step) == plain.step_time_from_sums(*step)       # the table restored


def test_the_script_patches_the_chain_and_reads_fold_parameters():
    mod = load_benchmark("minimax_fp8_chain")
    with mod.chain_patch(5):
        assert bfc.CHAIN_PATHS == {("blackwell", "fp8"): 5}
    with mod.chain_patch(None):
        assert bfc.CHAIN_PATHS == {("blackwell", "fp8"): 3}
    assert bfc.CHAIN_PATHS == {}
    with pytest.raises(TwinInputError):
        mod.chain_patch(-1)
    report = {"folds": {"family": {"folds": [{"held_out": "minimax", "params": {"a": 1.0}},
                                             {"held_out": "kimi", "params": {"a": 2.0}}]},
                        "GPU": {"folds": [{"held_out": "B200", "params": {"b": 3.0}}]}}}
    assert mod.fold_params(report) == {"family:minimax": {"a": 1.0}, "GPU:B200": {"b": 3.0}}
    with pytest.raises(TwinInputError):
        mod.fold_params({"cases": []})
