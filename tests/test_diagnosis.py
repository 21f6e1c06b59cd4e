"""The binding-limit verdict: hand-built step logs for each limit, and two real runs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from twin.analysis import causes as dg
from twin.sim.run import metrics_of, run_body
from twin.sim.deployment import resolve_deployment
from twin.cost.constant import ConstantCostModel
from twin.cost.roofline import RooflineCostModel
from twin.results.records import RequestRecord, StepRecords
from twin.results.sim_result import SimResult
from twin.scenario import load_scenario


def _sched(**kw):
    base = dict(scheduler="continuous", max_num_seqs=256, max_num_batched_tokens=2048, max_model_len=8192,
                static_batch_size=8)
    base.update(kw)
    return SimpleNamespace(**base)


def _deployment(cost=None, **sched):
    """A stand-in for twin.sim.deployment.Deployment: what diagnose() reads."""
    cost = cost or RooflineCostModel("llama-3.1-8b", "H100-SXM")
    return SimpleNamespace(scheduler_config=_sched(**sched), cost_model_factory=lambda: cost)


def _result(rows, requests=None) -> SimResult:
    """rows: dicts with running, waiting, kv, decode (seqs), prefill_seqs, prefill_tokens, preempted, dur."""
    steps = StepRecords()
    t = 0.0
    for row in rows:
        dur = row.get("dur", 0.01)
        dec, pseqs, ptok = row.get("decode", 0), row.get("prefill_seqs", 0), row.get("prefill_tokens", 0)
        steps.append(t, dur, dec + pseqs, pseqs, dec, dec + ptok, ptok, dec, 0, row.get("preempted", 0),
                     row.get("waiting", 0), row.get("running", dec + pseqs), row.get("kv", 0.1))
        t += dur
    if requests is None:
        requests = [RequestRecord(i, "chat", 0.0, 0.1, 1.0, num_prompt_tokens=500, num_output_tokens=200)
                    for i in range(4)]
    return SimResult(requests=requests, steps=steps, sim_end_s=t)


def test_concurrency_cap_binds_when_batch_is_pinned_with_a_queue():
    rows = [dict(decode=4, running=4, waiting=12)] * 90 + [dict(decode=2, running=2)] * 10
    d = dg.diagnose(_result(rows), _deployment(max_num_seqs=4))
    assert d.limit == dg.CONCURRENCY_CAP
    assert d.saturated and d.binding
    assert d.shares[dg.CONCURRENCY_CAP] == pytest.approx(0.9)
    assert "max_num_seqs = 4" in d.verdict and "about 12 requests on average whenever any wait" in d.verdict


def test_static_batching_binds_while_a_batch_runs_out_with_a_queue():
    # the batch shrinks as its requests finish (8 -> 2 running) but nobody joins until all are done
    rows = [dict(decode=8, running=8, waiting=3)] * 5 + [dict(decode=2, running=2, waiting=6)] * 5
    d = dg.diagnose(_result(rows), _deployment(scheduler="static", max_num_seqs=256, static_batch_size=8))
    assert d.limit == dg.STATIC_BATCH and d.binding
    assert d.shares[dg.CONCURRENCY_CAP] == pytest.approx(1.0)
    assert "Static batching binds" in d.verdict and "static_batch_size = 8" in d.verdict


def test_kv_capacity_binds_with_full_pool_and_preemptions():
    rows = [dict(decode=40, running=40, waiting=6, kv=0.97)] * 8 + [dict(decode=40, running=39, waiting=7,
                                                                         kv=0.99, preempted=1)] * 2
    d = dg.diagnose(_result(rows), _deployment(max_num_seqs=256))
    assert d.limit == dg.KV_CAPACITY
    assert "2 preemptions" in d.verdict
    assert any("preemption" in n for n in d.notes)


def test_token_budget_binds_when_steps_are_full_and_requests_queue():
    rows = [dict(decode=48, prefill_seqs=1, prefill_tokens=2000, running=49, waiting=20)] * 10
    d = dg.diagnose(_result(rows), _deployment(max_num_batched_tokens=2048))
    assert d.limit == dg.TOKEN_BUDGET
    assert "max_num_batched_tokens = 2048" in d.verdict


def test_full_steps_without_a_queue_are_not_a_binding_budget():
    # one long prompt chunked through an otherwise idle server fills the budget but nobody waits
    rows = [dict(prefill_seqs=1, prefill_tokens=2048, running=1)] * 5 + [dict(decode=1, running=1)] * 5
    d = dg.diagnose(_result(rows), _deployment(max_num_batched_tokens=2048))
    assert d.limit != dg.TOKEN_BUDGET
    assert not d.saturated


def test_light_load_keeps_up_and_decode_is_memory_bound():
    rows = [dict(decode=6, running=6)] * 50
    d = dg.diagnose(_result(rows), _deployment())
    assert d.limit == dg.MEMORY_BANDWIDTH
    assert not d.saturated and not d.binding
    assert "keeps up" in d.verdict and "memory-bandwidth-bound" in d.verdict
    assert d.step_split.memory > d.step_split.compute
    assert sum(d.step_split.share(p) for p in ("compute", "memory", "communication", "overhead")) == pytest.approx(1)


def test_saturated_gpu_without_scheduler_limit_names_compute():
    # big prefills under the budget, a queue, batch below the cap, KV low: the GPU itself is the limit
    rows = [dict(decode=32, prefill_seqs=2, prefill_tokens=1500, running=34, waiting=40, kv=0.3)] * 20
    d = dg.diagnose(_result(rows), _deployment(max_num_batched_tokens=8192))
    assert d.saturated
    assert d.limit == dg.COMPUTE
    assert "GPU itself is the limit" in d.verdict and "compute-bound" in d.verdict


def test_no_steps_is_idle():
    d = dg.diagnose(_result([]), _deployment())
    assert d.limit == dg.IDLE and not d.saturated


def test_cost_model_without_split_falls_back_to_the_roofline_of_the_deployment():
    cost = ConstantCostModel(step_s=0.01)
    assert dg.step_split(_result([dict(decode=6)]), cost) is None
    rows = [dict(decode=6, running=6)] * 10
    # without model and GPU there is no roofline either: the verdict still comes, without a split
    bare = SimpleNamespace(scheduler_config=_sched(), cost_model_factory=lambda: cost)
    d = dg.diagnose(_result(rows), bare)
    assert d.limit == dg.STEP_TIME and d.step_split is None
    dep = resolve_deployment(load_scenario("concurrency_cap_trap").body())
    full = SimpleNamespace(scheduler_config=_sched(), cost_model_factory=lambda: cost, model=dep.model,
                           gpu=dep.gpu, kv_pool=dep.kv_pool)
    d = dg.diagnose(_result(rows), full)
    assert d.limit == dg.MEMORY_BANDWIDTH
    assert d.stats["step_split_source"] == "roofline"


def test_profile_style_terms_do_not_count_as_a_split():
    assert dg._group({"step_s": 1.0, "tokens_s": 1.0, "kv_read_tokens_s": 1.0, "total_s": 3.0}) is None
    g = dg._group({"linear_compute_s": 1.0, "weight_read_s": 2.0, "overhead_s": 0.5, "total_s": 3.5})
    assert g == {"compute": 1.0, "memory": 2.0, "communication": 0.0, "overhead": 0.5}


def test_rejections_are_noted():
    reqs = [RequestRecord(0, "chat", 0.0, 0.1, 1.0, num_prompt_tokens=10, num_output_tokens=5),
            RequestRecord(1, "chat", 0.0, status="rejected", num_prompt_tokens=10 ** 6)]
    d = dg.diagnose(_result([dict(decode=1)] * 3, reqs), _deployment())
    assert any("1 request was rejected" in n for n in d.notes)
    assert dg.diagnosis_to_dict(d)["limit"] == d.limit


def _run(scenario, variant="baseline"):
    body = scenario.body(variant)
    dep = resolve_deployment(body, scenario.base_dir)
    result = run_body(body, scenario.base_dir, deployment=dep)
    return dg.diagnose(result, dep, metrics_of(result, body))


def test_static_vs_continuous_scenario_blames_static_batching():
    scenario = load_scenario("static_vs_continuous")
    body = scenario.body("static-varied", {"workload": {"num_requests": 96}})
    dep = resolve_deployment(body, scenario.base_dir)
    result = run_body(body, scenario.base_dir, deployment=dep)
    d = dg.diagnose(result, dep, metrics_of(result, body))
    assert d.limit == dg.STATIC_BATCH, d.verdict


def test_concurrency_cap_trap_scenario_is_diagnosed_as_the_cap():
    scenario = load_scenario("concurrency_cap_trap")
    capped = _run(scenario)
    assert capped.limit == dg.CONCURRENCY_CAP
    assert "max_num_seqs = 4" in capped.verdict
    free = _run(scenario, "vllm-default")
    assert free.limit != dg.CONCURRENCY_CAP
    assert not free.saturated
