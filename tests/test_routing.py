"""Routers and clusters: prefix affinity beats round robin on a multi-tenant prefix workload, the load guard
holds, the hash ring is stable and process-independent, mixed GPU groups run, per-replica metrics add up."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from twin.sim.run import metrics_of, run_body
from twin.sim.cluster import ReplicaGroup, load_imbalance, per_replica_metrics, run_cluster
from twin.errors import TwinInputError
from twin.core.request import Request
from twin.sim.routing import (
    ROUTERS,
    LeastKvUsageRouter,
    LeastOutstandingRouter,
    PrefixAffinityRouter,
    RoundRobinRouter,
    make_router,
    prefix_key,
    stable_digest,
)
from twin.scenario import Scenario


def multi_tenant(router: str, **deployment) -> dict:
    """8 tenants, each with a 2000-token system prompt, on 4 replicas whose KV pools hold ~3 prefixes."""
    return {
        "name": "multi-tenant",
        "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b", "replicas": 4, "router": router, **deployment},
        "server": {"num_gpu_blocks_override": 600, "max_model_len": 4096},
        "cost_model": {"kind": "constant", "params": {"step_s": 0.005, "per_token_s": 0.00002}},
        "workload": {
            "arrivals": {"process": "poisson", "rate_per_s": 40}, "num_requests": 600,
            "classes": [{"name": "tenant", "share": 1.0,
                         "prompt": {"shared_prefix_tokens": 2000, "num_prefix_groups": 8,
                                    "suffix_tokens": {"uniform": [50, 150]}},
                         "output_tokens": {"uniform": [10, 30]}}],
        },
        "slo": {"ttft_ms": {"p99": 2000}},
    }


def run(router: str):
    body = Scenario(multi_tenant(router)).body()
    result = run_body(body)
    return result, metrics_of(result, body)


@pytest.fixture(scope="module")
def runs():
    return {name: run(name) for name in ("round_robin", "prefix_affinity", "kv_cache_aware")}


def test_prefix_affinity_raises_the_hit_rate_over_round_robin(runs):
    rr = runs["round_robin"][1]["prefix_cache_hit_rate"]
    pa = runs["prefix_affinity"][1]["prefix_cache_hit_rate"]
    aware = runs["kv_cache_aware"][1]["prefix_cache_hit_rate"]
    assert pa > rr + 0.2, (rr, pa)
    assert aware > rr + 0.2, (rr, aware)
    # hits are prefill work not done: the mean TTFT drops too
    assert runs["prefix_affinity"][1]["mean_ttft_ms"] < runs["round_robin"][1]["mean_ttft_ms"]


def test_prefix_affinity_keeps_the_load_balanced(runs):
    result, _ = runs["prefix_affinity"]
    rows = per_replica_metrics(result)
    assert all(r["num_requests"] > 0 for r in rows)
    assert load_imbalance(rows) < 1.4


def test_records_carry_replica_and_per_replica_metrics_add_up(runs):
    result, metrics = runs["round_robin"]
    assert {r.replica for r in result.requests} == {0, 1, 2, 3}
    rows = per_replica_metrics(result, slo={"ttft_ms": {"p99": 2000}})
    assert [r["replica"] for r in rows] == [0, 1, 2, 3]
    assert [r["num_requests"] for r in rows] == [150] * 4  # round robin: exactly even
    assert sum(r["completed"] for r in rows) == metrics["completed"]
    assert sum(r["num_good_requests"] for r in rows) == metrics["num_good_requests"]
    assert all(r["gpu"] == "H100-SXM" for r in rows)
    assert all(0 < r["busy_fraction"] <= 1 for r in rows)


def test_every_router_runs_and_is_deterministic():
    for name in ROUTERS:
        body = Scenario(multi_tenant(name)).body()
        a, b = metrics_of(run_body(body), body), metrics_of(run_body(body), body)
        assert a == b, name
        assert a["completed"] == 600


# ---- the routers on stub replicas --------------------------------------------------------------------------
def stub(outstanding: int = 0):
    return SimpleNamespace(num_outstanding=outstanding)


def request(i: int, prefix: str = "shared") -> Request:
    return Request(i, 0.0, 300, 10, prompt_segments=[(("sys", prefix), 256), (("u", i), 44)])


def test_load_guard_bounds_the_busiest_replica():
    router = PrefixAffinityRouter(load_factor=1.25)
    replicas = [stub() for _ in range(4)]
    for i in range(200):  # one hot prefix, nobody finishes
        k = router.route(request(i), replicas)
        replicas[k].num_outstanding += 1
        total = sum(r.num_outstanding for r in replicas)
        assert max(r.num_outstanding for r in replicas) <= -(-1.25 * total // 4) + 1
    assert router.num_spilled > 0
    assert min(r.num_outstanding for r in replicas) > 0


def test_same_prefix_same_replica_when_load_allows():
    router = PrefixAffinityRouter()
    replicas = [stub() for _ in range(8)]
    homes = {router.route(request(i, "tenant-a"), replicas) for i in range(20)}
    assert len(homes) == 1
    assert prefix_key(request(1, "t"), 256) == prefix_key(request(2, "t"), 256)
    assert prefix_key(request(1, "t"), 300) != prefix_key(request(2, "t"), 300)


def test_consistent_hashing_moves_few_prefixes_when_a_replica_is_added():
    r4, r5 = PrefixAffinityRouter(), PrefixAffinityRouter()
    moved = 0
    for i in range(1000):
        req = request(i, f"tenant-{i}")
        moved += r4.home(req, 4)[0] != r5.home(req, 5)[0]
    assert 0.1 < moved / 1000 < 0.35  # ideal: 1/5


def test_routing_is_the_same_in_another_process():
    code = ("from twin.sim.routing import PrefixAffinityRouter; from tests.test_routing import request, stub;"
            "r = PrefixAffinityRouter(); reps = [stub() for _ in range(5)];"
            "print([r.route(request(i, f't{i % 7}'), reps) for i in range(30)])")
    here = PrefixAffinityRouter()
    reps = [stub() for _ in range(5)]
    expected = [here.route(request(i, f"t{i % 7}"), reps) for i in range(30)]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "12345", "PATH": ""}, cwd=str(__import__("pathlib").Path(__file__).parent.parent))
    assert out.stdout.strip() == str(expected)
    assert stable_digest(("a", 1)) == stable_digest(("a", 1))


def test_weighted_round_robin_and_least_outstanding():
    rr = RoundRobinRouter(weights=[2, 1])
    picks = [rr.route(None, [stub(), stub()]) for _ in range(9)]
    assert picks.count(0) == 6 and picks.count(1) == 3
    assert picks[:3] == [0, 1, 0]
    assert [RoundRobinRouter().route(None, [stub()] * 3) for _ in range(1)] == [0]
    lo = LeastOutstandingRouter(weights=[2, 1])
    assert lo.route(None, [stub(3), stub(2)]) == 0  # 1.5 per unit of weight against 2
    assert LeastOutstandingRouter().route(None, [stub(3), stub(2)]) == 1


def test_least_kv_usage_counts_the_waiting_queue():
    def replica(used_blocks: int, waiting_tokens: list[int]):
        pool = SimpleNamespace(num_usable_blocks=100, get_num_free_blocks=lambda: 100 - used_blocks)
        kv = SimpleNamespace(block_pool=pool, block_size=16)
        waiting = [SimpleNamespace(num_prompt_tokens=n, num_output_tokens=0, num_computed_tokens=0)
                   for n in waiting_tokens]
        return SimpleNamespace(num_outstanding=len(waiting), scheduler=SimpleNamespace(kv_cache_manager=kv,
                                                                                        waiting=waiting))

    router = LeastKvUsageRouter()
    assert router.route(None, [replica(50, []), replica(10, [])]) == 1
    assert router.route(None, [replica(50, []), replica(10, [1600])]) == 0  # 10 + 100 blocks queued


def test_make_router_errors_name_the_problem():
    with pytest.raises(TwinInputError, match="allowed: round_robin"):
        make_router("random")
    with pytest.raises(TwinInputError, match="unknown parameter 'foo'"):
        make_router("prefix_affinity", foo=1)
    with pytest.raises(TwinInputError, match="load_factor"):
        make_router("prefix_affinity", load_factor=0.5)
    assert isinstance(make_router("least_kv_usage", weights=[1, 2]), LeastKvUsageRouter)
    with pytest.raises(TwinInputError, match="router"):
        Scenario(multi_tenant("nope")).body()


# ---- mixed clusters ----------------------------------------------------------------------------------------
def test_mixed_gpu_groups_run_behind_one_router():
    data = multi_tenant("least_outstanding")
    data["cost_model"] = {"kind": "roofline"}
    data["server"] = {"max_model_len": 4096}
    data["workload"]["num_requests"] = 150
    body = Scenario(data).body()
    groups = [ReplicaGroup(name="fast", gpu="H100-SXM", replicas=2),
              {"name": "slow", "gpu": "A100-SXM-80GB", "replicas": 1, "server": {"max_num_seqs": 8}}]
    result = run_cluster(body, groups)
    assert result.num_replicas == 3
    summary = result.config["replica_groups"]
    assert [g["replicas"] for g in summary] == [[0, 1], [2]]
    assert summary[1]["server"]["max_num_seqs"] == 8
    rows = per_replica_metrics(result)
    assert [r["gpu"] for r in rows] == ["H100-SXM", "H100-SXM", "A100-SXM-80GB"]
    assert [r["group"] for r in rows] == ["fast", "fast", "slow"]
    assert sum(r["num_requests"] for r in rows) == 150
    # the slower replica finishes fewer requests per second, so least-outstanding sends it fewer
    assert rows[2]["num_requests"] < rows[0]["num_requests"]
    again = run_cluster(body, groups)
    assert [r.replica for r in again.requests] == [r.replica for r in result.requests]


def test_group_errors_are_one_line():
    body = Scenario(multi_tenant("round_robin")).body()
    with pytest.raises(TwinInputError, match=r"groups\[0\]"):
        run_cluster(body, [{"gpu": "H100-SXM", "replicas": 0}])
    with pytest.raises(TwinInputError, match="unknown GPU"):
        run_cluster(body, [{"gpu": "H100-SXM"}, {"gpu": "Z80"}])
