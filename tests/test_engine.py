"""The SimPy engine: the decode fast path gives the step-by-step path's results exactly, and the engine's
timing rules (arrivals seen at the next step, rejections counted, runs cut at max_time_s) hold."""

from __future__ import annotations

import dataclasses
import gc

import numpy as np
import pytest

from twin.sim.deployment import make_router, resolve_deployment
from twin.cost.constant import ConstantCostModel
import twin.sim.replica as replica_module
from twin.results.records import ABORTED, FINISHED, INCOMPLETE, REJECTED, STEP_COLUMN_NAMES, RequestRecord
from twin.scenario import Scenario
from twin.core.scheduler_config import SchedulerConfig
from twin.core.schedulers import make_scheduler
from twin.sim.simulate import simulate
from twin.workload.generate import build_workload
from twin.workload.spec import RequestSpec

# prefix sharing (3 system-prompt groups, few-shot templates, multi-turn sessions whose turns reuse the
# previous turn's prompt and output), a KV pool small enough to preempt, two replicas
MIXED = {
    "name": "fast-path-identity",
    "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b", "replicas": 2},
    "server": {"num_gpu_blocks_override": 400, "max_num_batched_tokens": 1024, "max_model_len": 2048},
    "workload": {
        "arrivals": {"process": "poisson", "rate_per_s": 10},
        "num_requests": 240,
        "classes": [
            {"name": "agent", "share": 0.6,
             "prompt": {"shared_prefix_tokens": 400, "num_prefix_groups": 3,
                        "few_shot": {"num_templates": 2, "tokens": 64},
                        "suffix_tokens": {"lognormal": {"median": 60, "sigma": 0.8, "max": 400}}},
             "output_tokens": {"lognormal": {"median": 120, "sigma": 0.9, "max": 600}}},
            {"name": "chat", "share": 0.4,
             "prompt": {"suffix_tokens": {"uniform": [20, 200]}},
             "output_tokens": {"uniform": [1, 300]},
             "multi_turn": {"turns": {"uniform": [1, 4]}, "gap_s": {"exponential": {"mean": 0.5}}}},
        ],
    },
    "seed": 3,
}


CLOSED_LOOP = {"process": "closed_loop", "concurrency": 24}
TIMEOUT_S = 3.0


def _run(data: dict, overrides: dict | None = None, *, fast_path: bool, wrap_cost=lambda cost: cost, **kw):
    if overrides and overrides.get("workload", {}).get("arrivals") is CLOSED_LOOP:
        data = {**data, "workload": {**data["workload"], "arrivals": CLOSED_LOOP}}
        overrides = None
    sc = Scenario(data)
    body = sc.body("baseline", overrides)
    dep = resolve_deployment(body)
    traffic = build_workload(body.workload, body.seed)
    return simulate(traffic, lambda i: make_scheduler(dep.scheduler_config, dep.num_gpu_blocks),
                    lambda i: wrap_cost(dep.cost_model_factory()), num_replicas=body.deployment.replicas,
                    router=make_router(body.deployment.router), fast_path=fast_path, **kw)


def _record_fields(r: RequestRecord) -> dict:
    if not dataclasses.is_dataclass(r):   # a summary record (twin.results.token_summary): its slots but the run's ITL
        return {name: getattr(r, name) for name in type(r).__slots__ if name != "itl"}
    out = {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}
    for key in ("emit_times_s", "emit_counts", "spec_accepted_per_position"):
        if out[key] is not None:
            out[key] = list(out[key])
    return out


def _assert_same_results(a, b) -> None:
    assert len(a.steps) == len(b.steps)
    for name in STEP_COLUMN_NAMES:
        np.testing.assert_array_equal(a.steps.column(name), b.steps.column(name), err_msg=name)
    assert len(a.requests) == len(b.requests)
    for x, y in zip(a.requests, b.requests):
        assert _record_fields(x) == _record_fields(y)
    for key in ("sim_end_s", "prefix_cache_hit_tokens", "prefix_cache_query_tokens", "num_preemptions"):
        assert getattr(a, key) == getattr(b, key), key


@pytest.fixture
def fast_forward_steps(monkeypatch):
    """Counts the steps the fast path ran and its runs of more than one decode step scheduled at once (so an
    identity test cannot pass with the fast path never taken)."""
    import twin.sim.cohort_steps as cohort_module

    counter = {"steps": 0, "runs": 0, "decode_runs": 0, "finishes_ahead_of_simpy": 0}
    original = replica_module.cohort_steps
    original_plan = cohort_module._plan_decode_run

    def counting_plan(*args):
        planned = original_plan(*args)
        counter["decode_runs"] += len(planned[0]) > 1
        return planned

    monkeypatch.setattr(cohort_module, "_plan_decode_run", counting_plan)
    original_finish = replica_module.Replica._finish

    def counting_finish(self, req, now):
        counter["finishes_ahead_of_simpy"] += now > self.env.now   # settled inside a run, nothing yielded
        original_finish(self, req, now)

    monkeypatch.setattr(replica_module.Replica, "_finish", counting_finish)

    def counting(replica):
        before = len(replica.steps)
        try:
            yield from original(replica)
        finally:  # also when a run cut at max_time_s leaves the generator suspended (closed on collection)
            ran = len(replica.steps) - before
            counter["steps"] += ran
            counter["runs"] += ran > 0

    monkeypatch.setattr(replica_module, "cohort_steps", counting)
    return counter


@pytest.mark.parametrize("overrides", [
    None,
    {"server": {"enable_prefix_caching": False}, "deployment": {"router": "least_outstanding"}},
    {"workload": {"arrivals": CLOSED_LOOP}},
    {"workload": {"timeout_s": TIMEOUT_S}},
    {"server": {"max_num_batched_tokens": 160, "vllm_version": "0.11"}},
    {"server": {"block_size": 1, "num_gpu_blocks_override": 6400, "policy": "priority",
                "free_unhashed_blocks_to_head": True}},
    {"server": {"long_prefill_token_threshold": 96, "admission_watermark": 0.05,
                "max_num_seqs": 12}},
], ids=["prefix-caching", "no-caching-least-outstanding", "closed-loop", "client-timeouts",
        "prefills-split-sync-0.11", "block-size-1-priority-unhashed-to-head", "threshold-watermark-max-seqs"])
def test_fast_path_is_identical_to_step_by_step(overrides, fast_forward_steps):
    slow = _run(MIXED, overrides, fast_path=False)
    assert fast_forward_steps["steps"] == 0
    fast = _run(MIXED, overrides, fast_path=True)
    # the workload exercises what the fast path must get right, and the fast path really ran
    assert slow.num_preemptions > 0
    assert {r.replica for r in slow.requests} == {0, 1}
    if overrides is None:
        assert slow.prefix_cache_hit_tokens > 0
    assert fast_forward_steps["steps"] > 0.5 * len(fast.steps), fast_forward_steps
    if overrides is None or "server" in overrides:
        assert fast_forward_steps["decode_runs"] > 10, fast_forward_steps
    if overrides is None:
        assert fast_forward_steps["finishes_ahead_of_simpy"] > 0, fast_forward_steps
    if overrides == {"workload": {"arrivals": CLOSED_LOOP}}:   # a finish wakes its client: always yielded
        assert fast_forward_steps["finishes_ahead_of_simpy"] == 0, fast_forward_steps

    _assert_same_results(fast, slow)
    if overrides and "timeout_s" in overrides.get("workload", {}):
        # aborts land mid-step and mid-fast-forward: some requests time out, others finish
        aborted = [r for r in fast.requests if r.status == ABORTED]
        assert 0 < len(aborted) < len(fast.requests)
        assert all(r.status in (FINISHED, ABORTED) for r in fast.requests)
        assert all(r.finish_s == pytest.approx(r.arrival_s + TIMEOUT_S) for r in aborted)
    else:
        assert all(r.status == FINISHED for r in fast.requests)


def test_fast_path_is_identical_when_it_forgets_old_step_end_times(monkeypatch, fast_forward_steps):
    from twin.sim.decode_cohort import DecodeCohort

    monkeypatch.setattr(DecodeCohort, "forget_every_steps", 7)
    slow = _run(MIXED, None, fast_path=False)
    fast = _run(MIXED, None, fast_path=True)
    assert fast_forward_steps["steps"] > 0.5 * len(fast.steps)
    _assert_same_results(fast, slow)


@pytest.mark.parametrize("overrides", [None, {"workload": {"timeout_s": TIMEOUT_S}},
                                       {"workload": {"arrivals": CLOSED_LOOP}}],
                         ids=["open-loop", "client-timeouts", "closed-loop"])
def test_summary_token_times_counted_by_step_as_emission_by_emission(overrides, monkeypatch, fast_forward_steps):
    """Summary records: the fast path counts a step's tokens and gaps once for every request in it
    (``ItlSummary.add_steps``), the step-by-step path emission by emission; the same records, gap counts,
    histogram and per-second tokens (flushed mid-run too), the ITL mean and std up to summation order."""
    import twin.results.token_summary as summary_module

    monkeypatch.setattr(summary_module, "_FLUSH_AT", 101)
    slow = _run(MIXED, overrides, fast_path=False, token_times="summary")
    fast = _run(MIXED, overrides, fast_path=True, token_times="summary")
    assert fast_forward_steps["decode_runs"] > 10
    _assert_same_results(fast, slow)
    a, b = fast.requests[0].itl, slow.requests[0].itl
    a.flush(), b.flush()
    assert (a.num_gaps, a.num_zero_gaps, a.max_gap_s, a.min_gap_s) == (b.num_gaps, b.num_zero_gaps, b.max_gap_s,
                                                                       b.min_gap_s)
    assert a.num_gaps > 50 * 101
    assert np.array_equal(a._hist, b._hist)
    assert np.array_equal(np.trim_zeros(np.array(a._tokens), "b"), np.trim_zeros(np.array(b._tokens), "b"))
    fast_itl, slow_itl = a.describe_itl([50, 99]), b.describe_itl([50, 99])
    assert fast_itl["mean_itl_ms"] == pytest.approx(slow_itl["mean_itl_ms"], rel=1e-9)
    assert fast_itl["std_itl_ms"] == pytest.approx(slow_itl["std_itl_ms"], rel=1e-6)
    assert {k: v for k, v in fast_itl.items() if "mean" not in k and "std" not in k} == \
        {k: v for k, v in slow_itl.items() if "mean" not in k and "std" not in k}


def test_aggregate_step_records_are_identical_when_folded_mid_run(monkeypatch, fast_forward_steps):
    """Aggregated step records fold their buffer every ``_FOLD_AT`` rows: a decode run appended at once is
    folded at the same rows as its steps appended one by one, so the per-second sums keep their rounding."""
    import twin.results.step_summary as summary_module

    monkeypatch.setattr(summary_module, "_FOLD_AT", 37)   # folds inside most runs of decode steps
    slow = _run(MIXED, None, fast_path=False, steps_mode="aggregate")
    fast = _run(MIXED, None, fast_path=True, steps_mode="aggregate")
    assert fast_forward_steps["decode_runs"] > 10
    assert len(fast.steps) == len(slow.steps) > 50 * 37
    assert fast.steps.replicas == slow.steps.replicas == [0, 1]
    np.testing.assert_array_equal(fast.steps.to_frame().to_numpy(), slow.steps.to_frame().to_numpy())
    assert fast.steps.kv_usage_counts == slow.steps.kv_usage_counts
    assert fast.steps.span_s() == slow.steps.span_s()


@pytest.mark.parametrize("fast_path", [False, True], ids=["step-by-step", "fast-path"])
@pytest.mark.parametrize("router", ["round_robin", "kv_cache_aware"])
def test_private_blocks_change_nothing(fast_path, router, monkeypatch):
    """Blocks no other request names skip the prefix cache's hashing (twin.workload.sharing): the same
    results, on shared prefixes, multi-turn sessions that quote earlier outputs, and preemptions that look a
    request's own private blocks up again; on the fast path, decodes whose blocks are all private register
    them when they leave the cohort."""
    import twin.core.kv_cache_manager as kv_module
    from twin.sim.decode_cohort import DecodeCohort

    joined = {"registering as they fill": 0, "registering on leave": 0}
    original_join = DecodeCohort.join

    def counting_join(self, req):
        original_join(self, req)
        joined["registering on leave" if self.members[req].registers_on_leave else "registering as they fill"] += 1

    monkeypatch.setattr(DecodeCohort, "join", counting_join)

    evictions, registered_at_preemption = [], [0]
    original_free = kv_module.KVCacheManager.free

    def counting_free(self, request):
        if request.private_from_token is not None and not request.is_finished:
            registered_at_preemption[0] += 1
        original_free(self, request)
        evictions.append(self.block_pool.num_evictions)

    monkeypatch.setattr(kv_module.KVCacheManager, "free", counting_free)
    overrides = {"deployment": {"router": router}}
    exact = _run(MIXED, overrides, fast_path=fast_path, private_blocks=False)
    exact_evictions, evictions[:] = list(evictions), []
    assert registered_at_preemption[0] == 0
    assert joined["registering on leave"] == 0
    lazy = _run(MIXED, overrides, fast_path=fast_path, private_blocks=True)
    assert exact.num_preemptions > 0 and exact.prefix_cache_hit_tokens > 0
    assert registered_at_preemption[0] > 0
    if fast_path:
        assert min(joined.values()) > 0, joined
    _assert_same_results(lazy, exact)
    assert evictions == exact_evictions and max(evictions) > 0


@pytest.mark.parametrize("fast_path", [False, True], ids=["step-by-step", "fast-path"])
@pytest.mark.parametrize("deployment", [{"router": "round_robin"}, {"replicas": 1, "router": "kv_cache_aware"}],
                         ids=["two-replicas-round-robin", "one-replica-kv-cache-aware"])
@pytest.mark.parametrize("rate_per_s", [10, 3000], ids=["spaced", "burst"])
def test_one_event_arrivals_change_nothing(fast_path, deployment, rate_per_s, monkeypatch):
    """Open-loop requests handed over at the end of their request path (jittered) without an event at their
    arrival: the same results as with one (shared prefixes, multi-turn sessions, preemption; in a burst,
    requests overtake each other on the path), with fewer SimPy events."""
    import simpy

    events = [0]
    original_step = simpy.Environment.step

    def counting_step(self):
        events[0] += 1
        original_step(self)

    monkeypatch.setattr(simpy.Environment, "step", counting_step)
    handed_over = []
    original_submit = replica_module.Replica.submit

    def logging_submit(self, request):
        handed_over.append(request.arrival_time_s)
        original_submit(self, request)

    monkeypatch.setattr(replica_module.Replica, "submit", logging_submit)
    overrides = {"deployment": deployment,
                 "workload": {"arrivals": {"process": "poisson", "rate_per_s": rate_per_s}}}
    two = _run(MIXED, overrides, fast_path=fast_path, one_event_arrivals=False)
    two_events, events[0] = events[0], 0
    two_order, handed_over[:] = list(handed_over), []
    one = _run(MIXED, overrides, fast_path=fast_path, one_event_arrivals=True)
    assert two.num_preemptions > 0 and two.prefix_cache_hit_tokens > 0
    assert handed_over == two_order
    if rate_per_s > 1000:
        assert two_order != sorted(two_order)
    # one event less per request (but the first: it arrives at t = 0, when arrivals start)
    assert events[0] <= two_events - (len(two.requests) - 1), (events[0], two_events)
    _assert_same_results(one, two)


class _ListsOnlyCost:
    """A cost model that reads each step's per-sequence lists (no ``step_time_from_sums``)."""

    name = "lists-only"

    def __init__(self, inner) -> None:
        self.inner = inner
        self.request_path_s = inner.request_path_s
        self.request_path_jitter_s = inner.request_path_jitter_s

    def step_time_s(self, step) -> float:
        return self.inner.step_time_s(step)


def test_fast_path_is_identical_with_a_cost_model_that_needs_the_per_sequence_lists(fast_forward_steps):
    slow = _run(MIXED, None, fast_path=False)
    fast = _run(MIXED, None, fast_path=True, wrap_cost=_ListsOnlyCost)
    assert fast_forward_steps["steps"] > 0.5 * len(fast.steps)
    _assert_same_results(fast, slow)


# ---- timing rules, on a constant cost model so every number is known by hand --------------------------------
def _config(**kw) -> SchedulerConfig:
    cfg = dict(max_num_seqs=8, max_num_batched_tokens=64, max_model_len=64, block_size=16,
               enable_prefix_caching=False)
    cfg.update(kw)
    return SchedulerConfig(**cfg)


def _spec(rid: int, arrival: float, prompt: int, out: int) -> RequestSpec:
    return RequestSpec(rid, arrival, prompt, out, ((("u", rid), prompt),))


def _sim(specs, cfg=None, num_blocks=64, step_s=0.01, **kw):
    cfg = cfg or _config()
    return simulate(specs, lambda i: make_scheduler(cfg, num_blocks), lambda i: ConstantCostModel(step_s), **kw)


@pytest.mark.parametrize("fast_path", [True, False])
def test_arrival_mid_step_waits_for_the_next_step(fast_path):
    # request 0 starts at t=0 and decodes 10 steps of 10 ms; request 1 arrives at 25 ms, mid-step 3, and is
    # first scheduled at 30 ms; both then share steps
    res = _sim([_spec(0, 0.0, 4, 10), _spec(1, 0.025, 4, 3)], fast_path=fast_path)
    r0, r1 = res.requests
    assert r0.first_token_s == pytest.approx(0.01)
    assert r1.first_token_s == pytest.approx(0.04)
    assert r1.ttft_s == pytest.approx(0.015)
    assert list(r1.emit_times_s) == pytest.approx([0.04, 0.05, 0.06])
    assert r0.finish_s == pytest.approx(0.10)
    assert len(res.steps) == 10
    assert res.steps.column("num_seqs").tolist() == [1, 1, 1, 2, 2, 2, 1, 1, 1, 1]


def test_idle_server_starts_a_request_at_its_arrival():
    res = _sim([_spec(0, 1.0, 4, 2), _spec(1, 5.0, 4, 2)])
    assert [r.ttft_s for r in res.requests] == pytest.approx([0.01, 0.01])
    assert res.steps.column("start_s").tolist() == pytest.approx([1.0, 1.01, 5.0, 5.01])
    assert res.sim_end_s == pytest.approx(5.02)


def test_requests_that_can_never_fit_are_rejected_and_counted():
    cfg = _config(max_model_len=64)
    res = _sim([_spec(0, 0.0, 80, 4), _spec(1, 0.0, 8, 4), _spec(2, 0.1, 64, 1)], cfg)
    status = {r.request_id: r.status for r in res.requests}
    assert status == {0: REJECTED, 1: FINISHED, 2: REJECTED}
    assert "max_model_len" in res.requests[0].reject_reason
    m = res.metrics()
    assert m["completed"] == 1 and m["failed"] == 2


def test_max_time_cuts_the_run_and_marks_requests_in_flight():
    specs = [_spec(i, 0.0, 4, 50) for i in range(3)]
    res = _sim(specs, _config(max_num_seqs=1), max_time_s=0.75)
    assert res.sim_end_s == pytest.approx(0.75)
    assert [r.status for r in res.requests] == [FINISHED, INCOMPLETE, INCOMPLETE]
    m = res.metrics()
    assert m["completed"] == 1 and m["failed"] == 0 and m["num_incomplete"] == 2


def test_round_robin_spreads_requests_over_replicas():
    specs = [_spec(i, 0.001 * i, 4, 5) for i in range(8)]
    res = _sim(specs, num_replicas=3)
    assert [r.replica for r in res.requests] == [0, 1, 2, 0, 1, 2, 0, 1]
    assert set(res.steps.column("replica").tolist()) == {0, 1, 2}


def test_fast_path_is_identical_when_the_run_is_cut_mid_decode(fast_forward_steps):
    # requests still decoding when max_time_s stops the run keep exactly the tokens they got by then
    specs = [_spec(i, 0.003 * i, 8, 400) for i in range(6)]
    runs = [_sim(specs, _config(max_model_len=512), num_blocks=256, max_time_s=1.234, fast_path=f)
            for f in (False, True)]
    slow, fast = runs
    gc.collect()  # close the suspended fast-path generator so the counter sees its steps
    assert fast_forward_steps["steps"] > 50
    assert all(r.status == INCOMPLETE for r in slow.requests)
    assert all(0 < r.num_output_tokens < 400 for r in slow.requests)
    _assert_same_results(fast, slow)
