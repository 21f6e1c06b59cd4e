"""A held-out Marlin expert path's FLOP efficiency is predicted from the other Marlin paths' values at equal FLOPs
per SM clock (twin.fitting.expert_path_prior; issue 33, round 8)."""

from __future__ import annotations

import pytest

from twin.fitting import provenance as pv
from twin.fitting.expert_path_prior import MARLIN_PATHS, MMA_FLOPS_PER_SM_CLOCK, carried_efficiency, marlin_path_prior

INT4 = "moe_expert_compute_efficiency@experts_int4"
MXFP4_H = "moe_expert_compute_efficiency@hopper+experts_mxfp4"
FP8_H = "moe_expert_compute_efficiency@hopper+experts_fp8"


def _entries(int4=0.2, mxfp4=0.45, fp8=0.18):
    return [pv.Entry(INT4, int4, pv.POOLED, "EXPERT_FORMAT_TERMS"),
            pv.Entry(MXFP4_H, mxfp4, pv.POOLED, "GENERATION_EXPERT_TERMS"),
            pv.Entry(FP8_H, fp8, pv.POOLED, "GENERATION_EXPERT_TERMS")]


def test_the_dense_mma_width_doubles_from_hopper_to_blackwell_and_marlin_does_not_follow():
    assert MMA_FLOPS_PER_SM_CLOCK == {"hopper": 4096, "blackwell": 8192}
    # the datasheets' dense bf16 peaks: H100 SXM 132 SMs at 1.83 GHz, 989 TFLOP/s
    assert 132 * 1.83e9 * MMA_FLOPS_PER_SM_CLOCK["hopper"] == pytest.approx(989e12, rel=0.01)
    assert carried_efficiency(0.171, "blackwell", "hopper") == pytest.approx(0.342, rel=1e-12)
    assert carried_efficiency(0.35, "hopper", "blackwell") == pytest.approx(0.175, rel=1e-12)
    assert carried_efficiency(0.3, "hopper", "hopper") == 0.3
    assert MARLIN_PATHS == {INT4: "blackwell", MXFP4_H: "hopper"}


def test_a_held_out_marlin_path_takes_the_other_marlin_paths_value_carried_to_its_generation():
    es = _entries()
    assert marlin_path_prior(MXFP4_H, es, {MXFP4_H}) == pytest.approx(0.4, rel=1e-12)     # 0.2 x 8192 / 4096
    assert marlin_path_prior(INT4, es, {INT4}) == pytest.approx(0.225, rel=1e-12)        # 0.45 x 4096 / 8192
    # not a Marlin path (block FP8 on wgmma), or no other Marlin path left: no Marlin prior
    assert marlin_path_prior(FP8_H, es, {FP8_H}) is None
    assert marlin_path_prior(MXFP4_H, es, {MXFP4_H, INT4}) is None
    assert marlin_path_prior(MXFP4_H, es[1:], {MXFP4_H}) is None


def test_a_fold_resets_a_marlin_path_to_the_marlin_prior_and_the_others_to_the_pooled_one(monkeypatch):
    for key, group in ((INT4, "kimi"), (MXFP4_H, "gpt-oss"), (FP8_H, "minimax")):
        monkeypatch.setitem(pv.DECLARED_EVIDENCE, key, (group, lambda c, _d, g=group: c == g))
    evidence = [(g, None) for g in ("kimi", "gpt-oss", "minimax")]
    es = _entries()
    oss = pv.fold_plan("gpt-oss", lambda c: c, evidence, (), entries=es)
    assert oss.fixed == pytest.approx({MXFP4_H: 0.4}, rel=1e-12) and oss.actions[MXFP4_H][1] == pv.RESET
    kimi = pv.fold_plan("kimi", lambda c: c, evidence, (), entries=es)
    assert kimi.fixed == pytest.approx({INT4: 0.225}, rel=1e-12)
    # the block-FP8 path keeps round 7's pooled prior: every other path's value, as embedded
    minimax = pv.fold_plan("minimax", lambda c: c, evidence, (), entries=es)
    assert minimax.fixed == pytest.approx({FP8_H: (0.2 * 0.45) ** 0.5}, rel=1e-12)


def test_an_inheriting_reset_follows_the_folds_fitted_unfused_latency():
    """Round 8 (twin.fitting.inherit_fitted): a held-out path's fused all-reduce reset to INHERIT takes the value
    the fold FITTED for the unfused latency (generation-scoped first), not the embedded start the plan read."""
    from twin.fitting.inherit_fitted import inherited_after_fit
    fused_b = pv.Entry("fused_allreduce_latency_s@blackwell+experts_mxfp4", 11e-6, pv.INHERIT, "GENERATION_EXPERT_TERMS")
    fused_h = pv.Entry("fused_allreduce_latency_s@hopper+experts_mxfp4", 18e-6, pv.INHERIT, "GENERATION_EXPERT_TERMS")
    eff = pv.Entry(MXFP4_H, 0.35, pv.POOLED, "GENERATION_EXPERT_TERMS")
    plan = pv.FoldPlan({e.parameter: (e, pv.RESET) for e in (fused_b, fused_h, eff)},
                       {fused_b.parameter: 24.7e-6, fused_h.parameter: 24.7e-6, MXFP4_H: 0.342}, {}, {})
    params = dict(plan.fixed) | {"allreduce_latency_s": 20.3e-6, "step_overhead_s": 2e-3}
    assert inherited_after_fit(plan, params) == {fused_b.parameter: 20.3e-6, fused_h.parameter: 20.3e-6}
    # a fitted generation value comes first; a source the plan itself reset keeps the plan's value
    assert inherited_after_fit(plan, params | {"allreduce_latency_s@blackwell": 15e-6}) == {
        fused_b.parameter: 15e-6, fused_h.parameter: 20.3e-6}
    plan.fixed["allreduce_latency_s"] = 8e-6
    assert inherited_after_fit(plan, params) == {}
    # not fitted at all (nothing to fit in the fold): the plan's value stands
    assert inherited_after_fit(plan, {fused_b.parameter: 24.7e-6}) == {}
