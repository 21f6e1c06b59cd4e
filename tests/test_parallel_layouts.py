"""vLLM's parallel layouts: routed experts over tp x dp GPUs, the MoE dispatch/combine bytes with data
parallelism, the DP front end's load balancing, layout errors, and the scenario fields that state them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.hardware.catalog import resolve_gpu, resolve_model
from twin.hardware.kv_sizing import hybrid_kv_groups, kv_pool_breakdown
from twin.hardware.parallel import ParallelLayout
from twin.scenario import Scenario
from twin.sim.dp_router import DataParallelRouter, dp_load_score


def test_moe_collective_bytes():
    m = resolve_model("minimax-m2.5")
    assert ParallelLayout(4).moe_comm_bytes_per_token(m, 2) == 0.0                  # dp = 1: TP all-reduce only
    assert ParallelLayout(1, data_parallel_size=4).moe_comm_bytes_per_token(m, 2) == 2 * 3 * 3072 * 2
    deepep = ParallelLayout(2, data_parallel_size=4, enable_expert_parallel=True, all2all_backend="deepep")
    assert deepep.moe_comm_bytes_per_token(m, 2) == pytest.approx(2 * 8 * 3072 * 2 * 7 / 8 / 2)
    assert ParallelLayout(4, 2, 4).gpus == 32 and deepep.expert_parallel_size == 8


def test_layout_errors_name_the_field():
    with pytest.raises(TwinInputError, match="enable_expert_parallel: model llama-3.1-8b has no routed experts"):
        ParallelLayout(1, enable_expert_parallel=True).check(resolve_model("llama-3.1-8b"))
    with pytest.raises(TwinInputError, match="data_parallel_size = 0"):
        ParallelLayout(1, data_parallel_size=0)
    with pytest.raises(TwinInputError, match="all2all_backend = 'nccl'"):
        ParallelLayout(1, all2all_backend="nccl")


def test_experts_spread_over_dp_ranks_shrink_weights_and_grow_the_pool():
    tp4 = kv_pool_breakdown("minimax-m2.5", "B200", 4, 16, 0.9, "fp8", "fp8")
    dp4 = kv_pool_breakdown("minimax-m2.5", "B200", 1, 16, 0.9, "fp8", "fp8",
                            layout=ParallelLayout(1, data_parallel_size=4, enable_expert_parallel=True))
    # tp4 shards attention 4 ways; dp4 replicates attention and embeddings on every rank
    assert dp4.weight_bytes > tp4.weight_bytes
    # tp4 splits the 8 KV heads 4 ways; each dp4 rank holds all 8 heads of its own requests
    assert dp4.kv_bytes_per_token == 4 * tp4.kv_bytes_per_token


def test_dp_reads_experts_for_every_ranks_tokens_and_pays_the_collectives():
    m = resolve_model("minimax-m2.5")
    one = RooflineCostModel(m, "B200", 1, weight_dtype="fp8", layout=ParallelLayout(1, data_parallel_size=4))
    # a 2-token decode step on one rank routes 8 tokens through the shared experts
    assert one._moe_weights_s(2) == pytest.approx(
        m.weight_read_bytes("fp8", 1, 2, moe_shards=4, moe_tokens=8) / (8e12 * one.memory_efficiency))
    assert one.parameters()["layout"]["data_parallel_size"] == 4


def test_sliding_window_pool_follows_the_hybrid_allocator():
    m = resolve_model("gpt-oss-20b")
    assert hybrid_kv_groups(m) == (12, 1, 1)
    assert hybrid_kv_groups(resolve_model("llama-3.1-8b")) is None
    b = kv_pool_breakdown(m, "H100-SXM", 1, 16, 0.9, m.checkpoint_formats, "bf16", max_num_seqs=100)
    per_layer = 2 * 8 * 64 * 2
    assert b.kv_bytes_per_token == 12 * per_layer                  # the full-attention layers only
    assert b.vllm_num_blocks == b.available_kv_bytes // (16 * 12 * per_layer)
    assert b.num_gpu_blocks == b.vllm_num_blocks - 100 * 9 and b.sliding_window_reserved_blocks == 900


def test_sliding_window_caps_the_attention_work():
    from twin.core.scheduler_output import SchedulerOutput
    cm = RooflineCostModel("gpt-oss-20b", "H100-SXM")
    def step(context):
        return SchedulerOutput(0, num_new_tokens=[1], num_computed_before=[context], num_spec_tokens=[0])
    short, long, longer = step(100), step(10000), step(20000)
    def attention(step):
        e = cm.explain(step)
        return e["kv_read_s"] + e["attention_compute_s"]      # max(compute, read): read-bound here
    grow = attention(longer) - attention(long)
    at = cm._attention
    assert grow == pytest.approx(at.k_kv_full * 10000, rel=1e-9)   # the windowed half reads 128 tokens at most
    assert cm.step_time_s(short) < cm.step_time_s(long)
    # decode runs cost the same step by step as through the fast path
    assert cm.decode_step_times_s(3, 300, 4) == [cm.step_time_from_sums(3, 3, 300 + 3 * i, 0, 3, 0)
                                                 for i in range(4)]


def test_dp_router_scores_waiting_four_times_and_counts_requests_on_their_way():
    def rank(waiting, running, submitted=0):
        return SimpleNamespace(scheduler=SimpleNamespace(waiting=[0] * waiting), deferred=[],
                               num_outstanding=waiting + running, num_submitted=submitted)
    assert dp_load_score(rank(1, 0)) == 4 and dp_load_score(rank(0, 3)) == 3
    r = DataParallelRouter()
    ranks = [rank(0, 0), rank(0, 0)]
    assert [r.route(None, ranks) for _ in range(4)] == [0, 1, 0, 1]   # none submitted yet: spread, not piled


def _body(deployment: dict):
    return Scenario({"name": "x", "deployment": deployment, "workload": {
        "arrivals": {"process": "poisson", "rate_per_s": 1}, "duration_s": 5,
        "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": {"fixed": 10}},
                     "output_tokens": {"fixed": 5}}]}}).body()


def test_scenario_fields_validate_in_one_line():
    with pytest.raises(TwinInputError, match="deployment.weight_dtype.*'int3'"):
        _body({"weight_dtype": "int3"})
    with pytest.raises(TwinInputError, match="deployment.weight_formats.*experts: unknown layer group"):
        _body({"weight_formats": {"experts": "fp8"}})
    body = _body({"model": "gpt-oss-20b", "weight_dtype": "auto", "weight_formats": {"attention": "fp8"}})
    from twin.sim.deployment import resolve_layout, resolve_weight_formats
    f = resolve_weight_formats(body, resolve_model("gpt-oss-20b"))
    assert (f.attention, f.routed_experts) == ("fp8", "mxfp4")
    with pytest.raises(TwinInputError, match="enable_expert_parallel"):
        resolve_layout(_body({"enable_expert_parallel": True}), resolve_model("llama-3.1-8b"))


def test_sparse_indexer_bounds_attention_by_top_k():
    from twin.core.scheduler_output import SchedulerOutput
    v32, v3 = resolve_model("deepseek-v3.2"), resolve_model("deepseek-v3")
    # the indexer's fp8 key (128 values + one fp32 scale) joins the 576-value latent in every layer's KV
    assert v32.kv_bytes_per_token("bf16") == v3.kv_bytes_per_token("bf16") + 61 * (128 + 4)
    cm = RooflineCostModel(v32, "H200-SXM", 8, weight_dtype="fp8")
    at = cm._attention
    assert at.window == 2048 and at.k_attn_decode == 0.0 and at.k_index > 0

    def attn(context):
        e = cm.explain(SchedulerOutput(0, num_new_tokens=[1] * 8, num_computed_before=[context] * 8,
                                       num_spec_tokens=[0] * 8))
        return e["attention_compute_s"] + e["kv_read_s"]
    # past 2048 tokens only the indexer's scores and keys grow with the context
    grow = attn(60000) - attn(30000)
    assert grow == pytest.approx(max(at.k_index, at.k_kv_full) * 8 * 30000, rel=1e-9)
    assert grow < 0.2 * (RooflineCostModel(v3, "H200-SXM", 8, weight_dtype="fp8")._k_kv * 8 * 30000)
    b = kv_pool_breakdown(v32, "H200-SXM", 8, 64, 0.9, v32.checkpoint_formats, "bf16")
    assert b.kv_bytes_per_token == v32.kv_bytes_per_token("bf16", 8)


def test_moe_collectives_leave_nvlink_beyond_its_domain():
    from twin.cost.deployment_terms import moe_link_bytes_per_s
    wide = ParallelLayout(4, data_parallel_size=4, enable_expert_parallel=True)    # 16 GPUs
    assert moe_link_bytes_per_s(resolve_gpu("B200"), wide) == 50e9                 # two HGX boards: the NICs
    assert moe_link_bytes_per_s(resolve_gpu("GB200"), wide) == 900e9               # one NVL72 domain
    assert moe_link_bytes_per_s(resolve_gpu("B200"), ParallelLayout(2, data_parallel_size=4)) == 900e9
    b200 = RooflineCostModel("minimax-m2.5", "B200", 4, weight_dtype="fp8", layout=wide)
    gb200 = RooflineCostModel("minimax-m2.5", "GB200", 4, weight_dtype="fp8", layout=wide)
    assert b200._k_a2a == pytest.approx(18 * gb200._k_a2a)
