"""What a silicon row's layout costs per GPU, by hand: the TP4 x DP4 x EP16 label (16 GPUs over two 8-GPU
NVLink domains) against the 4-GPU TP4 server its script launched (``twin.fitting.silicon_layout``)."""

from __future__ import annotations

import pytest

from twin.core.scheduler_output import SchedulerOutput
from twin.cost.roofline import ALLREDUCE_LATENCY_PCIE_S, RooflineCostModel
from twin.hardware.catalog import linear_weight_bytes, resolve_gpu, resolve_model
from twin.hardware.parallel import ParallelLayout

KIMI = resolve_model("kimi-k2.5")
B200 = resolve_gpu("B200")


def test_the_labelled_16_gpu_layout_pays_an_all_gather_per_token_over_the_network():
    assert (KIMI.hidden_size, KIMI.moe_layers, B200.nvlink_domain_gpus, B200.scale_out_bytes_per_s) == (
        7168, 60, 8, 50e9)
    lab = RooflineCostModel(KIMI, B200, 4, weight_dtype="nvfp4", layout=ParallelLayout(4, 1, 4, True))
    # dispatch all-gathers and combine reduce-scatters each DP rank's hidden states: 2 x (dp - 1) x h x 2 bytes
    # per token per MoE layer, over the 50 GB/s network (16 GPUs > one 8-GPU NVLink domain) at 0.75
    per_token_bytes = 2 * 3 * 7168 * 2 * 60
    assert per_token_bytes == 5_160_960
    d = lab.describe()
    k, t = d["moe_all2all_s_per_token"], d["moe_all2all_s_per_step"]
    assert k == pytest.approx(per_token_bytes / (50e9 * 0.75), rel=1e-12)      # 137.6 us per token
    assert t == pytest.approx(60 * 2 * ALLREDUCE_LATENCY_PCIE_S, rel=1e-12)     # 9.26 ms per step
    # an 8k prompt's prefill pays 1.13 s of it: the slice's +101% TTFT; every decode step +9.3 ms: its TPOT
    assert 8192 * k == pytest.approx(1.1274, abs=1e-4) and t == pytest.approx(9.2625e-3, rel=1e-12)
    step = SchedulerOutput(step_index=0, num_new_tokens=[8192], num_computed_before=[0], num_spec_tokens=[0])
    assert lab.explain(step)["moe_all2all_s"] == pytest.approx(t + 8192 * k, rel=1e-12)


def test_the_launched_4_gpu_server_has_no_moe_collective_and_a_quarter_of_the_experts_per_gpu():
    run = RooflineCostModel(KIMI, B200, 4, weight_dtype="nvfp4")           # --tensor-parallel-size 4
    lab = RooflineCostModel(KIMI, B200, 4, weight_dtype="nvfp4", layout=ParallelLayout(4, 1, 4, True))
    assert run.describe()["moe_all2all_s_per_token"] == run.describe()["moe_all2all_s_per_step"] == 0.0
    step = SchedulerOutput(step_index=0, num_new_tokens=[8192], num_computed_before=[0], num_spec_tokens=[0])
    assert "moe_all2all_s" not in run.explain(step)
    # weights per GPU: the same TP shards of attention and dense layers; routed experts over 4 GPUs, not 16
    routed = KIMI.weight_bytes("nvfp4", 4, moe_shards=4) - KIMI.weight_bytes("nvfp4", 4, moe_shards=16)
    assert routed > 0
    assert run.describe()["weight_bytes_per_gpu"] - lab.describe()["weight_bytes_per_gpu"] == routed
    # (each shard's bytes are rounded up to whole bytes: 5e-7 of it)
    assert routed == pytest.approx(linear_weight_bytes(KIMI.routed_expert_params, "nvfp4") * (1 / 4 - 1 / 16),
                                   rel=1e-6)
    # FLOPs per token per GPU are the same either way (balanced ranks): the routed experts' top-k share / tp
    assert run.describe()["linear_s_per_token"] == lab.describe()["linear_s_per_token"]


def test_a_dp_attention_run_all_gathers_over_nvlink():
    """MiniMax-M2.5 NVFP4, dp-attn (TP1 x DP2, EP over 2 GPUs): 2 x (2 - 1) x 3072 x 2 bytes per token per MoE
    layer over one direction of NVLink (1.8 TB/s / 2) at 0.75, and the fitted NVLink latency twice per layer."""
    m = resolve_model("minimax-m2.5")
    cm = RooflineCostModel(m, B200, 1, weight_dtype="nvfp4", layout=ParallelLayout(1, 1, 2, True))
    d = cm.describe()
    assert d["moe_all2all_s_per_token"] == pytest.approx(62 * 2 * 1 * 3072 * 2 / (1.8e12 / 2 * 0.75), rel=1e-12)
    assert d["moe_all2all_s_per_step"] == pytest.approx(62 * 2 * 24.7e-6, rel=1e-12)
