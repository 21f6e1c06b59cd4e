"""The host time per sequence that a server without async scheduling exposes (twin.cost.sync_host): zero with
async scheduling, the embedded value without, added per scheduled sequence to every step (decode fast path
included), its own explain() part, the deployment's scheduler deciding it, and its provenance for the folds."""

from __future__ import annotations

import dataclasses

import pytest
from core_helpers import step_shape as _step

from twin.cost.default_terms import SYNC_HOST_TERMS
from twin.cost.roofline import DEFAULT_PER_SEQ_OVERHEAD_S, RooflineCostModel
from twin.cost.sync_host import EMBEDDED_SYNC_SEQ_HOST_S, explain_sync_host, exposed_seq_host_s
from twin.errors import TwinInputError
from twin.scenario import ScenarioBody
from twin.sim.deployment import resolve_deployment


def test_exposed_only_without_async_scheduling():
    assert EMBEDDED_SYNC_SEQ_HOST_S == SYNC_HOST_TERMS["sync_seq_host_s"] == 45e-6
    assert exposed_seq_host_s(True) == 0.0
    assert exposed_seq_host_s(True, 30e-6) == 0.0
    assert exposed_seq_host_s(False) == 45e-6
    assert exposed_seq_host_s(False, 30e-6) == 30e-6
    assert exposed_seq_host_s(False, 0.0) == 0.0
    with pytest.raises(TwinInputError, match="sync_seq_host_s"):
        exposed_seq_host_s(False, -1e-6)


def test_explain_part_moves_out_of_the_overhead():
    parts = {"overhead_s": 1.0e-3}
    explain_sync_host(parts, 40e-6, 5)
    assert parts == {"overhead_s": pytest.approx(1.0e-3 - 200e-6, abs=1e-18), "sync_seq_host_s": 200e-6}
    parts = {"overhead_s": 1.0e-3}
    explain_sync_host(parts, 0.0, 5)
    assert parts == {"overhead_s": 1.0e-3}


def _pair(**kw):
    common = dict(model="qwen3-32b", gpu="H100-SXM", tensor_parallel_size=8) | kw
    return RooflineCostModel(**common), RooflineCostModel(async_scheduling=False, **common)


def test_a_sync_server_pays_the_term_per_sequence_on_every_step():
    async_cm, sync_cm = _pair()
    assert async_cm.sync_seq_host_s == 0.0 and sync_cm.sync_seq_host_s == 45e-6
    decode = _step([1] * 8, [1000] * 8)
    # 8 sequences x 45 us = 0.36 ms more per step
    assert sync_cm.step_time_s(decode) - async_cm.step_time_s(decode) == pytest.approx(8 * 45e-6, rel=1e-9)
    mixed = _step([512, 1, 1], [0, 300, 400])                  # a prompt chunk beside two decodes: 3 sequences
    assert sync_cm.step_time_s(mixed) - async_cm.step_time_s(mixed) == pytest.approx(3 * 45e-6, rel=1e-9)
    # the decode fast path and the batch re-costing agree with the step-by-step cost, bit for bit
    steps = sync_cm.decode_step_times_s(8, 8000, 3)
    assert steps == [sync_cm.step_time_from_sums(8, 8, 8000 + 8 * i, 0, 8, 0) for i in range(3)]
    arr = sync_cm.step_times_s([8], [8], [8], [8000], [8008])
    assert float(arr[0]) == sync_cm.step_time_from_sums(8, 8, 8000, 0, 8, 0)


def test_explain_names_the_term_and_the_parts_add_up():
    async_cm, sync_cm = _pair()
    decode = _step([1] * 8, [1000] * 8)
    e_sync, e_async = sync_cm.explain(decode), async_cm.explain(decode)
    assert e_sync["sync_seq_host_s"] == pytest.approx(8 * 45e-6, rel=1e-12)
    assert "sync_seq_host_s" not in e_async
    assert e_sync["overhead_s"] == pytest.approx(e_async["overhead_s"], rel=1e-12)
    assert sum(v for k, v in e_sync.items() if k != "total_s") == pytest.approx(e_sync["total_s"], rel=1e-12)


def test_given_value_and_parameters_round_trip():
    _, sync_cm = _pair(sync_seq_host_s=30e-6)
    assert sync_cm.sync_seq_host_s == 30e-6
    p = sync_cm.parameters()
    assert (p["async_scheduling"], p["sync_seq_host_s"]) == (False, 30e-6)
    assert "sync_seq_host_s" not in _pair()[0].parameters()
    with pytest.raises(TwinInputError, match="sync_seq_host_s"):
        RooflineCostModel("qwen3-32b", "H100-SXM", 8, async_scheduling=False, sync_seq_host_s=-1.0)


def _body(server: dict) -> ScenarioBody:
    return ScenarioBody.model_validate({
        "name": "x", "deployment": {"gpu": "H100-SXM", "model": "qwen3-32b", "tensor_parallel_size": 8},
        "server": server,
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": 1.0}, "num_requests": 1,
                     "classes": [{"name": "x", "share": 1.0, "prompt": {"suffix_tokens": 8}, "output_tokens": 2}]}})


def test_the_deployments_scheduler_decides():
    assert resolve_deployment(_body({"vllm_version": "0.12"})).cost_model_factory().sync_seq_host_s == 45e-6
    assert resolve_deployment(_body({"vllm_version": "0.14"})).cost_model_factory().sync_seq_host_s == 0.0
    assert resolve_deployment(_body({"vllm_version": "0.14", "async_scheduling": False})
                              ).cost_model_factory().sync_seq_host_s == 45e-6
    given = _body({"vllm_version": "0.12"}).model_copy(update={"cost_model": _body({}).cost_model.model_copy(
        update={"params": {"per_seq_overhead_s": 20e-6}})})      # a calibrated per-sequence cost is the whole
    cm = resolve_deployment(given).cost_model_factory()
    assert (cm.per_seq_overhead_s, cm.sync_seq_host_s) == (20e-6, 0.0)


def test_the_fit_sees_the_same_value_and_its_evidence():
    from twin.fitting.provenance import DECLARED_EVIDENCE, embedded_entries, embedded_start
    assert embedded_start(("per_seq_overhead_s@sync",))["per_seq_overhead_s@sync"] == pytest.approx(
        DEFAULT_PER_SEQ_OVERHEAD_S + 45e-6, rel=1e-12)                               # 18.7 + 45 = 63.7 us
    entry = next(e for e in embedded_entries() if e.parameter == "per_seq_overhead_s@sync")
    assert entry.prior == pytest.approx(18.7e-6) and entry.value == pytest.approx(63.7e-6)
    # round 7: the 45 us was read GIVEN the async 18.7 us (the inference-perf runs), so those are evidence too
    assert entry.evidence == DECLARED_EVIDENCE["per_seq_overhead_s@sync"][0] == (
        "the Qwen3-32B H100 rows (its 45 us), given the inference-perf H100 runs' per_seq_overhead_s (its 18.7 us)")


def test_a_fold_holding_out_qwen3_resets_it_and_the_others_keep_it():
    from twin.fitting import provenance as pv
    from twin.fitting.fit import Case
    from twin.fitting.joint import FOLDS, with_deployments
    from twin.fitting.measured_run import LengthSample, MeasuredRun
    from twin.fitting.replay import Target
    from twin.fitting.silicon import SiliconCase

    def case(name: str, model: str, version: str, tp: int) -> Case:
        run = MeasuredRun(name=name, source="test", num_requests=8, rate_per_s=float("inf"), max_concurrency=4,
                          prompt_tokens=LengthSample.constant(512), output_tokens=LengthSample.constant(32),
                          metrics={"completed": 1.0, "mean_tpot_ms": 10.0},
                          server={"enable_prefix_caching": False, "vllm_version": version}, experiment=name)
        plain = Case(run, Target(model, "H100-SXM", tp))
        obj = object.__new__(SiliconCase)       # typed as a silicon row (the serving defaults' evidence is not)
        for f in dataclasses.fields(SiliconCase):
            object.__setattr__(obj, f.name, getattr(plain, f.name, f.default if f.default is not
                                                    dataclasses.MISSING else None))
        return obj
    ev = with_deployments([case("q", "qwen3-32b", "0.12", 2), case("l", "llama-3.1-70b", "0.14", 8)])
    plan = pv.fold_plan("qwen3", FOLDS["family"], ev, ())
    assert plan.fixed == {"per_seq_overhead_s@sync": pytest.approx(18.7e-6, rel=1e-12)}   # its stated prior
    assert [plan.affects(d) for _, d in ev] == [True, False]          # the async Llama server never had it
    assert pv.fold_plan("llama", FOLDS["family"], ev, ()).actions == {}


def test_the_fit_path_charges_it_once():
    from twin.fitting.measured_run import LengthSample, MeasuredRun
    from twin.fitting.replay import Target, cost_model_for, deployment_for
    run = MeasuredRun(name="q", source="test", num_requests=8, rate_per_s=float("inf"), max_concurrency=4,
                      prompt_tokens=LengthSample.constant(512), output_tokens=LengthSample.constant(32),
                      metrics={"completed": 1.0, "mean_tpot_ms": 10.0},
                      server={"enable_prefix_caching": False, "vllm_version": "0.12"}, experiment="q")
    target = Target("qwen3-32b", "H100-SXM", 8)
    dep = deployment_for(run, target)
    plain = cost_model_for(dep, target, {})                                      # the embedded defaults
    scoped = cost_model_for(dep, target, {"per_seq_overhead_s@sync": 63.7e-6})   # the fit's whole value
    assert (plain.per_seq_overhead_s, plain.sync_seq_host_s) == (18.7e-6, 45e-6)
    assert (scoped.per_seq_overhead_s, scoped.sync_seq_host_s) == (63.7e-6, 0.0)
    decode = _step([1] * 8, [1000] * 8)
    assert scoped.step_time_s(decode) == pytest.approx(plain.step_time_s(decode), rel=1e-12)
    given = cost_model_for(dep, target, {"per_seq_overhead_s": 20e-6})           # a calibration's whole value
    assert (given.per_seq_overhead_s, given.sync_seq_host_s) == (20e-6, 0.0)
    async_run = dataclasses.replace(run, server={"enable_prefix_caching": False, "vllm_version": "0.14"})
    assert cost_model_for(deployment_for(async_run, target), target, {}).sync_seq_host_s == 0.0
