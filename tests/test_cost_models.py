"""Cost models: roofline bounds and monotonicity, tensor parallelism, dtypes, explain(), constant model, factory."""

from __future__ import annotations

import itertools

import pytest

from twin.hardware.catalog import resolve_gpu, resolve_model
from twin.cost.base import CostModel
from twin.cost.constant import ConstantCostModel
from twin.cost.factory import COST_MODEL_BUILDERS, build_cost_model, register_cost_model
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.core.scheduler_output import SchedulerOutput


def step(new, computed, spec=None) -> SchedulerOutput:
    spec = [0] * len(new) if spec is None else spec
    return SchedulerOutput(step_index=0, num_new_tokens=list(new), num_computed_before=list(computed),
                           num_spec_tokens=list(spec))


def decode(batch: int, context: int) -> SchedulerOutput:
    return step([1] * batch, [context] * batch)


@pytest.fixture(scope="module")
def l8():
    return RooflineCostModel("llama-3.1-8b", "H100-SXM")


def test_satisfies_protocol(l8):
    assert isinstance(l8, CostModel)
    assert isinstance(ConstantCostModel(0.01), CostModel)


@pytest.mark.parametrize("model, gpu, tp", [("llama-3.1-8b", "H100-SXM", 1), ("llama-3.1-70b", "H100-SXM", 4),
                                            ("qwen2.5-7b", "L4", 1), ("mistral-7b", "A100-SXM-80GB", 2),
                                            ("tiny-llama", "CPU", 1)])
def test_never_below_the_physical_bounds(model, gpu, tp):
    cm = RooflineCostModel(model, gpu, tensor_parallel_size=tp)
    m, g = resolve_model(model), resolve_gpu(gpu)
    for batch, ctx in itertools.product([1, 4, 32, 256], [0, 100, 2000, 30000]):
        s = decode(batch, ctx)
        t = cm.step_time_s(s)
        weight_bound = m.weight_read_bytes("bf16", tp) / g.memory_bandwidth_bytes_per_s
        kv_bound = batch * (ctx + 2) * m.kv_bytes_per_token("bf16", tp) / g.memory_bandwidth_bytes_per_s
        flop_bound = batch * m.linear_flops_per_token() / tp / g.flops("bf16")
        assert t >= weight_bound + kv_bound
        assert t >= flop_bound
        b = cm.bounds(s)
        assert t >= b["memory_bound_s"] and t >= b["flop_bound_s"]
    # prefill chunks too
    for n, c in [(512, 0), (8192, 0), (2048, 6000)]:
        s = step([n], [c])
        b = cm.bounds(s)
        assert cm.step_time_s(s) >= max(b["memory_bound_s"], b["flop_bound_s"])


def test_decode_is_weight_bound_and_prefill_compute_bound(l8):
    e = l8.explain(decode(1, 1000))
    assert e["weight_read_s"] > 10 * e["linear_compute_s"]
    e = l8.explain(step([8192], [0]))
    assert e["weight_read_s"] == 0.0 and e["linear_compute_s"] > 0.1


def test_explain_sums_to_total(l8):
    keys = {"linear_compute_s", "attention_compute_s", "weight_read_s", "kv_read_s", "kv_write_s", "allreduce_s",
            "overhead_s", "moe_expert_compute_extra_s", "moe_expert_read_extra_s", "total_s"}
    tp4 = RooflineCostModel("llama-3.1-70b", "H100-SXM", tensor_parallel_size=4)
    for cm, s in itertools.product([l8, tp4], [decode(1, 10), decode(64, 3000), step([4000], [0]),
                                               step([300, 1, 1, 4], [0, 50, 9000, 120], [0, 0, 0, 3])]):
        e = cm.explain(s)
        assert set(e) == keys
        assert e["total_s"] == cm.step_time_s(s)
        assert sum(v for k, v in e.items() if k != "total_s") == pytest.approx(e["total_s"], rel=1e-12)
        assert all(v >= 0 for v in e.values())


def test_empty_step_costs_nothing(l8):
    assert l8.step_time_s(step([], [])) == 0.0
    assert l8.explain(step([], []))["total_s"] == 0.0


def test_monotone_in_context_and_tokens(l8):
    times = [l8.step_time_s(decode(16, c)) for c in (0, 10, 100, 1000, 10000, 100000)]
    assert times == sorted(times) and len(set(times)) == len(times)
    times = [l8.step_time_s(decode(b, 500)) for b in (1, 2, 8, 32, 128, 512)]
    assert times == sorted(times) and len(set(times)) == len(times)
    times = [l8.step_time_s(step([n], [0])) for n in (1, 16, 256, 2048, 8192)]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_attention_pair_count_exact():
    # 4 x layers x heads x head_dim FLOPs per (query, key) pair: n=3 after c=5 -> 6 + 7 + 8 = 21 pairs
    cm = RooflineCostModel("tiny-llama", "CPU", compute_efficiency=1.0)
    m, g = cm.model, cm.gpu
    e = cm.explain(step([3], [5]))
    assert e["attention_compute_s"] == pytest.approx(21 * m.attention_flops_per_position() / g.flops("bf16"))


def test_lm_head_counts_one_logit_per_sequence_plus_spec_tokens():
    cm = RooflineCostModel("llama-3.1-8b", "H100-SXM", compute_efficiency=1.0)
    m, peak = cm.model, cm.gpu.flops("bf16")
    base = 2 * m.linear_params / peak
    lm = 2 * m.lm_head_matmul_params / peak
    e = cm.explain(step([512, 4], [0, 100], [0, 3]))   # a prefill chunk (1 logit) + a verify step (1 + 3)
    assert e["linear_compute_s"] == pytest.approx(516 * base + 5 * lm)


def test_tensor_parallel_reduces_gpu_time_but_adds_allreduce():
    t1 = RooflineCostModel("llama-3.1-70b", "H200-SXM", tensor_parallel_size=1)
    t2 = RooflineCostModel("llama-3.1-70b", "H200-SXM", tensor_parallel_size=2)
    for s in (decode(8, 2000), decode(128, 1000), step([4096], [0])):
        e1, e2 = t1.explain(s), t2.explain(s)
        assert e1["allreduce_s"] == 0.0 and e2["allreduce_s"] > 0
        gpu1 = e1["total_s"] - e1["overhead_s"]
        gpu2 = e2["total_s"] - e2["overhead_s"] - e2["allreduce_s"]
        assert gpu2 == pytest.approx(gpu1 / 2, rel=0.01)
        assert e2["total_s"] < e1["total_s"]
    # all-reduce: 2 per layer, each latency + ring bytes over one direction of NVLink at the efficiency
    e = t2.explain(decode(10, 0))
    m = t2.model
    ring = 2 * (2 - 1) / 2 * 10 * m.hidden_size * 2 / (900e9 / 2 * t2.interconnect_efficiency)
    assert e["allreduce_s"] == pytest.approx(2 * m.num_hidden_layers * (t2.allreduce_latency_s + ring))


def test_tp_heads_must_divide():
    with pytest.raises(TwinInputError, match="tensor_parallel_size"):
        RooflineCostModel("llama-3.1-8b", "H100-SXM", tensor_parallel_size=3)


def test_fp8_weights_halve_the_linear_weight_bytes_and_double_the_rate():
    bf = RooflineCostModel("llama-3.1-8b", "H100-SXM", memory_efficiency=1.0, step_overhead_s=0,
                           per_seq_overhead_s=0)
    f8 = RooflineCostModel("llama-3.1-8b", "H100-SXM", weight_dtype="fp8", memory_efficiency=1.0,
                           step_overhead_s=0, per_seq_overhead_s=0)
    m, bw = bf.model, 3.35e12
    e_bf, e_f8 = bf.explain(decode(1, 0)), f8.explain(decode(1, 0))
    read = lambda e: e["weight_read_s"] + e["linear_compute_s"]  # noqa: E731  (memory-bound: the read time)
    assert read(e_bf) == pytest.approx(m.weight_read_bytes("bf16") / bw)
    assert read(e_bf) - read(e_f8) == pytest.approx(m.linear_params / bw)   # linear weights 2 -> 1 byte
    big = step([8192], [0])
    assert f8.explain(big)["linear_compute_s"] < 0.6 * bf.explain(big)["linear_compute_s"]
    # fp8 KV halves the KV bytes
    kv8 = RooflineCostModel("llama-3.1-8b", "H100-SXM", kv_dtype="fp8", memory_efficiency=1.0,
                            kv_memory_efficiency=1.0)    # at the same rate (Hopper's FP8 KV rate: kv_attention)
    assert kv8.explain(decode(64, 4000))["kv_write_s"] == pytest.approx(
        bf.explain(decode(64, 4000))["kv_write_s"] / 2)


def test_sensible_magnitudes_for_h100_8b(l8):
    # ~150 tok/s single stream for Llama-3.1-8B bf16 on one H100 in vLLM; prefill ~20-40k tok/s
    assert 5e-3 < l8.step_time_s(decode(1, 500)) < 9e-3
    assert 0.15 < l8.step_time_s(step([8192], [0])) < 0.45


def test_bad_parameters():
    with pytest.raises(TwinInputError, match="compute_efficiency"):
        RooflineCostModel("llama-3.1-8b", "H100-SXM", compute_efficiency=1.5)
    with pytest.raises(TwinInputError, match="step_overhead_s"):
        RooflineCostModel("llama-3.1-8b", "H100-SXM", step_overhead_s=-1)
    with pytest.raises(TwinInputError, match="weight_dtype"):
        RooflineCostModel("llama-3.1-8b", "H100-SXM", weight_dtype="int3")


def test_constant_model_exact():
    cm = ConstantCostModel(step_s=0.002, per_token_s=1e-5, per_seq_s=1e-4)
    s = step([100, 1, 1], [0, 10, 20])
    assert cm.step_time_s(s) == 0.002 + 1e-5 * 102 + 1e-4 * 3
    e = cm.explain(s)
    assert e == {"step_s": 0.002, "tokens_s": 1e-5 * 102, "seqs_s": 1e-4 * 3, "total_s": cm.step_time_s(s)}
    assert ConstantCostModel(0.01).step_time_s(s) == 0.01
    with pytest.raises(TwinInputError, match="per_token_s"):
        ConstantCostModel(0.01, per_token_s=-1)


def test_factory():
    r = build_cost_model("roofline", "llama-3.1-8b", "h100", 1, {"weight_dtype": "bf16", "kv_dtype": "auto"},
                         {"compute_efficiency": 0.5})
    assert isinstance(r, RooflineCostModel) and r.compute_efficiency == 0.5 and r.kv_dtype == "bf16"
    r8 = build_cost_model("roofline", "llama-3.1-70b", "h100", 4, ("fp8", "fp8"), {})
    assert r8.weight_dtype == "fp8" and r8.tensor_parallel_size == 4
    c = build_cost_model("constant", "tiny-llama", "cpu", 1, None, {"step_s": 0.01, "per_token_s": 0.001})
    assert c.step_time_s(step([3], [0])) == 0.01 + 0.003
    with pytest.raises(TwinInputError, match="allowed: roofline, constant"):
        build_cost_model("magic", "llama-3.1-8b", "h100", 1, None, {})
    with pytest.raises(TwinInputError, match="cost_model.params.efficiency"):
        build_cost_model("roofline", "llama-3.1-8b", "h100", 1, None, {"efficiency": 0.5})
    with pytest.raises(TwinInputError, match="step_s"):
        build_cost_model("constant", "llama-3.1-8b", "h100", 1, None, {})


def test_factory_registry_hook():
    seen = {}

    def builder(model, gpu, tp, weight_dtype, kv_dtype, params):
        seen.update(model=model.name, gpu=gpu.name, tp=tp, w=weight_dtype, kv=kv_dtype, params=params)
        return ConstantCostModel(params["step_s"])

    register_cost_model("profile-test", builder)
    try:
        cm = build_cost_model("profile-test", "qwen2.5-7b", "l40s", 2, {"weight_dtype": "fp8"}, {"step_s": 0.5})
        assert cm.step_time_s(step([1], [0])) == 0.5
        assert seen == {"model": "qwen2.5-7b", "gpu": "L40S", "tp": 2, "w": "fp8", "kv": "bf16",
                        "params": {"step_s": 0.5}}
    finally:
        COST_MODEL_BUILDERS.pop("profile-test")


def reference_step_time(cm: RooflineCostModel, s) -> float:
    """The module docstring's formula, written out with explicit loops."""
    m, g, tp = cm.model, cm.gpu, cm.tensor_parallel_size
    ce, me = cm.compute_efficiency, cm.memory_efficiency
    if not s.num_new_tokens:
        return 0.0
    tokens = sum(s.num_new_tokens)
    logits = sum(1 + k for k in s.num_spec_tokens)
    pairs = sum(c + j for n, c in zip(s.num_new_tokens, s.num_computed_before) for j in range(1, n + 1))
    context = sum(c + n for n, c in zip(s.num_new_tokens, s.num_computed_before))
    bw = g.memory_bandwidth_bytes_per_s * me
    peak = g.flops("bf16") * ce
    linear = max((2 * m.linear_params * tokens + 2 * m.vocab_size * m.hidden_size * logits) / tp / peak,
                 m.weight_read_bytes("bf16", tp) / bw)
    kv = m.kv_bytes_per_token("bf16", tp)
    attention = max(4 * m.num_hidden_layers * m.num_attention_heads * m.head_dim * pairs / tp / peak,
                    kv * context / bw)
    write = kv * tokens / bw
    ar = 0.0
    if tp > 1:
        per = cm.allreduce_latency_s + 2 * (tp - 1) / tp * tokens * m.hidden_size * 2 / (
            g.interconnect_bytes_per_s / 2 * cm.interconnect_efficiency)
        ar = 2 * m.num_hidden_layers * per
    return linear + attention + write + ar + cm.step_overhead_s + cm.per_seq_overhead_s * len(s.num_new_tokens)


@pytest.mark.parametrize("tp", [1, 2])
def test_matches_the_written_out_formula(tp):
    import random

    rng = random.Random(1)
    cm = RooflineCostModel("llama-3.1-70b", "H100-SXM", tensor_parallel_size=tp) if tp > 1 else \
        RooflineCostModel("mistral-7b", "L40S")
    for _ in range(50):
        batch = rng.randint(1, 40)
        new = [1] * batch if rng.random() < 0.5 else [rng.choice([1, 1, 4, 37, 512]) for _ in range(batch)]
        computed = [rng.randint(0, 9000) for _ in range(batch)]
        spec = [rng.choice([0, 0, 3]) for _ in range(batch)]
        s = step(new, computed, spec)
        assert cm.step_time_s(s) == pytest.approx(reference_step_time(cm, s), rel=1e-12)


@pytest.mark.parametrize("model, gpu, tp", [("llama-3.1-8b", "H100-SXM", 1), ("llama-3.1-70b", "H100-SXM", 4),
                                            ("mixtral-8x7b", "H100-SXM", 2), ("tiny-llama", "CPU", 1)])
def test_decode_step_times_are_bit_identical_to_the_scalar_sums(model, gpu, tp):
    import numpy as np

    cm = RooflineCostModel(model, gpu, tensor_parallel_size=tp)
    rng = np.random.default_rng(0)
    for n_seqs in (1, 7, 64, 512):
        contexts = np.sort(rng.integers(n_seqs, n_seqs * 20_000, size=50))
        scalar = [cm.step_time_from_sums(n_seqs, n_seqs, int(c), 0, n_seqs, 0) for c in contexts]
        ns = np.full(len(contexts), n_seqs)
        assert cm.step_times_s(ns, ns, ns, contexts, contexts + n_seqs).tolist() == scalar


@pytest.mark.parametrize("model, gpu, tp", [("llama-3.1-8b", "H100-SXM", 1), ("llama-3.1-70b", "H100-SXM", 4),
                                            ("mixtral-8x7b", "H100-SXM", 2), ("tiny-llama", "CPU", 1)])
def test_a_decode_run_costs_each_step_as_the_scalar_sums(model, gpu, tp):
    """The cohort's runs cost consecutive pure-decode steps in one call: each step bit-identical to its sums."""
    cm = RooflineCostModel(model, gpu, tensor_parallel_size=tp)
    for n_seqs, context in ((1, 0), (7, 3_000), (64, 250_000), (512, 4_000_000)):
        run = cm.decode_step_times_s(n_seqs, context, 40)
        assert run == [cm.step_time_from_sums(n_seqs, n_seqs, context + i * n_seqs, 0, n_seqs, 0)
                       for i in range(40)]
        assert cm.decode_step_times_s(n_seqs, context + 5 * n_seqs, 35) == run[5:]   # from the kept terms
    assert cm.decode_step_times_s(3, 100, 0) == []


def test_a_decode_run_takes_the_larger_of_attention_and_kv_read_either_way():
    """Which of the two terms wins depends on the model (attention FLOPs against KV bytes per token); with
    either coefficient the larger one, the run's steps equal the scalar sums."""
    k_kv = RooflineCostModel("llama-3.1-8b", "H100-SXM")._k_kv
    for k_attn in (k_kv * 0.5, k_kv, k_kv * 3.0):
        cm = RooflineCostModel("llama-3.1-8b", "H100-SXM")   # a fresh one: the run's terms are kept per n_seqs
        cm._k_attn = k_attn
        run = cm.decode_step_times_s(9, 12_345, 30)
        assert run == [cm.step_time_from_sums(9, 9, 12_345 + i * 9, 0, 9, 0) for i in range(30)]


def test_constant_model_decode_run():
    cm = ConstantCostModel(0.01, per_token_s=1e-4, per_seq_s=2e-4)
    assert cm.decode_step_times_s(5, 1_000, 3) == [cm.step_time_from_sums(5, 5, 1_000, 0, 5, 0)] * 3
