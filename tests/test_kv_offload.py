"""KV offload tiers under the GPU prefix cache (twin.core.kv_offload): LRU store-on-compute, consecutive lookup
past the GPU hit, loads charged to the admitting step, hits only of what was stored, and the knobs' errors."""

from __future__ import annotations

import random

import pytest

from twin.core.kv_cache_manager import KVCacheManager
from twin.core.kv_offload import OffloadingKVCacheManager, OffloadTier, OffloadTiers
from twin.errors import TwinInputError
from twin.scenario import Scenario, ScenarioBody
from twin.sim.deployment import resolve_deployment
from twin.sim.run import run_body

from tests.core_helpers import make_sched, req, step


def test_a_tier_is_an_lru_that_drops_a_store_larger_than_itself():
    tier = OffloadTier(3, 0.5)
    assert tier.store([1, 2, 3]) == []
    assert tier.store([2, 4]) == [1]             # 2 is held already; 4 evicts the least recently used
    assert list(tier.blocks) == [2, 3, 4]
    tiers = OffloadTiers(((3, 0.5),))
    tiers.tiers[0] = tier
    assert tiers.lookup([2, 3, 9, 4], 0, 4) == [0, 0]   # consecutive: stops at 9
    assert list(tier.blocks) == [4, 2, 3]               # the hits are the most recently used now
    assert tier.store([10, 11, 12, 13]) == []           # more than the tier holds: dropped whole
    assert tier.num_dropped_stores == 1 and list(tier.blocks) == [4, 2, 3]
    assert (tier.num_stored_blocks, tier.num_evicted_blocks) == (4, 1)


def test_host_evictions_move_down_to_the_lower_tier():
    tiers = OffloadTiers(((2, 0.1), (4, 1.0)))
    tiers.store([1, 2])
    tiers.store([3, 4])
    assert list(tiers.tiers[0].blocks) == [3, 4] and list(tiers.tiers[1].blocks) == [1, 2]
    assert tiers.lookup([3, 1, 2, 7], 0, 4) == [0, 1, 1]


def _offload_sched(num_gpu_blocks: int = 6, tiers=((100, 0.25),), **kw):
    return make_sched(num_gpu_blocks=num_gpu_blocks, kv_offload_tiers=tiers, max_model_len=200, **kw)


def test_without_offloading_the_plain_manager_runs():
    assert type(make_sched().kv_cache_manager) is KVCacheManager
    assert type(_offload_sched().kv_cache_manager) is OffloadingKVCacheManager


@pytest.mark.parametrize("stats_at_admission", [False, True])
def test_an_evicted_prefix_is_loaded_from_the_host_tier_and_its_load_charged_once(stats_at_admission):
    sched = _offload_sched(prefix_cache_stats_at_admission=stats_at_admission)   # 5 usable GPU blocks of 16
    kv = sched.kv_cache_manager
    a = req("a", 64, 1, prefix=("doc", 64))         # 4 full blocks, stored on compute
    sched.add_request(a)
    step(sched)
    assert kv.offload.tiers[0].num_stored_blocks == 4
    sched.add_request(req("b", 70, 1))              # takes all 5 GPU blocks: a's cached blocks are evicted
    step(sched)
    assert kv.offload.tiers[0].num_stored_blocks == 8 and kv.take_load_s() == 0.0
    c = req("c", 70, 1, prefix=("doc", 64))        # a's prompt plus 6 tokens of its own
    sched.add_request(c)
    out, _ = step(sched)
    # the GPU holds none of it, the host all 4 blocks: only the 6 new tokens are computed
    assert kv.offload.tiers[0].num_loaded_blocks == 4
    assert c.num_cached_tokens == 64 and out.num_new_tokens == [6]
    assert kv.take_load_s() == 4 * 0.25             # 4 blocks at 0.25 s each, charged to this step ...
    assert kv.take_load_s() == 0.0                  # ... once
    # the GPU prefix cache counts its own hits only; the tier its loads
    assert kv.num_hit_tokens == 0 and kv.num_query_tokens == 64 + 70 + 70
    assert kv.offload_stats()[0]["hit_tokens"] == 64


def test_offload_hits_are_only_blocks_stored_and_still_held():
    """Seeded random traffic over shared prefixes on a small GPU pool: every block loaded from a tier was stored
    there before and not evicted since; hit tokens never exceed the tokens queried."""
    rng = random.Random(7)
    sched = _offload_sched(num_gpu_blocks=12, tiers=((20, 0.01), (30, 0.1)), max_num_batched_tokens=200)
    kv = sched.kv_cache_manager
    tiers = kv.offload.tiers
    resident: list[set] = [set(), set()]
    ever_stored: list[set] = [set(), set()]
    loads: list[tuple[int, int]] = []
    violations: list = []

    real_store = OffloadTier.store

    def spy_store(self, hashes):
        t = tiers.index(self)
        evicted = real_store(self, hashes)
        resident[t] = set(self.blocks)
        ever_stored[t] |= set(self.blocks)
        return evicted

    real_lookup = OffloadTiers.lookup

    def spy_lookup(self, hashes, start, end):
        found = real_lookup(self, hashes, start, end)
        for k, t in enumerate(found):
            h = hashes[start + k]
            loads.append((t, h))
            if h not in resident[t] or h not in ever_stored[t]:
                violations.append((t, h))
        return found

    OffloadTier.store, OffloadTiers.lookup = spy_store, spy_lookup
    try:
        for i in range(300):
            n = rng.randint(20, 90)
            doc = rng.randrange(12)
            sched.add_request(req(i, n, rng.randint(1, 4), prefix=(("doc", doc), min(n, 48))))
            for _ in range(rng.randint(0, 3)):
                if sched.has_unfinished_requests():
                    step(sched)
                    kv.take_load_s()
        while sched.has_unfinished_requests():
            step(sched)
    finally:
        OffloadTier.store, OffloadTiers.lookup = real_store, real_lookup
    assert loads, "the run never hit a tier: the test checks nothing"
    assert violations == []
    stats = kv.offload_stats()
    assert sum(s["hit_tokens"] for s in stats) + kv.num_hit_tokens <= kv.num_query_tokens
    assert all(s["loaded_blocks"] * 16 == s["hit_tokens"] for s in stats)


BODY = {"deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": 2}, "num_requests": 4,
                     "dataset": {"kind": "random", "input_len": 100, "output_len": 4}}}


def test_the_knobs_resolve_to_blocks_and_seconds_per_block():
    body = ScenarioBody.model_validate({**BODY, "server": {"kv_offloading_size": 64, "kv_offloading_bandwidth_gb_s": 50,
                                                          "kv_offloading_lower": {"size_gib": 1024, "bandwidth_gb_s": 5}}})
    dep = resolve_deployment(body)
    block_bytes = 16 * 131072              # 16 tokens x 128 KiB of llama-3.1-8b bf16 KV
    assert dep.kv_pool.kv_bytes_per_block == block_bytes
    assert dep.scheduler_config.kv_offload_tiers == ((64 * 2**30 // block_bytes, block_bytes / 50e9),
                                                     (1024 * 2**30 // block_bytes, block_bytes / 5e9))
    assert resolve_deployment(ScenarioBody.model_validate(BODY)).scheduler_config.kv_offload_tiers == ()


def test_offload_knob_errors_are_one_line():
    with pytest.raises(TwinInputError, match="kv_offloading_size: needs enable_prefix_caching"):
        resolve_deployment(ScenarioBody.model_validate(
            {**BODY, "server": {"kv_offloading_size": 8, "enable_prefix_caching": False}}))
    with pytest.raises(TwinInputError, match="kv_offloading_lower: a lower tier sits under the host tier"):
        resolve_deployment(ScenarioBody.model_validate(
            {**BODY, "server": {"kv_offloading_lower": {"size_gib": 8, "bandwidth_gb_s": 5}}}))
    with pytest.raises(TwinInputError, match="holds no whole block"):
        resolve_deployment(ScenarioBody.model_validate({**BODY, "server": {"kv_offloading_size": 1e-6}}))
    with pytest.raises(TwinInputError, match=r"server.kv_offloading_backend"):
        Scenario({**BODY, "server": {"kv_offloading_size": 8, "kv_offloading_backend": "disk"}}).body()


def test_the_bundled_scenario_shows_what_host_offloading_buys():
    from twin.scenario import load_scenario

    sc = load_scenario("kv_offload_agentic")
    out = {}
    for name in ("baseline", "offload-64gib", "offload-256gib"):
        body = sc.body(name)
        result = run_body(body, sc.base_dir)
        out[name] = (result.metrics(window=(body.warmup_s, None)), result.config.get("kv_offload"))
    base, small, big = out["baseline"], out["offload-64gib"], out["offload-256gib"]
    assert base[1] is None
    # 256 GiB holds the working set: the host tier adds far more hits than 64 GiB, which LRU churns through
    assert big[1]["tiers"][0]["hit_rate"] > 2 * small[1]["tiers"][0]["hit_rate"]
    assert big[1]["total_hit_rate"] > big[1]["gpu_hit_rate"] + 0.1
    assert big[0]["p99_ttft_ms"] < 0.5 * base[0]["p99_ttft_ms"]


def test_a_runs_tier_hit_rates_in_one_line():
    from twin.results.offload_text import tier_hit_line

    body = ScenarioBody.model_validate({**BODY, "server": {"kv_offloading_size": 8}})
    off = run_body(body).config["kv_offload"]
    assert off["tiers"][0]["tier"] == "host" and off["tiers"][0]["capacity_blocks"] == 8 * 2**30 // (16 * 131072)
    assert off["total_hit_rate"] == off["gpu_hit_rate"] + off["tiers"][0]["hit_rate"]
    line = tier_hit_line(off)
    assert line.startswith("GPU ") and ", host " in line and "; total " in line
