"""Traffic as benchmark clients send it: a concurrency cap on an open loop, client timeouts (vLLM's abort),
``max_tokens`` apart from the model's own length (``ignore_eos``, ``min_tokens``), ramp-up arrivals."""

from __future__ import annotations

import numpy as np
import pytest

from core_helpers import block_ids, free_ids, make_sched, req
from twin.core.request import RequestStatus
from twin.cost.constant import ConstantCostModel
from twin.core.scheduler_config import SchedulerConfig
from twin.core.schedulers import make_scheduler
from twin.errors import TwinInputError
from twin.results.records import ABORTED, FINISHED
from twin.sim.simulate import simulate
from twin.workload.capped_open_loop import CappedOpenLoop
from twin.workload.config import load_workload_config
from twin.workload.generate import build_workload
from twin.workload.spec import RequestSpec

CHAT = {"name": "chat", "share": 1.0, "prompt": {"suffix_tokens": {"uniform": [20, 120]}},
        "output_tokens": {"uniform": [5, 60]}}


def _sim(traffic, *, num_blocks=200, step_s=0.01, **cfg):
    config = dict(max_num_seqs=64, max_num_batched_tokens=512, max_model_len=512, block_size=16,
                  enable_prefix_caching=False)
    config.update(cfg)
    sc = SchedulerConfig(**config)
    return simulate(traffic, lambda i: make_scheduler(sc, num_blocks), lambda i: ConstantCostModel(step_s))


def _max_in_flight(records) -> int:
    events = sorted([(r.arrival_s, 1) for r in records] + [(r.finish_s, -1) for r in records])
    level = peak = 0
    for _, d in events:  # at equal times the -1 (a finish) sorts first: the freed slot is reused at once
        level += d
        peak = max(peak, level)
    return peak


# ---- open loop with a concurrency cap -------------------------------------------------------------------
def test_capped_open_loop_never_exceeds_the_cap():
    wl = {"arrivals": {"process": "poisson", "rate_per_s": 400, "max_concurrency": 6}, "num_requests": 120,
          "classes": [CHAT]}
    traffic = build_workload(wl, seed=1)
    assert isinstance(traffic, CappedOpenLoop) and traffic.concurrency == 6
    res = _sim(traffic)
    assert all(r.status == FINISHED for r in res.requests) and len(res.requests) == 120
    assert _max_in_flight(res.requests) == 6  # at the cap (the offered rate is far above what 6 slots serve)
    # a due request is sent when a slot frees: its clock starts then, never before its due time
    due = {s.request_id: s.arrival_s for s in build_workload({**wl, "arrivals": {
        "process": "poisson", "rate_per_s": 400}}, seed=1)}
    assert all(r.arrival_s >= due[r.request_id] for r in res.requests)
    assert sum(r.arrival_s > due[r.request_id] for r in res.requests) > 60


def test_bench_header_describes_the_load_as_vllm_bench_serve_does():
    def header(arrivals):
        return load_workload_config({"arrivals": arrivals, "num_requests": 5, "classes": [CHAT]}).bench_header()

    assert header({"process": "gamma", "rate_per_s": 4, "burstiness": 0.5, "max_concurrency": 8}) == {
        "request_rate": 4, "burstiness": pytest.approx(0.5), "max_concurrency": 8}
    assert header({"process": "poisson", "rate_per_s": 4}) == {"request_rate": 4, "burstiness": 1.0,
                                                               "max_concurrency": None}
    assert header({"process": "closed_loop", "concurrency": 3}) == {"request_rate": float("inf"),
                                                                     "max_concurrency": 3}
    assert header({"process": "ramp_up", "strategy": "linear", "start_rps": 1, "end_rps": 2}) == {}


def test_capped_open_loop_at_infinite_rate_is_a_closed_loop():
    capped = {"arrivals": {"process": "poisson", "rate_per_s": float("inf"), "max_concurrency": 5},
              "num_requests": 40, "classes": [CHAT]}
    closed = {"arrivals": {"process": "closed_loop", "concurrency": 5}, "num_requests": 40, "classes": [CHAT]}
    a, b = _sim(build_workload(capped, seed=2)), _sim(build_workload(closed, seed=2))
    key = lambda r: (r.request_id, r.arrival_s, r.first_token_s, r.finish_s, r.num_prompt_tokens,
                     r.num_output_tokens, list(r.emit_times_s))
    assert [key(r) for r in a.requests] == [key(r) for r in b.requests]
    assert _max_in_flight(a.requests) == 5


# ---- client timeouts: vLLM's abort ----------------------------------------------------------------------
def test_finish_requests_aborts_running_and_waiting_and_frees_their_blocks():
    s = make_sched(enable_prefix_caching=False, max_num_batched_tokens=80)
    a, b, c = req("a", 40), req("b", 40), req("c", 40)
    for r in (a, b, c):
        s.add_request(r)
    out = s.schedule()          # budget 80: a and b admitted (3 blocks each), c waits
    assert [r.request_id for r in out.requests] == ["a", "b"]
    held_b = block_ids(s, "b")
    s.finish_requests([a, c])   # a aborted mid-step, c while waiting
    assert a.status == c.status == RequestStatus.FINISHED_ABORTED
    assert s.running == [b] and not s.waiting and s.num_aborted == 2
    assert sorted(free_ids(s)) == sorted(set(range(1, 11)) - set(held_b))
    res = s.update_from_output(out)   # the step that was running: a is skipped, b emits its first token
    assert res.num_emitted == [0, 1] and res.finished == []
    s.finish_requests([a])      # already finished: nothing happens
    assert s.num_aborted == 2


def test_timeouts_free_kv_and_count_as_failed():
    # one sequence at a time, 10 ms steps: request 0 (64 + 200 tokens) holds the server; its client gives up
    # at 0.505 s, mid-step. It emitted 50 tokens (at 0.01 .. 0.50); the step in flight emits nothing for it.
    # Its blocks are freed, request 1 is admitted at the step after (0.51) and has its first token at 0.52.
    specs = [RequestSpec(0, 0.0, 64, 200, ((("u", 0), 64),), timeout_s=0.505),
             RequestSpec(1, 0.0, 64, 10, ((("u", 1), 64),))]
    res = _sim(specs, num_blocks=18, max_num_seqs=1, step_s=0.01)
    r0, r1 = res.requests
    assert r0.status == ABORTED and r0.finish_s == pytest.approx(0.505)
    assert r0.num_output_tokens == 50 and len(r0.emit_times_s) == 50
    assert r1.status == FINISHED and r1.first_token_s == pytest.approx(0.52)
    start, usage = res.steps.column("start_s"), res.steps.column("kv_usage")
    assert usage[start < 0.5].max() == pytest.approx(8 / 17)     # request 0: 64 + 50 tokens in 8 blocks
    assert usage[start > 0.505].max() == pytest.approx(5 / 17)   # request 1 alone: 64 + 10 tokens
    m = res.metrics()
    assert m["completed"] == 1 and m["failed"] == 1 and m["num_aborted"] == 1 and m["num_rejected"] == 0
    assert m["total_output_tokens"] == 10
    assert res.requests_frame()["status"].tolist() == ["aborted", "finished"]


def test_timeout_in_config_and_per_class():
    wl = {"arrivals": {"process": "poisson", "rate_per_s": 5}, "num_requests": 6, "timeout_s": 30,
          "classes": [{**CHAT, "name": "a", "share": 0.5},
                      {**CHAT, "name": "b", "share": 0.5, "timeout_s": 2.5}]}
    specs = build_workload(wl, seed=0)
    assert {(s.task_class, s.timeout_s) for s in specs} == {("a", 30), ("b", 2.5)}
    with pytest.raises(TwinInputError, match=r"^workload.timeout_s: must be > 0 \(got -1\)$"):
        load_workload_config({**wl, "timeout_s": -1})


# ---- max_tokens apart from the model's own length ---------------------------------------------------------
def test_ignore_eos_runs_every_request_to_max_tokens():
    wl = {"arrivals": {"process": "poisson", "rate_per_s": 50}, "num_requests": 60,
          "classes": [{"name": "bench", "share": 1.0, "prompt": {"suffix_tokens": 32},
                       "max_tokens": {"uniform": [3, 90]}, "ignore_eos": True}]}
    specs = build_workload(wl, seed=4)
    res = _sim(specs)
    caps = {s.request_id: s.max_tokens for s in specs}
    assert len(set(caps.values())) > 20
    assert all(r.status == FINISHED and r.num_output_tokens == caps[r.request_id] for r in res.requests)


def test_max_tokens_caps_and_min_tokens_lifts_the_models_length():
    cls = {"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 16}, "output_tokens": {"uniform": [1, 100]},
           "max_tokens": 50, "min_tokens": 10}
    wl = {"arrivals": {"process": "poisson", "rate_per_s": 50}, "num_requests": 80, "classes": [cls]}
    specs = build_workload(wl, seed=5)
    res = _sim(specs)
    natural = {s.request_id: s.output_tokens for s in specs}   # after min_tokens
    out = {r.request_id: r.num_output_tokens for r in res.requests}
    assert all(out[i] == min(max(n, 10), 50) for i, n in natural.items())
    assert {min(out.values()), max(out.values())} == {10, 50}
    with pytest.raises(TwinInputError, match=r"min_tokens: must be <= max_tokens"):
        load_workload_config({**wl, "classes": [{**cls, "min_tokens": 60}]})
    with pytest.raises(TwinInputError, match=r"^workload.classes\[0\].max_tokens: is required with ignore_eos"):
        load_workload_config({**wl, "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 16},
                                                 "ignore_eos": True}]})


def test_static_batching_reserves_by_max_tokens_not_the_true_length():
    s = make_sched("static", static_batch_size=2, static_reserve_max_length=True, max_model_len=200,
                   num_gpu_blocks=20)
    short = req("short", 16, 4, max_tokens=64)      # will stop after 4 tokens, but may run to 64
    s.add_request(short)
    s.schedule()
    assert len(block_ids(s, "short")) == (16 + 64) // 16


# ---- ramp-up ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", ["linear", "exponential"])
def test_ramp_up_gaps_follow_the_rate_by_request_index(strategy):
    n, start, end = 50, 2.0, 20.0
    wl = {"arrivals": {"process": "ramp_up", "strategy": strategy, "start_rps": start, "end_rps": end,
                       "burstiness": 1e9}, "num_requests": n, "classes": [CHAT]}
    t = np.array([s.arrival_s for s in build_workload(wl, seed=0)])
    k = np.arange(1, n) / (n - 1)
    rate = start + (end - start) * k if strategy == "linear" else start * (end / start) ** k
    assert t[0] == 0.0
    np.testing.assert_allclose(np.diff(t), 1 / rate, rtol=1e-3)   # burstiness 1e9: gaps all but constant


def test_ramp_up_with_poisson_gaps_averages_to_the_rate():
    n = 4000
    wl = {"arrivals": {"process": "ramp_up", "strategy": "linear", "start_rps": 10, "end_rps": 10},
          "num_requests": n, "classes": [CHAT]}
    t = np.array([s.arrival_s for s in build_workload(wl, seed=7)])
    gaps = np.diff(t)
    # exponential gaps of mean 0.1 s: the mean of 3999 is within 5% (> 3 standard errors) of 0.1
    assert abs(gaps.mean() - 0.1) < 0.005 and abs(gaps.std() / gaps.mean() - 1) < 0.06


def test_ramp_up_needs_num_requests():
    with pytest.raises(TwinInputError, match=r"^workload.num_requests: is required by a ramp_up"):
        load_workload_config({"arrivals": {"process": "ramp_up", "strategy": "linear", "start_rps": 1,
                                           "end_rps": 5}, "duration_s": 10, "classes": [CHAT]})


def test_the_real_serving_loop_aborts_at_the_client_timeout_too():
    """calibration.serve (the engine's real-time loop) aborts at the first step boundary past the timeout."""
    from types import SimpleNamespace

    from calibration.serve import serve

    clock = [0.0]

    class Runner:  # a stand-in engine: each step takes 10 ms and samples one token per caught-up request
        def execute(self, out, kv_cache_manager=None):
            clock[0] += 0.01
            return SimpleNamespace(sampled_token_ids=[
                [7] if r.num_computed_tokens >= r.num_prompt_tokens + r.num_output_tokens else []
                for r in out.requests])

    def sleep(dt):
        clock[0] += dt

    sched = make_scheduler(SchedulerConfig(max_num_seqs=1, max_num_batched_tokens=64, max_model_len=512,
                                           block_size=16, enable_prefix_caching=False), 18)
    specs = [RequestSpec(0, 0.0, 64, 200, ((("u", 0), 64),), timeout_s=0.505),
             RequestSpec(1, 0.0, 64, 10, ((("u", 1), 64),))]
    res = serve(specs, sched, Runner(), clock=lambda: clock[0], sleep=sleep)
    r0, r1 = res.requests
    assert r0.status == ABORTED and r0.finish_s == pytest.approx(0.51) and r0.num_output_tokens == 51
    assert r1.status == FINISHED and r1.num_output_tokens == 10
    assert sched.num_aborted == 1 and sched.kv_cache_manager.usage == 0.0


def test_abort_while_waiting_or_on_the_request_path():
    # one sequence at a time, 0.3 s of request path: request 1 reaches the scheduler at 0.3 s, waits behind
    # request 0 and gives up at 0.35 s, never admitted; request 2 is still on the request path when its client
    # gives up at 0.1 s
    class SlowFrontEnd(ConstantCostModel):
        request_path_s = 0.3

    sc = SchedulerConfig(max_num_seqs=1, max_num_batched_tokens=64, max_model_len=512, block_size=16,
                         enable_prefix_caching=False)
    specs = [RequestSpec(0, 0.0, 64, 60, ((("u", 0), 64),)),
             RequestSpec(1, 0.0, 64, 10, ((("u", 1), 64),), timeout_s=0.35),
             RequestSpec(2, 0.0, 64, 10, ((("u", 2), 64),), timeout_s=0.1)]
    sched = make_scheduler(sc, 18)
    res = simulate(specs, lambda i: sched, lambda i: SlowFrontEnd(0.01))
    r0, r1, r2 = res.requests
    assert sched.num_aborted == 1      # request 1 left the waiting queue; request 2 never reached the server
    assert r0.status == FINISHED and r0.first_token_s == pytest.approx(0.31)
    assert (r1.status, r1.num_output_tokens, r1.num_cached_tokens) == (ABORTED, 0, -1)
    assert r1.finish_s == pytest.approx(0.35)
    assert (r2.status, r2.finish_s, r2.num_cached_tokens) == (ABORTED, pytest.approx(0.1), -1)
    assert res.sim_end_s == pytest.approx(0.31 + 59 * 0.01)
    m = res.metrics(window=(0.0, None))
    assert m["failed"] == 2 and m["completed"] == 1 and m["prefix_cache_query_tokens"] == 64


def test_abort_of_a_request_deferred_by_async_scheduling():
    # async scheduling: request 1 arrives mid-step (0.005 s) and waits for the schedule after the next one;
    # its client gives up at 0.008 s, before the step ends: it never reaches the scheduler
    sc = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=64, max_model_len=512, block_size=16,
                         enable_prefix_caching=False, async_scheduling=True)
    sched = make_scheduler(sc, 18)
    specs = [RequestSpec(0, 0.0, 16, 5, ((("u", 0), 16),)),
             RequestSpec(1, 0.005, 16, 5, ((("u", 1), 16),), timeout_s=0.003)]
    res = simulate(specs, lambda i: sched, lambda i: ConstantCostModel(0.01))
    r0, r1 = res.requests
    assert r0.status == FINISHED and r0.finish_s == pytest.approx(0.05)
    assert r1.status == ABORTED and r1.finish_s == pytest.approx(0.008) and r1.num_cached_tokens == -1
    assert sched.num_aborted == 0 and res.sim_end_s == pytest.approx(0.05)
