"""The cost terms the multi-source fit adds: efficiencies by GPU generation, the MoE expert-GEMM efficiency and
the KV-read efficiency of paged attention; the scoped fit parameters that set them; the surrogate's folding of
pure-decode steps."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from twin.core.scheduler_output import SchedulerOutput
from twin.cost.generations import GENERATION_DEFAULTS, default_efficiencies, gpu_generation
from twin.cost.roofline import RooflineCostModel
from twin.fitting.scoped import params_for
from twin.fitting.surrogate import compress_steps


def step(nn, cc, spec=None):
    return SchedulerOutput(step_index=0, num_new_tokens=list(nn), num_computed_before=list(cc),
                           num_spec_tokens=list(spec or [0] * len(nn)))


def test_generations():
    assert [gpu_generation(g) for g in ("H100-SXM", "H200-SXM", "B200", "A100-SXM-80GB", "L40S", "MI300X",
                                        "RTX-PRO-6000")] == \
        ["hopper", "hopper", "blackwell", "ampere", "ada", "cdna3", "blackwell"]
    # a generation without its own fitted values takes the reference's (Hopper's)
    assert default_efficiencies("A100-SXM-80GB") == GENERATION_DEFAULTS["hopper"]
    assert RooflineCostModel("llama-3.1-8b", "B200").memory_efficiency == default_efficiencies("B200")[0]


def test_moe_efficiency_one_is_the_plain_roofline_and_below_one_slows_expert_gemms_only():
    plain = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2)
    same = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2, moe_expert_efficiency=1.0)
    half = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2, moe_expert_efficiency=0.5,
                             moe_expert_compute_efficiency=0.5)
    shapes = [step([1] * 8, [500] * 8), step([2048], [0]), step([300, 1, 1], [0, 40, 900])]
    for s in shapes:
        assert same.step_time_s(s) == plain.step_time_s(s)
        assert half.step_time_s(s) > plain.step_time_s(s)
        e = half.explain(s)
        assert sum(v for k, v in e.items() if k != "total_s") == pytest.approx(e["total_s"], rel=1e-12)
        assert e["moe_expert_compute_extra_s"] + e["moe_expert_read_extra_s"] == pytest.approx(
            half.step_time_s(s) - plain.step_time_s(s), rel=1e-9)
    # a decode step is weight-read bound: the extra is on the read side, and at efficiency 0.5 the routed
    # experts' bytes are streamed twice over: extra = routed-expert bytes touched / bandwidth
    e = half.explain(step([1], [100]))
    assert e["moe_expert_read_extra_s"] > 0 and e["moe_expert_compute_extra_s"] == 0
    # a dense model ignores it
    dense = [RooflineCostModel("llama-3.1-8b", "H100-SXM", moe_expert_efficiency=x, moe_expert_compute_efficiency=x)
             for x in (1.0, 0.3)]
    assert dense[0].step_time_s(shapes[0]) == dense[1].step_time_s(shapes[0])


def test_kv_memory_efficiency_slows_long_context_decode_only_through_kv():
    base = RooflineCostModel("llama-3.1-8b", "H100-SXM")
    slow = RooflineCostModel("llama-3.1-8b", "H100-SXM", kv_memory_efficiency=0.5)
    short, long_ = step([1] * 16, [10] * 16), step([1] * 16, [8000] * 16)
    d_short = slow.explain(short)["kv_read_s"] - base.explain(short)["kv_read_s"]
    d_long = slow.explain(long_)["kv_read_s"] - base.explain(long_)["kv_read_s"]
    assert d_long > 100 * d_short > 0
    assert slow.explain(long_)["weight_read_s"] == base.explain(long_)["weight_read_s"]


def test_vectorised_costing_matches_step_by_step_with_the_new_terms():
    cm = RooflineCostModel("mixtral-8x7b", "B200", tensor_parallel_size=2, moe_expert_efficiency=0.4,
                           moe_expert_compute_efficiency=0.3, kv_memory_efficiency=0.6, layer_overhead_s=5e-6)
    shapes = [step([1] * 8, [500] * 8), step([2048], [0]), step([300, 1, 1], [0, 40, 900])]
    tokens = np.array([sum(s.num_new_tokens) for s in shapes], dtype=float)
    seqs = np.array([len(s.num_new_tokens) for s in shapes], dtype=float)
    context = np.array([sum(s.num_computed_before) for s in shapes], dtype=float)
    pairs = np.array([sum(n * c + n * (n + 1) / 2 for n, c in zip(s.num_new_tokens, s.num_computed_before))
                      for s in shapes])
    vec = cm.step_times_s(tokens, seqs, seqs, context, pairs)
    assert list(vec) == pytest.approx([cm.step_time_s(s) for s in shapes], rel=1e-12)


class _Dep:
    def __init__(self, gpu, async_on):
        from twin.hardware.catalog import resolve_gpu
        self.gpu = resolve_gpu(gpu)
        self.scheduler_config = type("C", (), {"async_scheduling": async_on})()


def test_scoped_parameters_apply_where_their_scope_covers_the_deployment():
    params = {"memory_efficiency": 0.9, "memory_efficiency@blackwell": 0.7, "step_overhead_s": 1e-3,
              "step_overhead_s@sync": 4e-3}
    assert params_for(params, _Dep("H100-SXM", True)) == {"memory_efficiency": 0.9, "step_overhead_s": 1e-3}
    assert params_for(params, _Dep("B200", True)) == {"memory_efficiency": 0.7, "step_overhead_s": 1e-3}
    assert params_for(params, _Dep("B200", False)) == {"memory_efficiency": 0.7, "step_overhead_s": 4e-3}


def test_folding_pure_decode_steps_keeps_every_sum():
    rng = np.random.default_rng(0)
    n = 400
    seqs = rng.integers(1, 6, n).astype(float)
    mixed = rng.random(n) < 0.2
    tokens = np.where(mixed, seqs + 300, seqs)
    context = rng.integers(0, 5000, n).astype(float)
    pairs = np.where(mixed, context * 3 + 7, context + tokens)
    decodes = np.where(mixed, seqs - 1, seqs)
    steps = {"tokens": tokens, "seqs": seqs, "logits": seqs, "context": context, "pairs": pairs,
             "decodes": decodes}
    (t, s, lg, c, p), d, count = compress_steps(steps)
    assert len(count) < n and count.sum() == n
    cm = RooflineCostModel("llama-3.1-8b", "H100-SXM")
    full = cm.step_times_s(tokens, seqs, seqs, context, pairs)
    folded = cm.step_times_s(t, s, lg, c, p)
    assert float(count @ folded) == pytest.approx(float(full.sum()), rel=1e-12)
    assert float((d * count) @ folded) == pytest.approx(float(decodes @ full), rel=1e-12)
    for a, b in itertools.combinations([count.sum(), (count * s).sum()], 2):
        assert a <= b


def test_layer_overhead_is_per_layer_per_step():
    a = RooflineCostModel("llama-3.1-70b", "H100-SXM", tensor_parallel_size=4)
    b = RooflineCostModel("llama-3.1-70b", "H100-SXM", tensor_parallel_size=4, layer_overhead_s=5e-6)
    s = step([1] * 4, [100] * 4)
    assert b.step_time_s(s) - a.step_time_s(s) == pytest.approx(80 * 5e-6, rel=1e-9)
    # explain() names it (round 8, twin.cost.kernel_path.explain_layer_overhead): apart from the other overheads
    assert b.explain(s)["layer_overhead_s"] == pytest.approx(80 * 5e-6, rel=1e-9)
    assert "layer_overhead_s" not in a.explain(s)
    assert b.explain(s)["overhead_s"] == pytest.approx(a.explain(s)["overhead_s"], rel=1e-12)


def test_quantized_weight_efficiency_slows_quantized_gemms_only():
    s = step([1] * 8, [100] * 8)
    f8 = [RooflineCostModel("llama-3.1-70b", "H100-SXM", tensor_parallel_size=4, weight_dtype="fp8",
                            kv_dtype="fp8", quant_weight_efficiency=q) for q in (1.0, 0.5)]
    bf = [RooflineCostModel("llama-3.1-70b", "H100-SXM", tensor_parallel_size=4, quant_weight_efficiency=q)
          for q in (1.0, 0.5)]
    assert bf[0].step_time_s(s) == bf[1].step_time_s(s)
    assert f8[1].explain(s)["weight_read_s"] + f8[1].explain(s)["linear_compute_s"] == pytest.approx(
        2 * (f8[0].explain(s)["weight_read_s"] + f8[0].explain(s)["linear_compute_s"]), rel=0.02)
    assert f8[1].explain(s)["kv_read_s"] == f8[0].explain(s)["kv_read_s"]


def test_weight_format_scopes():
    class Pool:
        weight_dtype = "fp8"
    dep = _Dep("H100-SXM", True)
    dep.kv_pool = Pool()
    assert params_for({"quant_weight_efficiency@fp8": 0.7, "quant_weight_efficiency@int4": 0.5}, dep) == \
        {"quant_weight_efficiency": 0.7}


def test_generation_and_format_terms_are_the_defaults_where_given(monkeypatch):
    """A generation's per-token / per-layer / all-reduce terms and a format's quantized-GEMM efficiency apply
    where none is passed; an explicit value wins; other generations and formats keep the flat defaults."""
    from twin.cost import default_terms as dt
    monkeypatch.setattr(dt, "GENERATION_TERMS", {"blackwell": {"per_token_overhead_s": 3e-6, "layer_overhead_s": 2e-6,
                                                                "allreduce_latency_s": 9e-6,
                                                                "fused_allreduce_latency_s": 5e-6}})
    monkeypatch.setattr(dt, "FORMAT_QUANT_EFFICIENCY", {"int4": 0.3})
    b = RooflineCostModel("llama-3.1-70b", "B200", tensor_parallel_size=2)
    assert (b.per_token_overhead_s, b.layer_overhead_s, b.allreduce_latency_s) == (3e-6, 2e-6, 9e-6)
    assert RooflineCostModel("llama-3.1-70b", "B200", tensor_parallel_size=2,
                             allreduce_fusion=True).fused_allreduce_latency_s == 5e-6
    assert RooflineCostModel("llama-3.1-70b", "H100-SXM", tensor_parallel_size=2,
                             allreduce_fusion=True).fused_allreduce_latency_s == 24.7e-6     # not fitted: unfused
    h = RooflineCostModel("llama-3.1-70b", "H100-SXM", tensor_parallel_size=2)
    assert (h.per_token_overhead_s, h.layer_overhead_s, h.allreduce_latency_s) == (0.0, 0.0, 24.7e-6)
    assert RooflineCostModel("llama-3.1-70b", "B200", tensor_parallel_size=2, per_token_overhead_s=1e-6,
                             layer_overhead_s=0.0).per_token_overhead_s == 1e-6
    assert RooflineCostModel("llama-3.1-8b", "H100-SXM", weight_dtype="int4").quant_weight_efficiency == 0.3
    assert RooflineCostModel("llama-3.1-8b", "H100-SXM", weight_dtype="fp8").quant_weight_efficiency == 1.0
    assert RooflineCostModel("llama-3.1-8b", "H100-SXM", weight_dtype="int4",
                             quant_weight_efficiency=0.9).quant_weight_efficiency == 0.9


def test_expert_format_terms_apply_to_moe_models_of_that_format_only(monkeypatch):
    from twin.cost import default_terms as dt
    from twin.cost import generation_experts as ge
    monkeypatch.setattr(ge, "GENERATION_EXPERT_TERMS", {})      # the format's own table alone (not Hopper's pair)
    monkeypatch.setattr(dt, "EXPERT_FORMAT_TERMS", {"fp8": {"moe_expert_compute_efficiency": 0.4,
                                                            "moe_layer_overhead_s": 5e-5}})
    moe = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2, weight_dtype="fp8")
    assert (moe.moe_expert_compute_efficiency, moe.moe_layer_overhead_s) == (0.4, 5e-5)
    bf16 = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2)
    assert (bf16.moe_expert_compute_efficiency, bf16.moe_layer_overhead_s) == (1.0, 0.0)
    dense = RooflineCostModel("llama-3.1-8b", "H100-SXM", weight_dtype="fp8")
    assert (dense.moe_expert_compute_efficiency, dense.moe_layer_overhead_s) == (1.0, 0.0)
    given = RooflineCostModel("mixtral-8x7b", "H100-SXM", tensor_parallel_size=2, weight_dtype="fp8",
                              moe_expert_compute_efficiency=0.9, moe_layer_overhead_s=0.0)
    assert (given.moe_expert_compute_efficiency, given.moe_layer_overhead_s) == (0.9, 0.0)
