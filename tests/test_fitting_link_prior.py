"""The Blackwell link part of an all-reduce held out (twin.fitting.link_prior, issue 33 round 11): its evidence is
the B200 gpt-oss-120b and MiniMax-M2.5 NVFP4 rows, so the folds that hold any of them out (the B200 GPU fold, the
silicon source fold, the gpt-oss and MiniMax family folds) reset it to its stated prior, no floor, and the others
keep it; the cost model at the reset value charges a TP 1 step no floor; a reset link part leaves a reset fused
all-reduce to the one-kernel rule (twin.fitting.layer_fixed_prior)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from twin.cost import default_terms, generation_experts
from twin.cost.default_terms import NO_FLOOR_LINK_S
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.fitting import provenance as pv
from twin.fitting.fit import Case
from twin.fitting.joint import FOLDS, with_deployments
from twin.fitting.layer_fixed_prior import link_reset
from twin.fitting.link_prior import TERM
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.replay import Target, cost_model_for
from twin.fitting.silicon import SiliconCase

LINK_S = 6e-6


def _run(name: str) -> MeasuredRun:
    return MeasuredRun(name=name, source="test", num_requests=12, rate_per_s=float("inf"), max_concurrency=4,
                       prompt_tokens=LengthSample.constant(512), output_tokens=LengthSample.constant(32),
                       metrics={"completed": 1.0, "mean_ttft_ms": 50.0, "mean_tpot_ms": 10.0},
                       server={"enable_prefix_caching": False, "vllm_version": "0.14"}, experiment=name)


def _silicon(name: str, target: Target, system: str, model_path: str, precision: str):
    """A silicon row (typed as the provenance rule tells the sources apart) with the measured row's fields the
    evidence reads."""
    case = Case(_run(name), target)
    obj = object.__new__(SiliconCase)
    for f in dataclasses.fields(SiliconCase):
        object.__setattr__(obj, f.name, getattr(case, f.name, f.default if f.default is not dataclasses.MISSING
                                                else None))
    object.__setattr__(obj, "row", SimpleNamespace(system=system, model_path=model_path, precision=precision))
    return obj


@pytest.fixture(autouse=True)
def only_the_link_part(monkeypatch):
    """The embedded tables with Blackwell's link part as their one entry, so that the plans below are exact."""
    monkeypatch.setattr(default_terms, "GENERATION_TERMS", {"blackwell": {"unsharded_allreduce_link_s": LINK_S}})
    monkeypatch.setattr(default_terms, "EXPERT_FORMAT_TERMS", {})
    monkeypatch.setattr(generation_experts, "GENERATION_EXPERT_TERMS", {})
    monkeypatch.setattr(default_terms, "SYNC_HOST_TERMS", {"sync_seq_host_s": 0.0})


def _evidence(minimax_precision: str = "fp4"):
    """An inference-perf H100 run, H100 and B200 Llama rows, a B200 gpt-oss row and a B200 MiniMax row."""
    rows = [Case(_run("ip-h100"), Target("llama-2-7b", "H100-SXM", 1)),
            _silicon("llama-h100", Target("llama-3.1-70b", "H100-SXM", 4, weight_dtype="fp8"), "h100_sxm",
                     "meta-llama/Llama-3.1-70B-Instruct", "fp8"),
            _silicon("llama-b200", Target("llama-3.1-70b", "B200", 1, weight_dtype="fp8"), "b200_sxm",
                     "meta-llama/Llama-3.1-70B-Instruct", "fp8"),
            _silicon("gptoss-b200", Target("gpt-oss-120b", "B200", 2, weight_dtype="mxfp4"), "b200_sxm",
                     "openai/gpt-oss-120b", "fp4"),
            _silicon("minimax-b200", Target("minimax-m2.5", "B200", 4, weight_dtype="fp8"), "b200_sxm",
                     "MiniMaxAI/MiniMax-M2.5", minimax_precision)]
    return with_deployments(rows)


def test_the_link_part_has_its_rows_and_a_no_floor_prior():
    entries = {e.parameter: e for e in pv.embedded_entries()}
    entry = entries[TERM]
    assert (entry.value, entry.prior, entry.table) == (LINK_S, NO_FLOOR_LINK_S, "GENERATION_TERMS")
    assert entry.evidence.startswith("the B200 gpt-oss-120b and MiniMax-M2.5 NVFP4 rows")


@pytest.mark.parametrize("kind, group", [("GPU", "B200"), ("source", "silicon"), ("family", "gpt-oss"),
                                         ("family", "minimax")])
def test_the_folds_holding_its_rows_out_reset_it_to_no_floor(kind, group):
    plan = pv.fold_plan(group, FOLDS[kind], _evidence(), ())
    assert plan.actions[TERM][1] == pv.RESET
    assert plan.fixed[TERM] == NO_FLOOR_LINK_S
    assert link_reset(plan, "blackwell") and not link_reset(plan, "hopper")


@pytest.mark.parametrize("kind, group", [("GPU", "H100-SXM"), ("source", "inference-perf"), ("family", "llama")])
def test_the_folds_keeping_its_rows_keep_it(kind, group):
    plan = pv.fold_plan(group, FOLDS[kind], _evidence(), ())
    assert TERM not in plan.actions and TERM not in plan.fixed
    assert not link_reset(plan, "blackwell")


def test_minimax_fp8_rows_are_not_its_evidence():
    plan = pv.fold_plan("minimax", FOLDS["family"], _evidence(minimax_precision="fp8"), ())
    assert TERM not in plan.actions


def test_the_cost_model_at_the_reset_value_charges_no_tp1_floor():
    ev = _evidence()
    plan = pv.fold_plan("B200", FOLDS["GPU"], ev, ())
    assert plan.fixed == {TERM: NO_FLOOR_LINK_S}       # the only entry these tables give B200 evidence to
    case, dep = ev[2]                           # Llama-3.1-70B FP8, B200, TP 1
    embedded = cost_model_for(dep, case.target, {})
    held = cost_model_for(dep, case.target, plan.fixed)
    latency_s = embedded.fused_allreduce_latency_s
    assert embedded.unsharded_allreduce_link_s == LINK_S
    assert embedded.unsharded_floor_s == pytest.approx(2 * 80 * (latency_s - LINK_S), rel=1e-12)
    assert held.unsharded_allreduce_link_s == NO_FLOOR_LINK_S
    assert held.unsharded_floor_s == 0.0
    # the rest of the step is unchanged: the whole fixed time differs by the floor exactly
    gap_s = embedded.constants.overhead_s_per_step - held.constants.overhead_s_per_step
    assert gap_s == pytest.approx(embedded.unsharded_floor_s, rel=1e-12)


def test_the_keyword_sets_it_and_rejects_a_negative_value():
    m = RooflineCostModel("llama-3.1-70b", "B200", 1, "fp8", "fp8", allreduce_latency_s=20e-6,
                          unsharded_allreduce_link_s=15e-6)
    assert m.unsharded_floor_s == pytest.approx(2 * 80 * 5e-6, rel=1e-12)
    hopper = RooflineCostModel("llama-3.1-70b", "H100-SXM", 1, "fp8", "fp8")
    assert hopper.unsharded_allreduce_link_s == NO_FLOOR_LINK_S and hopper.unsharded_floor_s == 0.0
    with pytest.raises(TwinInputError, match="unsharded_allreduce_link_s"):
        RooflineCostModel("llama-3.1-70b", "B200", 1, "fp8", "fp8", unsharded_allreduce_link_s=-1e-6)
