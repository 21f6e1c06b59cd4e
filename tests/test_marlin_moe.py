"""INT4 W4A16 routed experts on vLLM's Marlin MoE path (twin.cost.marlin_moe): the three embedded terms of the
``int4`` expert format, each checked by hand on Kimi-K2.5 INT4 TP8 on B200, and the explain() part of a MoE
layer's fixed time."""

from __future__ import annotations

import pytest

from twin.core.scheduler_output import SchedulerOutput
from twin.cost.default_terms import EXPERT_FORMAT_TERMS
from twin.cost.kernel_path import explain_overhead_parts
from twin.cost.marlin_moe import MARLIN_W4A16_MOE_TERMS
from twin.cost.moe_terms import routed_expert_flops_per_token, routed_expert_read_bytes
from twin.cost.roofline import RooflineCostModel
from twin.fitting.joint import default_start
from twin.hardware.catalog import resolve_gpu, resolve_model
from twin.hardware.weight_formats import WeightFormats

KIMI = resolve_model("kimi-k2.5")
B200 = resolve_gpu("B200")
INT4 = WeightFormats(routed_experts="int4-g32-sym")
PRIORS = dict(moe_layer_overhead_s=0.0, moe_expert_efficiency=1.0, moe_expert_compute_efficiency=1.0)


def _step(new: list[int], before: list[int]) -> SchedulerOutput:
    return SchedulerOutput(step_index=0, num_new_tokens=new, num_computed_before=before,
                           num_spec_tokens=[0] * len(new))


def test_the_int4_expert_format_embeds_the_marlin_terms_and_other_formats_keep_their_priors():
    assert MARLIN_W4A16_MOE_TERMS == {"moe_layer_overhead_s": 38.2e-6, "moe_expert_efficiency": 0.618,
                                      "moe_expert_compute_efficiency": 0.171}      # round 8: with MLA's per-layer time
    assert EXPERT_FORMAT_TERMS["int4"] is MARLIN_W4A16_MOE_TERMS
    cm = RooflineCostModel(KIMI, B200, 8, weight_dtype=INT4)
    assert (cm.moe_layer_overhead_s, cm.moe_expert_efficiency, cm.moe_expert_compute_efficiency) == (
        38.2e-6, 0.618, 0.171)
    for other in (RooflineCostModel(KIMI, B200, 4, weight_dtype="nvfp4"),
                  RooflineCostModel("mixtral-8x7b", "H100-SXM", 2),
                  RooflineCostModel("llama-3.1-8b", "B200", weight_dtype="int4")):     # dense: no experts
        assert (other.moe_layer_overhead_s, other.moe_expert_efficiency, other.moe_expert_compute_efficiency) == (
            0.0, 1.0, 1.0)
    # an explicit value wins over the embedded one
    given = RooflineCostModel(KIMI, B200, 8, weight_dtype=INT4, moe_expert_efficiency=0.9)
    assert given.moe_expert_efficiency == 0.9 and given.moe_expert_compute_efficiency == 0.171
    # the fit's start carries them scoped to the int4 expert path beside their unscoped priors (which would
    # override them otherwise); the unscoped fixed time is not a joint term: left out, it is embedded anyway
    start = default_start()
    assert (start["moe_expert_efficiency"], start["moe_expert_compute_efficiency"]) == (1.0, 1.0)
    assert (start["moe_expert_efficiency@experts_int4"], start["moe_expert_compute_efficiency@experts_int4"]) == (
        0.618, 0.171)
    assert "moe_layer_overhead_s" not in start and "moe_layer_overhead_s@experts_int4" not in start
    assert default_start(("moe_layer_overhead_s@experts_int4",)) == {"moe_layer_overhead_s@experts_int4": 38.2e-6}


def test_a_decode_step_pays_60_moe_layers_of_fixed_time_and_the_expert_streams_at_0_618():
    """Kimi INT4 TP8, 32 sequences decoding at 1,000 tokens of context: weight-bound, so the step is the priors'
    step + 60 x 51.6 us + (1 / 0.618 - 1) x the touched INT4 experts' bytes per GPU / the weight bandwidth (a
    pure decode pays no padded token blocks)."""
    cm = RooflineCostModel(KIMI, B200, 8, weight_dtype=INT4)
    prior = RooflineCostModel(KIMI, B200, 8, weight_dtype=INT4, **PRIORS)
    step = _step([1] * 32, [1000] * 32)
    assert KIMI.moe_layers == 60
    bandwidth = B200.memory_bandwidth_bytes_per_s * cm.memory_efficiency
    expert_bytes = routed_expert_read_bytes(KIMI, "int4-g32-sym", 8, 32)
    # 32 tokens touch 1 - (1 - 8/384)^32 of the experts: 49 % of 1.015e12 INT4 weights at 0.5625 bytes, / 8 GPUs
    assert expert_bytes == pytest.approx((1 - (1 - 8 / 384) ** 32) * KIMI.routed_expert_params * 0.5625 / 8,
                                         rel=1e-6)
    extra = 60 * 38.2e-6 + (1 / 0.618 - 1) * expert_bytes / bandwidth
    assert cm.step_time_s(step) - prior.step_time_s(step) == pytest.approx(extra, rel=1e-9)
    assert extra == pytest.approx(5.055e-3, rel=1e-3)       # 2.29 ms fixed + 0.618 x 4.47 ms of expert reads
    parts = cm.explain(step)
    assert parts["moe_layer_overhead_s"] == pytest.approx(60 * 38.2e-6, rel=1e-12)
    assert parts["moe_expert_read_extra_s"] == pytest.approx((1 / 0.618 - 1) * expert_bytes / bandwidth, rel=1e-9)
    assert sum(v for k, v in parts.items() if k != "total_s") == pytest.approx(parts["total_s"], rel=1e-12)
    assert "moe_layer_overhead_s" not in prior.explain(step)


def test_a_prefill_chunk_runs_the_expert_flops_at_0_171_of_the_dense_bf16_rate():
    """An 8,192-token prompt on Kimi INT4 TP8: compute-bound, so the routed experts' FLOPs per GPU (2 x top-8 x
    44.0M weights x 60 layers / 8 per token) cost 1 / 0.171 - 1 times more than at the dense bf16 GEMMs' rate;
    Marlin's padded token blocks (B = 64: ~14 % more rows) run at the path's rate (twin.cost.marlin_blocks)."""
    cm = RooflineCostModel(KIMI, B200, 8, weight_dtype=INT4)
    prior = RooflineCostModel(KIMI, B200, 8, weight_dtype=INT4, **PRIORS)
    step = _step([8192], [0])
    flops = routed_expert_flops_per_token(KIMI, 8)
    assert flops == 2 * 8 * 3 * 7168 * 2048 * 60 / 8
    peak_bf16 = B200.flops("bf16") * cm.compute_efficiency
    extra = (1 / 0.171 - 1) * flops * 8192 / peak_bf16
    parts = cm.explain(step)
    assert parts["moe_expert_compute_extra_s"] == pytest.approx(extra, rel=1e-9)
    pad, pad_prior = cm.marlin_padding_s(8192), prior.marlin_padding_s(8192)
    assert pad == pytest.approx(pad_prior / 0.171, rel=1e-9)      # the same rows at 0.171 of the rate
    assert parts["moe_block_padding_s"] == pytest.approx(pad, rel=1e-12)
    assert cm.step_time_s(step) - prior.step_time_s(step) == pytest.approx(extra + 60 * 38.2e-6 + pad - pad_prior,
                                                                          rel=1e-9)


def test_explain_overhead_parts_moves_only_the_terms_that_are_set():
    parts = {"overhead_s": 10.0}
    explain_overhead_parts(parts, 0.0, 0.0, 100, 0.0)
    assert parts == {"overhead_s": 10.0}
    explain_overhead_parts(parts, 0.01, 0.02, 100, 2.5)
    assert parts == {"overhead_s": 10.0 - 1.0 - 2.0 - 2.5, "per_token_overhead_s": 1.0,
                     "layer_token_overhead_s": 2.0, "moe_layer_overhead_s": 2.5}
