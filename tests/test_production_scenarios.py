"""The production scenarios of issue 34 run, name their new cost terms, and size their KV pool as vLLM does.

Each pool is recomputed here by vLLM's own rule, by hand from the model's shape and the checkpoint's bytes per
weight (not through the twin's sizing code): per GPU of one DP rank,
    blocks = (memory x gpu_memory_utilization - weights - activation peak - 1 GiB runtime) // block bytes
with the activation peak as the twin estimates vLLM's profile run: the larger of the forward (tokens x 2 bytes x
(2 h + 3 x MLP width / tp)) and the dummy sampler beside the forward's output (tokens x h x 2 bytes +
min(max_num_seqs, tokens) x vocab x 24 bytes)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from twin.fitting.ground_truth import ground_truth_dir
from twin.cost.base import StepShape
from twin.scenario import load_scenario
from twin.sim.deployment import resolve_deployment
from twin.sim.run import metrics_of, run_body

GIB = 2**30
NVFP4 = Fraction(1, 2) + Fraction(1, 16)          # 4 bits + an E4M3 scale per 16
MXFP4 = Fraction(1, 2) + Fraction(1, 32)          # 4 bits + an E8M0 scale per 32
INT4_G32_SYM = Fraction(1, 2) + Fraction(2, 32)   # 4 bits + a bf16 scale per 32


def ceil(x) -> int:
    x = Fraction(x)
    return -(-x.numerator // x.denominator)


def deployment(name: str, variant: str = "baseline"):
    sc = load_scenario(name)
    body = sc.body(variant)
    return body, resolve_deployment(body, sc.base_dir)


def activation(tokens: int, hidden: int, mlp_width_per_gpu: int, seqs: int, vocab: int) -> int:
    # the profile's peak: the forward, or the dummy sampler (bf16 logits + 22 bytes each) beside its output
    return max(tokens * 2 * (2 * hidden + 3 * mlp_width_per_gpu), tokens * hidden * 2 + min(seqs, tokens) * vocab * 24)


def decode(n: int, context: int) -> StepShape:
    from twin.core.scheduler_output import SchedulerOutput
    return SchedulerOutput(step_index=0, num_new_tokens=[1] * n, num_computed_before=[context] * n,
                           num_spec_tokens=[0] * n)


def prefill(tokens: int) -> StepShape:
    from twin.core.scheduler_output import SchedulerOutput
    return SchedulerOutput(step_index=0, num_new_tokens=[tokens], num_computed_before=[0], num_spec_tokens=[0])


def test_gpt_oss_120b_mxfp4_on_one_b200():
    body, dep = deployment("gpt_oss_120b_mxfp4_b200")
    h, L, q, kv, E, vocab = 2880, 36, 64 * 64, 8 * 64, 128, 201088
    attn = L * (h * q + 2 * h * kv + q * h)
    experts = L * E * 3 * h * 2880
    weights = (attn * 2 + ceil(experts * MXFP4) + L * h * E * 2 + L * (q + 2 * kv) * 2   # router, qkv biases
               + 2 * vocab * h * 2 + (L * 2 * h + h) * 2)                                # embedding, LM head, norms
    assert dep.kv_pool.weight_bytes == weights and 64e9 < weights < 66e9
    act = activation(8192, h, 4 * 2880, 64, vocab)
    available = math.floor(dep.gpu.memory_bytes * 0.9) - weights - act - GIB
    # vLLM's hybrid allocator: 18 full + 18 sliding layers, groups of 18; one block = 16 tokens x 18 layers
    vllm_blocks = available // (16 * 18 * 2 * 8 * 64 * 2)
    window_blocks = -(-127 // 16) + 1                     # what one request holds in the sliding group
    assert dep.kv_pool.vllm_num_blocks == vllm_blocks
    assert dep.num_gpu_blocks == vllm_blocks - 64 * window_blocks
    cm = dep.cost_model_factory()
    d = cm.describe()
    # MXFP4 x MXFP8 on Blackwell: the FP8 tensor rate (twin.cost.mxfp4_path, issue 33 round 5)
    assert d["compute_paths"]["routed_experts"] == "fp8" and d["attention_window_tokens"] == 128
    e = cm.explain(decode(32, 4000))
    assert e["attention_sink_s"] > 0 and e["attention_sink_s"] < 1e-5
    # the windowed layers read at most 128 tokens a sequence: KV read grows half as fast with the context
    e_long = cm.explain(decode(32, 8000))
    full_read = 18 * 2 * 8 * 64 * 2 / (dep.gpu.memory_bandwidth_bytes_per_s * cm.memory_efficiency)
    assert (e_long["kv_read_s"] + e_long["attention_compute_s"]) - (e["kv_read_s"] + e["attention_compute_s"]) \
        == pytest.approx(full_read * 32 * 4000, rel=1e-9)
    # Hopper: no FP4 tensor cores; the MXFP4 experts are dequantised and multiplied at the bf16 rate
    _, hop = deployment("gpt_oss_120b_mxfp4_b200", "hopper")
    assert hop.gpu.flops("fp4") == hop.gpu.flops("bf16")


def test_kimi_k2_5_int4_experts_on_8_h200():
    body, dep = deployment("kimi_k2_5_int4_h200_tp8")
    h, L, heads, vocab, E = 7168, 61, 64, 163840, 384
    attn = L * (h * 1536 + 1536 * heads * 192 + h * 576 + 512 * heads * 256 + heads * 128 * h)
    dense, routed = 3 * h * 18432, 60 * E * 3 * h * 2048
    shared, router = 60 * 3 * h * 2048, 60 * h * E
    linear = (attn + dense + shared + router) * 2 + routed * INT4_G32_SYM
    whole = L * h * (1536 + 512 + 64) * 2       # MLA's down projections: whole on every rank (mla_replicated)
    weights = ceil((linear - whole) / 8) + whole + ceil(Fraction(2 * vocab * h * 2, 8)) \
        + (L * (2 * h + 1536 + 512) + h) * 2
    assert dep.kv_pool.weight_bytes == weights and 75e9 < weights < 77e9
    assert dep.scheduler_config.block_size == 64                    # FlashMLA on Hopper
    act = activation(8192, h, 18432 // 8, 32, vocab)
    available = math.floor(dep.gpu.memory_bytes * 0.95) - weights - act - GIB
    assert dep.num_gpu_blocks == available // (64 * L * 576 * 2)    # the latent, on every TP rank
    d = dep.cost_model_factory().describe()
    assert d["weight_formats"]["routed_experts"] == "int4-g32-sym" and d["weight_formats"]["attention"] == "bf16"
    assert d["compute_paths"]["routed_experts"] == "bf16"           # W4A16: Marlin dequantises
    assert d["attention_s_per_pair_prefill"] < d["attention_s_per_pair_decode"]   # MLA expanded vs absorbed


def test_minimax_m2_5_fp8_dp4_ep4_on_4_b200():
    body, dep = deployment("minimax_m2_5_fp8_b200_dp4_ep4")
    h, L, E, vocab = 3072, 62, 256, 200064
    attn = L * (h * 6144 + 2 * h * 1024 + 6144 * h)
    routed = L * E * 3 * h * 1536
    weights = attn + routed // 4 + L * h * E * 2 + 2 * vocab * h * 2 + (L * 2 * h + h) * 2
    assert dep.kv_pool.weight_bytes == weights
    assert dep.engines_per_replica == 4 and dep.layout.expert_parallel_size == 4
    act = activation(2048, h, 8 * 1536, 64, vocab)
    available = math.floor(dep.gpu.memory_bytes * 0.9) - weights - act - GIB
    assert dep.num_gpu_blocks == available // (32 * 2 * L * 8 * 128 * 1)      # fp8 KV, block 32, per DP rank
    cm = dep.cost_model_factory()
    e = cm.explain(decode(16, 1000))
    # all-gather + reduce-scatter of 3 other ranks' hidden states per MoE layer over NVLink 5 (900 GB/s a way)
    link = 1800e9 / 2 * cm.interconnect_efficiency
    assert e["moe_all2all_s"] == pytest.approx(L * (2 * cm.allreduce_latency_s + 16 * 2 * 3 * h * 2 / link),
                                               rel=1e-12)
    assert e["allreduce_s"] == 0.0                                   # tp = 1: no TP all-reduce
    m = metrics_of(run_body(body.model_copy(update={"workload": body.workload.model_copy(
        update={"num_requests": 48})}), None), body)
    assert m["completed"] == 48


def test_deepseek_v3_mla_on_8_h200():
    body, dep = deployment("deepseek_v3_mla_h200")
    h, L, heads, vocab, E = 7168, 61, 128, 129280, 256
    attn = L * (h * 1536 + 1536 * heads * 192 + h * 576 + 512 * heads * 256 + heads * 128 * h)
    linear = attn + 3 * 3 * h * 18432 + 58 * E * 3 * h * 2048 + 58 * 3 * h * 2048 + 58 * h * E * 2   # fp8; router bf16
    whole = L * h * (1536 + 512 + 64)      # MLA's down projections (fp8): whole on every rank (mla_replicated)
    weights = ceil(Fraction(linear - whole, 8)) + whole + ceil(Fraction(2 * vocab * h * 2, 8)) \
        + (L * (2 * h + 1536 + 512) + h) * 2
    assert dep.kv_pool.weight_bytes == weights
    act = activation(8192, h, 18432 // 8, 64, vocab)
    available = math.floor(dep.gpu.memory_bytes * 0.9) - weights - act - GIB
    assert dep.scheduler_config.block_size == 64
    assert dep.num_gpu_blocks == available // (64 * L * 576 * 2)
    cm = dep.cost_model_factory()
    peak = dep.gpu.flops("bf16") * cm.compute_efficiency * 8       # 8 TP ranks share the heads
    d = cm.describe()
    assert d["attention_s_per_pair_decode"] == pytest.approx(L * heads * (2 * 576 + 2 * 512) / peak, rel=1e-12)
    assert d["attention_s_per_pair_prefill"] == pytest.approx(L * heads * (2 * 192 + 2 * 128) / peak, rel=1e-12)
    assert cm.explain(prefill(2048))["attention_compute_s"] == pytest.approx(
        d["attention_s_per_pair_prefill"] * 2048 * 2049 / 2, rel=1e-12)


def test_llama_3_1_70b_nvfp4_on_b300():
    body, dep = deployment("llama_3_1_70b_nvfp4_b300")
    h, L, vocab = 8192, 80, 128256
    linear = L * (h * h + 2 * h * 1024 + h * h + 3 * h * 28672)
    weights = ceil(linear * NVFP4 + L * 7 * 4) + 2 * vocab * h * 2 + (L * 2 * h + h) * 2   # + FP32 per tensor
    assert dep.kv_pool.weight_bytes == weights and 42e9 < weights < 43e9
    act = activation(8192, h, 28672, 128, vocab)
    available = math.floor(dep.gpu.memory_bytes * 0.9) - weights - act - GIB
    assert dep.num_gpu_blocks == available // (16 * 2 * L * 8 * 128 * 1)
    cm = dep.cost_model_factory()
    d = cm.describe()
    assert d["compute_paths"]["attention"] == "fp4" and dep.gpu.flops("fp4") == 13.5e15
    assert d["linear_s_per_token"] == pytest.approx(2 * linear / (13.5e15 * cm.compute_efficiency), rel=1e-12)


@pytest.mark.parametrize("name", ["gpt_oss_120b_mxfp4_b200", "kimi_k2_5_int4_h200_tp8", "deepseek_v3_mla_h200",
                                  "llama_3_1_70b_nvfp4_b300"])
def test_scenario_runs(name):
    sc = load_scenario(name)
    body = sc.body(overrides={"workload": {"num_requests": 24}})
    m = metrics_of(run_body(body, sc.base_dir), body)
    assert m["completed"] == 24 and m["failed"] == 0


SILICON = ground_truth_dir() / "vllm-silicon-h100-b200" / "measurements.csv"


@pytest.mark.skipif(not SILICON.is_file(), reason="silicon measurements not present")
def test_every_aggregated_silicon_row_is_a_scenario_that_resolves():
    from twin.fitting.silicon import not_expressible, read_silicon, row_scenario, silicon_dir
    from twin.scenario import ScenarioBody
    rows = [r for r in read_silicon() if r.mode != "disagg"]
    assert len(rows) == 860
    layouts = set()
    for row in rows:
        assert not_expressible(row) is None, row.id
        dep = resolve_deployment(ScenarioBody.model_validate(row_scenario(row, silicon_dir(), max_requests=None)))
        assert dep.num_gpu_blocks > 1
        layouts.add((dep.layout.dp > 1, dep.layout.enable_expert_parallel, dep.weight_formats.routed_experts))
    assert {(True, True, "nvfp4"), (False, True, "fp8"), (False, False, "mxfp4"),
            (False, False, "int4-g32-sym")} <= layouts


@pytest.mark.skipif(not SILICON.is_file(), reason="silicon measurements not present")
def test_a_dp_ep_silicon_row_replays_for_the_fit():
    from twin.fitting.replay import replay
    from twin.fitting.silicon import silicon_cases
    from dataclasses import replace
    cases, _ = silicon_cases(max_requests=24)
    case = next(c for c in cases if c.target.data_parallel_size == 2)    # a dp-attn run: TP1 x DP2, EP
    assert case.target.enable_expert_parallel
    out = replay(replace(case.run, num_requests=24), case.target, {})
    assert out.metrics["completed"] > 0 and math.isfinite(out.metrics["mean_tpot_ms"])


@pytest.mark.skipif(not SILICON.is_file(), reason="silicon measurements not present")
def test_the_silicon_benchmark_counts_zero_rows_it_cannot_express():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "benchmarks/silicon_scenarios.py", "--every", "100000"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "cannot be expressed: 0" in out.stdout and "failed to resolve or run: 0" in out.stdout
    assert "860 aggregated" in out.stdout


def test_dp_ranks_share_the_load_like_vllms_front_end():
    sc = load_scenario("minimax_m2_5_fp8_b200_dp4_ep4")
    body = sc.body(overrides={"workload": {"num_requests": 96}})
    result = run_body(body, sc.base_dir)
    counts = [0] * 4
    for r in result.requests:
        counts[r.replica] += 1
    assert sum(counts) == 96 and max(counts) - min(counts) <= 3, counts
