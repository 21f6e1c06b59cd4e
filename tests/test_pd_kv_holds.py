"""P/D block holds, vLLM's semantics: the prefill engine keeps a finished request's blocks until the decode
engine has read them (NixlConnector's ``delay_free_blocks``); the decode engine allocates the request's blocks
when it first schedules it, pulls the KV into them (WAITING_FOR_REMOTE_KVS) and schedules the request after the
load; a pool that cannot allocate keeps the request waiting and the transfer unstarted. Constant-cost setups,
exact figures."""

from __future__ import annotations

import pytest
import simpy

from twin.core.request import RequestStatus
from twin.deploy import pd_sim
from twin.deploy.run import run_body
from twin.results.records import FINISHED, REJECTED
from twin.scenario import ScenarioBody
from twin.sim.replica import Replica

from tests.core_helpers import block_ids, make_sched, req, step
from tests.test_pd_disaggregation import BW_GB_S, LAT_US, PER_TOKEN_S, STEP_S, pd_body

PREFILL_S = STEP_S + PER_TOKEN_S * 1000                        # one step computes a 1000-token prompt
TRANSFER_S = LAT_US * 1e-6 + 1000 * 131072 / (BW_GB_S * 1e9)   # 5.26 ms
FIRST_STEP_S = STEP_S + PER_TOKEN_S                             # the decode recomputes the last prompt token
BLOCKS = -(-1000 // 16)                                         # 63 blocks of 16 tokens hold the prompt


def with_pools(body: ScenarioBody, *, prefill_blocks: int | None = None, decode_blocks: int | None = None,
               link: dict | None = None) -> ScenarioBody:
    data = body.model_dump(exclude_none=True)
    for name, blocks in (("prefill", prefill_blocks), ("decode", decode_blocks)):
        if blocks is not None:
            data["disaggregation"][name]["server"] = {"num_gpu_blocks_override": blocks, "max_model_len": 1536}
    if link is not None:
        data["disaggregation"]["link"] = link
    return ScenarioBody.model_validate(data)


def observed(monkeypatch, body: ScenarioBody, times: list[float]):
    """Run ``body``; at each of ``times`` snapshot the engines (prefill engine 0, decode engine 1)."""
    engines: list[Replica] = []
    snaps: list[dict] = []

    def snapshot(rid) -> dict:
        p, d = engines[0].scheduler, engines[1].scheduler
        kv_p, kv_d = p.kv_cache_manager, d.kv_cache_manager
        return {"prefill_ids": kv_p.get_block_ids(rid),
                "prefill_free": kv_p.block_pool.free_block_queue.num_free_blocks,
                "decode_ids": kv_d.get_block_ids(rid), "decode_free": kv_d.block_pool.free_block_queue.num_free_blocks,
                "decode_loading": [r.status for r in d.loading], "decode_running": len(d.running)}

    class Env(simpy.Environment):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.process(self._observe())

        def _observe(self):
            for t in times:
                yield self.timeout(t - self.now)
                snaps.append(snapshot(rid))

    class Engine(Replica):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            engines.append(self)

    rid = run_body(body).requests[0].request_id        # the same seed: the same request id and arrival
    monkeypatch.setattr(pd_sim.simpy, "Environment", Env)
    monkeypatch.setattr(pd_sim, "Replica", Engine)
    result = run_body(body)
    return result, snaps, engines


def test_the_prefill_engine_holds_the_blocks_until_the_transfer_ends_then_frees_them_to_the_cache(monkeypatch):
    body = pd_body(prompt=1000, output=4)
    a = run_body(body).requests[0].arrival_s
    end_prefill, end_transfer = a + PREFILL_S, a + PREFILL_S + TRANSFER_S
    times = [end_prefill - 1e-4, end_prefill + 1e-4, end_transfer - 1e-7, end_transfer + 1e-7,
             end_transfer + FIRST_STEP_S / 2]
    result, snaps, engines = observed(monkeypatch, body, times)
    rec, = result.requests
    assert rec.first_token_s - a == pytest.approx(PREFILL_S + TRANSFER_S + FIRST_STEP_S, rel=1e-12)
    usable_p = engines[0].scheduler.kv_cache_manager.block_pool.num_usable_blocks
    usable_d = engines[1].scheduler.kv_cache_manager.block_pool.num_usable_blocks
    held = list(range(1, BLOCKS + 1))      # a fresh pool hands out ids 1.. (0 is the null block)
    during, after_step, before_end, after_end, decoding = snaps
    # while the prefill step runs, after it (the request finished, max_tokens = 1) and until the transfer's end:
    # the same blocks, allocated (not in the free queue)
    for snap in (during, after_step, before_end):
        assert snap["prefill_ids"] == held
        assert snap["prefill_free"] == usable_p - BLOCKS
    # the decode engine allocated its blocks for the prompt when it first scheduled the request, before the
    # transfer: they are taken from its pool while the KV arrives, nothing scheduled
    for snap in (after_step, before_end):
        assert len(snap["decode_ids"]) == BLOCKS
        assert snap["decode_free"] == usable_d - BLOCKS
        assert snap["decode_loading"] == [RequestStatus.WAITING_FOR_REMOTE_KVS]
        assert snap["decode_running"] == 0
    assert during["decode_ids"] == [] and during["decode_free"] == usable_d
    # at the transfer's end the prefill engine frees them: all free again, the 62 full blocks still cached
    for snap in (after_end, decoding):
        assert snap["prefill_ids"] == []
        assert snap["prefill_free"] == usable_p
    # the decode engine schedules the request at once: its first step runs in the same blocks
    assert decoding["decode_ids"] == after_step["decode_ids"] and decoding["decode_running"] == 1
    assert decoding["decode_loading"] == []
    kv = result.config["disaggregation"]["kv_transfer"]
    assert kv["mean_decode_alloc_wait_ms"] == 0.0 and kv["num_expired_holds"] == 0


def test_a_decode_pool_too_small_for_two_prompts_serialises_their_transfers():
    # 1000-token prompts, 4 output tokens: 63 blocks each at their longest; the decode pool holds 99
    body = pd_body(num_requests=2, rate=1000.0, prompt=1000, output=4)
    free_recs = sorted(run_body(body).requests, key=lambda r: r.arrival_s)
    small = sorted(run_body(with_pools(body, decode_blocks=100)).requests, key=lambda r: r.arrival_s)
    assert all(r.status == FINISHED for r in free_recs + small)
    # without room for both the second waits in the decode queue, its transfer unstarted, until the first
    # finishes and frees its blocks; then its transfer, then its first step
    first, second = small
    assert first.first_token_s == free_recs[0].first_token_s
    serialised_s = first.finish_s + TRANSFER_S + FIRST_STEP_S
    assert second.first_token_s == pytest.approx(serialised_s, rel=1e-12)
    # with room for both its KV moves while the first decodes
    assert free_recs[1].first_token_s < serialised_s


def test_prefill_holds_make_the_prefill_pool_wait_for_the_transfer():
    # a slow link (1 GB/s: 131 ms per prompt) and a prefill pool of 99 blocks: the second prompt cannot be
    # allocated while the first's blocks wait for their transfer
    link = {"kind": "infiniband", "bandwidth_gb_s": 1.0, "latency_us": LAT_US}
    transfer_s = LAT_US * 1e-6 + 1000 * 131072 / 1e9
    # (one output token: the decode engine is idle when the second's KV arrives)
    body = with_pools(pd_body(num_requests=2, rate=1000.0, prompt=1000, output=1), prefill_blocks=100, link=link)
    first, second = sorted(run_body(body).requests, key=lambda r: r.arrival_s)
    first_transfer_end = first.arrival_s + PREFILL_S + transfer_s
    assert second.arrival_s < first.arrival_s + PREFILL_S
    assert first.first_token_s == pytest.approx(first_transfer_end + FIRST_STEP_S, rel=1e-12)
    # the second prefill starts when the first transfer ends and frees the blocks
    assert second.first_token_s == pytest.approx(first_transfer_end + PREFILL_S + transfer_s + FIRST_STEP_S,
                                                 rel=1e-12)
    # a pool with room for both runs the second prefill right after the first: its transfer then only waits
    # for the link, the prefill is hidden
    roomy = sorted(run_body(with_pools(body, prefill_blocks=1000)).requests, key=lambda r: r.arrival_s)
    assert roomy[1].first_token_s == pytest.approx(first_transfer_end + transfer_s + FIRST_STEP_S, rel=1e-12)


def test_the_producer_frees_at_its_abort_timeout_when_the_decode_has_not_read():
    # the decode pool holds one prompt at a time and the first request decodes for longer than the timeout
    data = pd_body(num_requests=2, rate=1000.0, prompt=1000, output=40).model_dump(exclude_none=True)
    data["disaggregation"]["decode"]["server"] = {"num_gpu_blocks_override": 100, "max_model_len": 1536}
    data["disaggregation"]["abort_request_timeout_s"] = 0.1
    result = run_body(ScenarioBody.model_validate(data))
    dis = result.config["disaggregation"]
    assert dis["abort_request_timeout_s"] == 0.1
    assert dis["kv_transfer"]["num_expired_holds"] == 1          # the second's, released before it was read
    assert dis["kv_transfer"]["num_transfers"] == 2              # the decode engine still reads it (not modelled)
    assert all(r.status == FINISHED for r in result.requests)


def test_scheduler_allocates_for_a_remote_load_without_budget_then_schedules_the_last_token():
    sched = make_sched(max_model_len=200, max_num_batched_tokens=100)
    started = []
    sched.on_load_start = started.append
    remote = req("r", 40, 3)
    remote.load_kv_async = True
    local = req("l", 100, 3)
    sched.add_request(remote)
    sched.add_request(local)
    assert sched.num_load_pending == 1
    out, _ = step(sched)
    # the remote request: 3 blocks for its 40 prompt tokens, nothing scheduled, no budget used: the local
    # request behind it gets the whole budget of 100
    assert out.requests == [local] and out.num_new_tokens == [100]
    assert started == [remote] and list(sched.loading) == [remote]
    assert remote.status == RequestStatus.WAITING_FOR_REMOTE_KVS and remote.num_computed_tokens == 0
    assert len(block_ids(sched, "r")) == 3 and sched.num_load_pending == 0
    out, _ = step(sched)                  # the load has not finished: the request is not scheduled
    assert remote not in out.requests
    sched.finish_remote_load(remote)
    assert remote.num_computed_tokens == 39 and remote.status == RequestStatus.WAITING
    out, _ = step(sched)
    i = out.requests.index(remote)
    assert out.num_new_tokens[i] == 1 and out.num_computed_before[i] == 39
    assert len(block_ids(sched, "r")) == 3 and remote.num_output_tokens == 1
    assert started == [remote]            # one pull per request


def test_scheduler_keeps_a_remote_load_waiting_when_its_blocks_do_not_fit():
    sched = make_sched(max_model_len=200, max_num_batched_tokens=200, num_gpu_blocks=11)   # 10 usable blocks
    started = []
    sched.on_load_start = started.append
    big = req("big", 120, 3)               # 8 blocks, running
    sched.add_request(big)
    step(sched)
    remote = req("r", 40, 3)               # 3 blocks: 2 free
    remote.load_kv_async = True
    sched.add_request(remote)
    out, _ = step(sched)
    assert started == [] and sched.num_load_pending == 1 and list(sched.waiting) == [remote]
    assert block_ids(sched, "r") == [] and remote.status == RequestStatus.WAITING
    while big.status == RequestStatus.RUNNING:
        step(sched)
    step(sched)                            # the pool is free: the pull starts
    assert started == [remote] and len(block_ids(sched, "r")) == 3


@pytest.mark.parametrize("decode_blocks", [None, 100])
def test_the_decode_fast_path_gives_the_step_by_step_paths_run(monkeypatch, decode_blocks):
    # the fast path starts a pull only on the SimPy clock: the same run as every step through schedule()
    body = with_pools(pd_body(1, 1, num_requests=120, rate=30.0, prompt=700, output=30), decode_blocks=decode_blocks)
    fast = run_body(body)

    class StepByStep(Replica):
        def __init__(self, *args, **kwargs) -> None:
            kwargs["fast_path"] = False
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(pd_sim, "Replica", StepByStep)
    slow = run_body(body)
    key = lambda r: (r.request_id, r.status, r.first_token_s, r.finish_s, r.num_output_tokens)  # noqa: E731
    assert [key(r) for r in fast.requests] == [key(r) for r in slow.requests]
    assert all(r.status == FINISHED for r in fast.requests)
    assert fast.config["disaggregation"]["kv_transfer"] == slow.config["disaggregation"]["kv_transfer"]


def test_a_request_the_decode_engine_refuses_frees_the_prefill_hold_at_once(monkeypatch):
    data = pd_body(prompt=1000, output=4).model_dump(exclude_none=True)
    data["disaggregation"]["decode"]["server"] = {"max_model_len": 512}
    body = ScenarioBody.model_validate(data)
    a = run_body(body).requests[0].arrival_s
    result, snaps, engines = observed(monkeypatch, body, [a + PREFILL_S / 2])
    rec, = result.requests
    assert rec.status == REJECTED and "max_model_len" in rec.reject_reason
    # held while the prefill ran; at the run's end (the rejection, at the prefill's end) freed, not held for the
    # abort timeout
    kv_p = engines[0].scheduler.kv_cache_manager
    assert len(snaps[0]["prefill_ids"]) == BLOCKS and kv_p.get_block_ids(rec.request_id) == []
    assert kv_p.block_pool.free_block_queue.num_free_blocks == kv_p.block_pool.num_usable_blocks
    assert result.sim_end_s == pytest.approx(a + PREFILL_S, rel=1e-12)
    assert result.config["disaggregation"]["kv_transfer"]["num_transfers"] == 0
