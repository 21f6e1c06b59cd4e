"""A held-out fused all-reduce priced from the kept Blackwell TP sets' fixed time per decoder layer
(twin.fitting.layer_fixed_prior; issue 33, round 11)."""

from types import SimpleNamespace as NS

import pytest

from tests.fitting_helpers import provenance_entry
from twin.fitting import provenance as pv
from twin.fitting.fused_allreduce_prior import fused_prior_after_fit, fused_prior_labels
from twin.cost.default_terms import NO_FLOOR_LINK_S
from twin.fitting.layer_fixed_prior import (REFERENCE_GROUP, fold_link_s, has_link_part, kept_layer_fixed_s,
                                            kept_link_prior, kept_sharded_fixed_s, layer_matched_priors,
                                            light_step_fixed_s, matched_fused_latency_s, tp_split)
from twin.fitting.link_prior import TERM

FUSED_B = "fused_allreduce_latency_s@blackwell+experts_mxfp4"
FUSED_H = "fused_allreduce_latency_s@hopper+experts_mxfp4"
G1, G2 = REFERENCE_GROUP, (8192, 1024, 8)


def test_tp_split_recovers_fixed_divided_and_allreduce_parts_exactly():
    truth = {G1: (2.4, 1.1), G2: (2.8, 2.0)}          # K, w per group; A = 0.4
    points = [(tp, g, k + w / tp + (0.4 if tp > 1 else 0.0)) for g, (k, w) in truth.items() for tp in (1, 2, 4, 8)]
    groups, a, rms = tp_split(points)
    assert a == pytest.approx(0.4, abs=1e-12) and rms < 1e-12
    assert {g: kw[0] for g, kw in groups.items()} == pytest.approx({G1: 2.4, G2: 2.8}, abs=1e-12)
    assert {g: kw[1] for g, kw in groups.items()} == pytest.approx({G1: 1.1, G2: 2.0}, abs=1e-12)


def test_matched_latency_is_the_link_plus_the_missing_fixed_time_per_allreduce():
    # 36 layers at 62 us each = 2.232 ms; 2.144 ms already charged: 88 us over 72 all-reduces, plus the 6 us link
    assert matched_fused_latency_s(62e-6, 36, 2.144e-3, 6e-6) == pytest.approx(6e-6 + 88e-6 / 72, rel=1e-12)
    # a step already paying more than the layers read: the all-reduce costs its link part, no less
    assert matched_fused_latency_s(50e-6, 36, 2.144e-3, 6e-6) == pytest.approx(6e-6, rel=1e-12)


def test_light_step_fixed_time_takes_the_most_specific_scope():
    params = {"step_overhead_s": 2e-3, "per_seq_overhead_s": 10e-6, "layer_token_overhead_s": 0.1e-6,
              "layer_token_overhead_s@blackwell": 0.2e-6}
    scope = "blackwell+experts_mxfp4"
    assert light_step_fixed_s(params, scope, 36, 4) == pytest.approx(2e-3 + 4 * (10e-6 + 36 * 0.2e-6), rel=1e-12)
    params |= {"layer_token_overhead_s@" + scope: 0.3e-6, "layer_token_decode_share@" + scope: 0.0}
    assert light_step_fixed_s(params, scope, 36, 4) == pytest.approx(2e-3 + 4 * 10e-6, rel=1e-12)


def _row(model: str, tp: int, group: tuple, tpot_ms: float, system: str = "b200_sxm", **kw):
    isl, osl, conc = group
    fields = dict(model_path=model, system=system, precision="fp4", vllm_version="0.19.0", measured="2026-04-22",
                  mode="agg", moe_ep=1, attention_dp=1, pp=1, isl=isl, osl=osl, concurrency=conc, tp=tp,
                  tpot_ms=tpot_ms) | kw
    return NS(row=NS(**fields))


def _dep(gpu: str, layers: int, experts: str | None = None):
    return NS(gpu=gpu, model=NS(num_hidden_layers=layers, is_moe=experts is not None),
              weight_formats=NS(routed_experts=experts) if experts else None)


def _set(model: str, layers: int, k_ms: float, gpu: str = "b200", tps=(1, 2, 4, 8), group=REFERENCE_GROUP):
    return [(_row(model, tp, group, k_ms + 4.0 / tp + (0.3 if tp > 1 else 0.0), system=gpu + "_sxm"),
             _dep(gpu, layers)) for tp in tps]


def test_kept_sets_give_k_per_layer_only_with_tp1_and_two_larger_tps_in_the_reference_group():
    evidence = (_set("a", 80, 5.6) + _set("b", 62, 3.72) + _set("h", 80, 9.0, gpu="h100")
                + _set("no-tp1", 40, 3.0, tps=(2, 4, 8)) + _set("other-group", 40, 3.0, group=G2)
                + _set("two-tp", 40, 3.0, tps=(1, 8)))
    assert kept_layer_fixed_s(evidence, "blackwell") == pytest.approx([5.6e-3 / 80, 3.72e-3 / 62], rel=1e-9)
    assert kept_layer_fixed_s(evidence, "hopper") == pytest.approx([9.0e-3 / 80], rel=1e-9)
    # loaded rows (CONC > 8) are not read
    loaded = [(_row("c", tp, (1024, 1024, 64), 9.0 + 1.0 / tp), _dep("b200", 40)) for tp in (1, 2)]
    assert kept_layer_fixed_s(loaded, "blackwell") == []


def _plan(actions: dict[str, str], fixed: dict[str, float]) -> pv.FoldPlan:
    return pv.FoldPlan({p: (provenance_entry(p, fixed.get(p, 1.0)), a) for p, a in actions.items()},
                       dict(fixed), {}, {})


PARAMS = {"step_overhead_s": 2.0e-3, "per_seq_overhead_s": 10e-6, "layer_token_overhead_s@blackwell": 0.0}


def test_the_reset_blackwell_fused_entry_takes_the_matched_prior_hopper_keeps_the_kernel_rule():
    plan = _plan({FUSED_B: pv.RESET, FUSED_H: pv.RESET}, {FUSED_B: 24e-6, FUSED_H: 24e-6})
    kept = _set("a", 80, 5.6) + _set("b", 62, 3.72) + _set("c", 60, 3.9)      # 70, 60, 65 us per layer: median 65
    held = [(None, _dep("b200", 36, "mxfp4")), (None, _dep("h100", 36, "mxfp4"))]
    matched = layer_matched_priors(plan, PARAMS, kept, held)
    step_s = 2.0e-3 + 4 * 10e-6
    assert matched == pytest.approx({FUSED_B: 6e-6 + (36 * 65e-6 - step_s) / 72}, rel=1e-9)
    out = fused_prior_after_fit(plan, {FUSED_B: 22e-6, FUSED_H: 22e-6}, matched)
    assert out == pytest.approx({FUSED_B: matched[FUSED_B], FUSED_H: 22e-6 * 5 / 6}, rel=1e-12)


def test_no_kept_set_or_no_held_model_on_the_path_leaves_the_kernel_rule():
    plan = _plan({FUSED_B: pv.RESET}, {FUSED_B: 24e-6})
    held = [(None, _dep("b200", 36, "mxfp4"))]
    assert layer_matched_priors(plan, PARAMS, [], held) == {}
    assert layer_matched_priors(plan, PARAMS, _set("a", 80, 5.6), [(None, _dep("b200", 36, "nvfp4"))]) == {}
    assert layer_matched_priors(_plan({FUSED_B: pv.REFIT}, {}), PARAMS, _set("a", 80, 5.6), held) == {}
    assert fused_prior_after_fit(plan, {FUSED_B: 24e-6}, {}) == pytest.approx({FUSED_B: 20e-6}, rel=1e-12)


def test_a_fold_that_resets_the_link_part_leaves_the_kernel_rule():
    """Issue 33 round 11 (twin.fitting.link_prior): the matched prior adds Blackwell's link part; a fold holding out
    the rows it was read off has none, so its reset fused entry takes the one-kernel rule."""
    link = "unsharded_allreduce_link_s@blackwell"
    kept = _set("a", 80, 5.6) + _set("b", 62, 3.72) + _set("c", 60, 3.9)
    held = [(None, _dep("b200", 36, "mxfp4"))]
    assert FUSED_B in layer_matched_priors(_plan({FUSED_B: pv.RESET}, {FUSED_B: 24e-6}), PARAMS, kept, held)
    plan = _plan({FUSED_B: pv.RESET, link: pv.RESET}, {FUSED_B: 24e-6, link: 1.0})
    assert layer_matched_priors(plan, PARAMS, kept, held) == {}
    assert fused_prior_after_fit(plan, {FUSED_B: 24e-6}, {}) == pytest.approx({FUSED_B: 20e-6}, rel=1e-12)


def test_a_reset_link_part_is_read_again_off_the_evidence_sets_the_fold_keeps():
    """kept_link_prior (twin.fitting.link_prior's term): the all-reduce part A of each kept evidence set (B200 gpt-oss /
    MiniMax NVFP4) over its all-reduces per step (MiniMax-M2: three per layer, its q / k norms span the heads)."""
    minimax = NS(num_hidden_layers=62, qk_norm_allreduce=True, is_moe=True)
    kept = [(_row("MiniMaxAI/MiniMax-M2.5", tp, REFERENCE_GROUP, 3.72 + 4.0 / tp + (0.3 if tp > 1 else 0.0)),
             NS(gpu="b200", model=minimax, weight_formats=None)) for tp in (1, 4, 8)]
    kept += _set("meta-llama/Llama-3.1-70B-Instruct", 80, 5.6)      # not its evidence: not read
    reset = _plan({TERM: pv.RESET}, {TERM: NO_FLOOR_LINK_S})
    assert fold_link_s(reset, "blackwell") is None                   # the no-floor prior
    reread = kept_link_prior(reset, kept)
    assert reread == {TERM: pytest.approx(0.3e-3 / 186, rel=1e-9)}
    reset.fixed.update(reread)
    assert fold_link_s(reset, "blackwell") == pytest.approx(0.3e-3 / 186, rel=1e-9)
    # no evidence set kept (round 16): the exchange-only prior, NCCL's small all-reduce over 2 GPUs (7.8 us)
    assert kept_link_prior(reset, kept[3:]) == {TERM: pytest.approx(7.8e-6, rel=1e-12)}
    assert kept_link_prior(_plan({TERM: pv.KEPT}, {}), kept) == {}   # kept entry: the embedded value stands


def test_sets_without_tp1_give_k_plus_a_per_layer_over_three_sharded_tp_sizes():
    """Round 16: a generation with no link part (Hopper) reads its sets of TP 2 / 4 / 8 rows: TPOT = (K + A) + w / TP,
    _set's rows being K + 4 / TP + 0.3 at TP > 1, so K + A = K + 0.3 ms."""
    evidence = (_set("h", 80, 6.0, gpu="h100", tps=(2, 4, 8)) + _set("h-two", 40, 3.0, gpu="h100", tps=(1, 2, 8))
                + _set("h-tp1", 60, 3.0, gpu="h100"))
    # the TP 1 row of "h-tp1" is not read (it pays no all-reduce): K + A over its TP 2 / 4 / 8 rows; "h-two" has two
    assert kept_sharded_fixed_s(evidence, "hopper") == pytest.approx([6.3e-3 / 80, 3.3e-3 / 60], rel=1e-9)
    assert has_link_part("blackwell") and not has_link_part("hopper")


def test_the_reset_hopper_fused_entry_takes_the_sharded_sets_fixed_time_with_no_link_part():
    plan = _plan({FUSED_B: pv.RESET, FUSED_H: pv.RESET}, {FUSED_B: 24e-6, FUSED_H: 24e-6})
    kept = _set("h", 80, 6.0, gpu="h100", tps=(2, 4, 8))            # K + A = 6.3 ms over 80 layers
    held = [(None, _dep("b200", 36, "mxfp4")), (None, _dep("h100", 36, "mxfp4"))]
    matched = layer_matched_priors(plan, PARAMS, kept, held)
    step_s = 2.0e-3 + 4 * 10e-6
    assert matched == pytest.approx({FUSED_H: (36 * 6.3e-3 / 80 - step_s) / 72}, rel=1e-9)   # no Blackwell set kept
    assert fused_prior_labels(plan, matched)[FUSED_H].startswith("the kept Hopper TP sets'")
    assert fused_prior_labels(plan, matched)[FUSED_B].startswith("the fold's unfused latency")
    # a Hopper set with two TP sizes above 1 is not read; without a sharded set the one-kernel rule stays
    assert layer_matched_priors(plan, PARAMS, _set("h", 80, 6.0, gpu="h100", tps=(1, 2, 8)), held) == {}
