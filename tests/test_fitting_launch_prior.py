"""A held-out eager MoE floor from kernel launches (issue 33, round 9; twin.fitting.launch_prior): a MoE layer's
extra host-dispatched ops at the per-op time of the fold's per-layer host prior, per expert path where the fold
resets the generation's MoE floor; 0 where no per-layer reading is left."""

from __future__ import annotations

import pytest

from tests.fitting_helpers import one_hopper_host_reading, provenance_entry
from twin.fitting import launch_prior as lp
from twin.fitting import provenance as pv


@pytest.fixture()
def readings(monkeypatch):
    """One per-layer reading on Hopper (1.6 ms: 0.1 ms per op of a 16-op dense layer), read off the rows 'h100'."""
    one_hopper_host_reading(monkeypatch, 1.6e-3)


def test_the_counts_and_the_per_op_time():
    assert lp.DENSE_LAYER_OPS == 16
    assert lp.per_op_s(1.6e-3) == pytest.approx(0.1e-3, rel=1e-12)
    # the extra ops over the dense layer, never below 0 (gpt-oss's MXFP4 layer issues fewer ops than a dense FP8 one)
    assert lp.moe_extra_s(1.6e-3, 27) == pytest.approx(11 * 0.1e-3, rel=1e-12)
    assert lp.moe_extra_s(1.6e-3, 11) == 0.0
    assert lp.moe_floor_prior_s(1.6e-3) == pytest.approx((lp.GENERIC_MOE_LAYER_OPS - 16) * 0.1e-3, rel=1e-12)
    assert lp.moe_floor_prior_s(0.0) == 0.0
    # every counted path's layer names what was counted
    assert all(ops > 0 and what for ops, what in lp.PATH_LAYER_OPS.values())


def test_the_moe_floor_prior_follows_the_per_layer_prior(readings):
    entries = [provenance_entry("eager_layer_host_s@blackwell", 0.84e-3), provenance_entry("eager_moe_layer_host_s@blackwell", 1.15e-3)]
    held = ["eager_layer_host_s@blackwell", "eager_moe_layer_host_s@blackwell"]
    assert pv.host_prior("eager_moe_layer_host_s", "blackwell", entries, held, [("b200", None)]) == pytest.approx(
        (lp.GENERIC_MOE_LAYER_OPS - 16) * 0.1e-3, rel=1e-12)
    # the per-layer reading's rows held out too: no per-op time, no MoE prior
    assert pv.host_prior("eager_moe_layer_host_s", "blackwell", entries, held,
                         [("b200", None), ("h100", None)]) == 0.0


def test_a_fold_resetting_the_moe_floor_gives_each_counted_path_its_prior(readings, monkeypatch):
    entries = [provenance_entry("eager_layer_host_s@blackwell", 0.84e-3), provenance_entry("eager_moe_layer_host_s@blackwell", 1.15e-3)]
    for key in ("eager_layer_host_s@blackwell", "eager_moe_layer_host_s@blackwell"):
        monkeypatch.setitem(pv.DECLARED_EVIDENCE, key, ("test", lambda c, d: c == "b200"))
    evidence = [("h100", None), ("b200", None)]
    plan = pv.fold_plan("B", lambda c: c[0].upper(), evidence, (), entries=entries)
    blackwell = {fmt: ops for (gen, fmt), (ops, _) in lp.PATH_LAYER_OPS.items() if gen == "blackwell"}
    assert plan.fixed == pytest.approx({
        "eager_layer_host_s@blackwell": 1.6e-3,
        "eager_moe_layer_host_s@blackwell": (lp.GENERIC_MOE_LAYER_OPS - 16) * 0.1e-3,
        **{f"eager_moe_layer_host_s@blackwell+experts_{fmt}": max(0, ops - 16) * 0.1e-3
           for fmt, ops in blackwell.items()}}, rel=1e-12)
    assert plan.fixed["eager_moe_layer_host_s@blackwell+experts_fp8"] == pytest.approx(11 * 0.1e-3, rel=1e-12)
    # a fold that refits the MoE floor: its weak prior pulls towards the generic count, no path is held
    refit = pv.fold_plan("B", lambda c: c[0].upper(), evidence, ("eager_moe_layer_host_s@blackwell",),
                         entries=entries)
    assert refit.prior == pytest.approx({"eager_moe_layer_host_s@blackwell": 5 * 0.1e-3}, rel=1e-12)
    assert not any("+experts_" in k for k in refit.fixed)


def test_the_path_priors_are_simulated_on_their_paths_only():
    from twin.fitting.joint import all_cases, with_deployments
    from twin.fitting.scoped import params_for
    # the fold's values as params: a B200 deployment on the INT4 path sees its path's value, another B200 MoE one
    # the generation's, an H100 one neither
    params = {"eager_moe_layer_host_s@blackwell": 1e-4, "eager_moe_layer_host_s@blackwell+experts_int4": 5e-4}
    seen = {}
    for _, d in with_deployments(all_cases(None, silicon_every=16, sources=("silicon",))):
        if d.model.is_moe:
            key = (d.gpu.name, "int4" in str(d.weight_formats.routed_experts))
            seen.setdefault(key, params_for(params, d).get("eager_moe_layer_host_s"))
    assert seen[("B200", True)] == 5e-4 and seen[("B200", False)] == 1e-4
    assert seen[("H100-SXM", False)] is None


def test_the_readings_check_predicts_each_group_from_its_count():
    from benchmark_module import load_benchmark
    check = load_benchmark("eager_floor_by_generation")
    # a dense group: 16 ops, the reading itself; a counted path: its count; a path without one: the generic count
    assert check.predicted_layer_ms(0.92, "B200", "llama", None) == (16, pytest.approx(0.92, rel=1e-12))
    assert check.predicted_layer_ms(0.92, "B200", "minimax", "fp8") == (27, pytest.approx(27 * 0.0575, rel=1e-12))
    assert check.predicted_layer_ms(0.92, "H100-SXM", "minimax", "fp8") == (27, pytest.approx(1.5525, rel=1e-12))
    assert check.predicted_layer_ms(1.6, "B200", "mixtral", "bf16")[0] == lp.GENERIC_MOE_LAYER_OPS
