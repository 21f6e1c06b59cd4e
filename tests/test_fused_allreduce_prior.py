"""The held-out prior of a fused all-reduce + RMSNorm (twin.fitting.fused_allreduce_prior; issue 33, round 10): the
fold's unfused latency less the one kernel the fusion removes, at the per-kernel time of round 9's MLA prior
(2 all-reduce latencies per 12-kernel GQA layer)."""

import pytest

from tests.fitting_helpers import provenance_entry
from twin.fitting import provenance as pv
from twin.fitting.fused_allreduce_prior import (KERNELS_PER_ALLREDUCE, fused_allreduce_prior_s,
                                                fused_prior_after_fit, fused_prior_labels, is_fused_term)
from twin.fitting.held_priors import mla_layer_prior_s

FUSED_B = "fused_allreduce_latency_s@blackwell+experts_mxfp4"
FUSED_H = "fused_allreduce_latency_s@hopper+experts_mxfp4"
EFF_H = "moe_expert_compute_efficiency@hopper+experts_mxfp4"


def test_the_prior_is_the_unfused_latency_less_one_kernel_of_six():
    assert KERNELS_PER_ALLREDUCE == 6
    assert fused_allreduce_prior_s(24e-6) == pytest.approx(20e-6, rel=1e-12)
    assert fused_allreduce_prior_s(0.0) == 0.0
    # the same per-kernel unit as the MLA prior: one kernel = a sixth of an all-reduce latency
    assert 24e-6 - fused_allreduce_prior_s(24e-6) == pytest.approx(mla_layer_prior_s(24e-6) / 6, rel=1e-12)


def test_is_fused_term_by_base_name():
    assert is_fused_term(FUSED_B) and is_fused_term("fused_allreduce_latency_s")
    assert not is_fused_term("allreduce_latency_s") and not is_fused_term(EFF_H)


def _plan(actions: dict[str, str], fixed: dict[str, float]) -> pv.FoldPlan:
    return pv.FoldPlan({p: (provenance_entry(p, v), a) for p, (a, v) in
                        ((p, (a, fixed.get(p, 1.0))) for p, a in actions.items())}, dict(fixed), {}, {})


def test_after_the_fit_every_reset_fused_entry_takes_the_prior_of_what_it_inherited():
    plan = _plan({FUSED_B: pv.RESET, FUSED_H: pv.RESET, EFF_H: pv.RESET},
                 {FUSED_B: 24.7e-6, FUSED_H: 24.7e-6, EFF_H: 0.342})
    # FUSED_B inherited the fold's fitted unfused 22.6 us; FUSED_H's source was not fitted: the plan's value
    out = fused_prior_after_fit(plan, {FUSED_B: 22.6e-6, "layer_overhead_s@mla": 5e-6})
    assert out == pytest.approx({FUSED_B: 22.6e-6 * 5 / 6, FUSED_H: 24.7e-6 * 5 / 6, "layer_overhead_s@mla": 5e-6},
                                rel=1e-12)
    # the efficiency reset is not a fused term: untouched (not added)
    assert EFF_H not in out


def test_a_refit_fused_entry_is_not_touched():
    plan = _plan({FUSED_B: pv.REFIT}, {})
    assert fused_prior_after_fit(plan, {}) == {}
    assert fused_prior_after_fit(_plan({}, {}), {FUSED_B: 20e-6}) == {FUSED_B: 20e-6}


def test_the_plan_lines_say_which_rule_priced_a_reset_fused_entry_not_inherit():
    """The report's plan line of a reset fused entry names the rule that set its value after the fit (issue 33 round
    11): the one-kernel rule here, the kept TP sets' layer-matched one where ``matched`` has it; other resets keep
    their stated prior's name."""
    plan = _plan({FUSED_B: pv.RESET, FUSED_H: pv.RESET, EFF_H: pv.RESET},
                 {FUSED_B: 24.7e-6, FUSED_H: 24.7e-6, EFF_H: 0.342})
    assert "(inherit)" in plan.lines()[0]
    labels = fused_prior_labels(plan, {FUSED_B: 7.2e-6})
    assert labels == {FUSED_B: "the kept Blackwell TP sets' fixed time per layer, twin.fitting.layer_fixed_prior",
                      FUSED_H: "the fold's unfused latency less 1 kernel of 6, twin.fitting.fused_allreduce_prior"}
    plan.how.update(labels)
    plan.fixed.update(fused_prior_after_fit(plan, {}, {FUSED_B: 7.2e-6}))
    lines = plan.lines()
    assert lines[0].startswith(f"{FUSED_B}: {pv.RESET}, 7.2e-06 (the kept Blackwell TP sets' fixed time per layer")
    assert lines[1].startswith(f"{FUSED_H}: {pv.RESET}, 2.058e-05 (the fold's unfused latency less 1 kernel of 6")
    assert "inherit" not in lines[0] + lines[1]
