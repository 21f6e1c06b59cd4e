"""Issue 33, round 5 (Hopper): the routed experts' kernel path by GPU generation and expert format
(``twin.cost.generation_experts``), the compound ``@hopper+experts_fp8`` scope that fits it, and the H100 rows'
launch facts."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from core_helpers import step_shape as step

from twin.cost import generation_experts as ge
from twin.cost.moe_terms import routed_expert_flops_per_token
from twin.cost.roofline import RooflineCostModel
from twin.fitting.joint import default_start
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.scoped import in_scope, params_for
from twin.hardware.catalog import resolve_gpu
from twin.hardware.weight_formats import WeightFormats

HOPPER_FP8 = ("hopper", "fp8")


def test_the_hopper_fp8_entry_is_the_held_out_fit():
    assert ge.GENERATION_EXPERT_TERMS[HOPPER_FP8] == {"moe_expert_compute_efficiency": 0.18,
                                                      "moe_layer_overhead_s": 16e-6,
                                                      "expert_path_request_s": 26.15e-3}     # round 11
    assert ge.scoped_values() == {"moe_expert_compute_efficiency@hopper+experts_fp8": 0.18,
                                  "moe_layer_overhead_s@hopper+experts_fp8": 16e-6,
                                  "expert_path_request_s@hopper+experts_fp8": 26.15e-3,     # twin.cost.expert_path_request
                                  "expert_path_request_s@blackwell+experts_fp8": 11.35e-3,
                                  "fused_allreduce_latency_s@blackwell+experts_mxfp4": 11e-6,    # twin.cost.mxfp4_path
                                  "moe_expert_compute_efficiency@hopper+experts_mxfp4": 0.35,    # twin.cost.marlin_mxfp4
                                  "layer_token_overhead_s@hopper+experts_mxfp4": 0.15e-6,
                                  "fused_allreduce_latency_s@hopper+experts_mxfp4": 18e-6}
    p = PARAMETERS_BY_NAME["moe_expert_compute_efficiency@hopper+experts_fp8"]
    assert (p.lower, p.upper, p.prior) == (0.05, 1.0, 1.0)
    p = PARAMETERS_BY_NAME["moe_layer_overhead_s@hopper+experts_fp8"]
    assert (p.unit, p.from_model(16e-6), p.prior) == ("us per MoE layer per step", pytest.approx(16.0), 0.0)


def test_generation_expert_terms_hold_on_their_generation_and_expert_format_only():
    h100_fp8 = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2, weight_dtype="fp8")
    assert (h100_fp8.moe_expert_compute_efficiency, h100_fp8.moe_layer_overhead_s) == (0.18, 16e-6)
    b200_fp8 = RooflineCostModel("mixtral-8x7b", "B200", tensor_parallel_size=2, weight_dtype="fp8")
    h100_bf16 = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2)
    h100_dense = RooflineCostModel("llama-3.1-8b", "H100-SXM", weight_dtype="fp8")
    assert [(m.moe_expert_compute_efficiency, m.moe_layer_overhead_s) for m in (b200_fp8, h100_bf16, h100_dense)] \
        == [(1.0, 0.0)] * 3
    given = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2, weight_dtype="fp8",
                              moe_expert_compute_efficiency=0.5)
    assert given.moe_expert_compute_efficiency == 0.5           # an explicit value wins over the table


def test_the_pair_wins_over_the_expert_formats_own_value(monkeypatch):
    from twin.cost import default_terms as dt
    monkeypatch.setattr(dt, "EXPERT_FORMAT_TERMS", {"fp8": {"moe_expert_compute_efficiency": 0.4}})
    assert RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2,
                             weight_dtype="fp8").moe_expert_compute_efficiency == 0.18
    assert RooflineCostModel("mixtral-8x7b", "B200", tensor_parallel_size=2,
                             weight_dtype="fp8").moe_expert_compute_efficiency == 0.4


def test_explain_prices_the_experts_flops_at_the_hopper_rate():
    """moe_expert_compute_extra_s (seconds per step) = (1 / 0.18 - 1) x the experts' FLOPs of the step's tokens
    at the FP8 path's achieved dense rate; nothing else in the step moves."""
    tokens, tp = 4096, 2
    hopper = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=tp, weight_dtype="fp8")
    at_dense = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=tp, weight_dtype="fp8",
                                 moe_expert_compute_efficiency=1.0, moe_layer_overhead_s=16e-6)
    s = step([tokens], [0])
    e, e0 = hopper.explain(s), at_dense.explain(s)
    peak = resolve_gpu("H100-SXM").flops("fp8") * hopper.compute_efficiency
    want = (1 / 0.18 - 1) * routed_expert_flops_per_token(hopper.model, tp) * tokens / peak
    assert e["moe_expert_compute_extra_s"] == pytest.approx(want, rel=1e-12)
    assert e["total_s"] == pytest.approx(e0["total_s"] + want, rel=1e-12)
    assert e0.get("moe_expert_compute_extra_s", 0.0) == 0.0
    assert hopper.step_time_s(s) == pytest.approx(e["total_s"], rel=1e-12)


@dataclass(frozen=True)
class _Dep:
    model: object
    weight_formats: WeightFormats | None
    gpu: object


def test_compound_scope_covers_what_every_part_covers_and_wins_over_a_single_scope():
    from twin.hardware.catalog import resolve_model
    moe, dense = resolve_model("mixtral-8x7b"), resolve_model("llama-3.1-8b")
    fp8 = WeightFormats.uniform("fp8")
    h100, b200 = resolve_gpu("H100-SXM"), resolve_gpu("B200")
    assert in_scope("hopper+experts_fp8", _Dep(moe, fp8, h100))
    assert not in_scope("hopper+experts_fp8", _Dep(moe, fp8, b200))
    assert not in_scope("hopper+experts_fp8", _Dep(dense, fp8, h100))
    assert not in_scope("hopper+experts_fp8", _Dep(moe, WeightFormats.uniform("bf16"), h100))
    params = {"moe_expert_compute_efficiency@hopper+experts_fp8": 0.18, "moe_expert_compute_efficiency": 1.0,
              "moe_expert_compute_efficiency@experts_fp8": 0.7}
    assert params_for(params, _Dep(moe, fp8, h100)) == {"moe_expert_compute_efficiency": 0.18}
    assert params_for(params, _Dep(moe, fp8, b200)) == {"moe_expert_compute_efficiency": 0.7}
    assert params_for(params, _Dep(dense, fp8, h100)) == {"moe_expert_compute_efficiency": 1.0}


def test_the_hopper_fp8_moe_layer_time_is_per_moe_layer_per_step():
    """explain()'s moe_layer_overhead_s part (seconds per step) is 16 us x the MoE layers (32 for Mixtral) on any
    step shape, and the step time grows by it."""
    hopper = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2, weight_dtype="fp8")
    without = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2, weight_dtype="fp8",
                                moe_layer_overhead_s=0.0)
    for s in (step([1] * 8, [500] * 8), step([2048], [0])):
        assert hopper.explain(s)["moe_layer_overhead_s"] == pytest.approx(32 * 16e-6)
        assert "moe_layer_overhead_s" not in without.explain(s)        # a part only where it is set
        assert hopper.step_time_s(s) - without.step_time_s(s) == pytest.approx(32 * 16e-6)


def test_default_start_carries_the_embedded_pair_beside_its_unscoped_term():
    start = default_start(("moe_expert_compute_efficiency",))
    assert start == {"moe_expert_compute_efficiency": 1.0,
                     "moe_expert_compute_efficiency@hopper+experts_fp8": 0.18,
                     "moe_expert_compute_efficiency@experts_int4": 0.171,        # twin.cost.marlin_moe
                     "moe_expert_compute_efficiency@hopper+experts_mxfp4": 0.35}  # twin.cost.marlin_mxfp4
    assert default_start(("step_overhead_s",)) == {"step_overhead_s": pytest.approx(1.74e-3)}


def test_minimax_h100_rows_carry_their_scripts_launch_flags():
    from twin.fitting.silicon import kv_dtype, minimax_h100, model_family, not_expressible, row_server
    from twin.fitting.silicon_rows import CSV_NAME, read_silicon, silicon_dir
    path = silicon_dir() / CSV_NAME
    if not path.is_file():
        pytest.skip(f"no silicon ground truth here: {path}")
    rows = [r for r in read_silicon(path) if not not_expressible(r)]
    mm = [r for r in rows if minimax_h100(r)]
    assert len(mm) == 30
    for r in mm:
        s = row_server(r)
        assert (s["gpu_memory_utilization"], s["max_num_seqs"], s["enable_prefix_caching"]) == (0.90, 256, False)
        assert s["fuse_allreduce_rms"] is True and kv_dtype(r) == "bf16"       # 0.18's default; no FP8 KV flag
    qwen = [r for r in rows if model_family(r.model_path) == "qwen3" and r.system == "h100_sxm"]
    assert qwen and all("fuse_allreduce_rms" not in row_server(r) and "max_num_seqs" not in row_server(r)
                        for r in qwen)                                          # vLLM 0.12's defaults


def test_the_pair_table_is_evidence_a_held_out_fold_sees():
    """twin.fitting.provenance lists each (generation, expert format) entry with its stated prior, so a fold that
    holds out its rows resets or refits it."""
    from twin.fitting.provenance import INHERIT, POOLED, embedded_entries
    entries = {e.parameter: e for e in embedded_entries() if e.table == "GENERATION_EXPERT_TERMS"}
    assert {k: (e.value, e.prior) for k, e in entries.items()} == {      # POOLED: round 7, the other paths'
        "moe_expert_compute_efficiency@hopper+experts_fp8": (0.18, POOLED),
        "moe_layer_overhead_s@hopper+experts_fp8": (16e-6, 0.0),
        # round 11: prior 0 (a held-out generation gets the other's rate-scaled, twin.fitting.expert_request_prior)
        "expert_path_request_s@hopper+experts_fp8": (26.15e-3, 0.0),
        "expert_path_request_s@blackwell+experts_fp8": (11.35e-3, 0.0),
        "fused_allreduce_latency_s@blackwell+experts_mxfp4": (11e-6, INHERIT),
        "moe_expert_compute_efficiency@hopper+experts_mxfp4": (0.35, POOLED),      # twin.cost.marlin_mxfp4
        "layer_token_overhead_s@hopper+experts_mxfp4": (0.15e-6, 0.0),
        "fused_allreduce_latency_s@hopper+experts_mxfp4": (18e-6, INHERIT)}
    assert entries["moe_layer_overhead_s@hopper+experts_fp8"].evidence == "every ground-truth row on hopper+experts_fp8"
