"""A GPU generation no training row comes from (issue 33, round 8): its host terms take what the other
generations' rows show (twin.fitting.provenance.host_prior), not 0; a reset KV read rate takes the fold's weights'
rate (its stated prior)."""

from __future__ import annotations

import math

import pytest

from tests.fitting_helpers import one_hopper_host_reading, provenance_entry
from twin.fitting import provenance as pv


@pytest.fixture()
def readings(monkeypatch):
    """One reading on Hopper, read off the rows named 'h100'."""
    one_hopper_host_reading(monkeypatch, 0.9e-3)


def test_a_host_term_of_a_generation_states_the_host_prior():
    assert pv._stated_prior("eager_layer_host_s", "eager_layer_host_s@blackwell", {}) == pv.HOST
    # the MoE layers' extra too (round 9: its path's extra ops at the per-layer prior's per-op time,
    # twin.fitting.launch_prior; tests/test_fitting_launch_prior.py)
    assert pv._stated_prior("eager_moe_layer_host_s", "eager_moe_layer_host_s@blackwell", {}) == pv.HOST
    assert pv._stated_prior("kv_memory_efficiency", "kv_memory_efficiency@hopper+kv_fp8", {}) == pv.INHERIT


def test_a_held_out_generation_takes_the_other_generations_reading(readings):
    entries = [provenance_entry("eager_layer_host_s@blackwell", 0.84e-3)]
    held = ["eager_layer_host_s@blackwell"]
    # Blackwell held out, the Hopper rows kept: Hopper's reading
    assert pv.host_prior("eager_layer_host_s", "blackwell", entries, held, [("b200", None)]) == 0.9e-3
    # the rows of the reading held out too: nothing measured is left, the flat prior 0
    assert pv.host_prior("eager_layer_host_s", "blackwell", entries, held, [("b200", None), ("h100", None)]) == 0.0
    # a generation's own value never predicts itself; another's embedded value does, pooled (geometric mean)
    assert pv.host_prior("eager_layer_host_s", "hopper", entries, (), [("h100", None)]) == 0.84e-3
    assert pv.host_prior("eager_layer_host_s", "ampere", entries, (), []) == pytest.approx(
        math.sqrt(0.84e-3 * 0.9e-3), rel=1e-12)
    # an expert path's entry of the name is not a generation's host time
    assert pv.host_prior("eager_layer_host_s", "ampere", [provenance_entry("eager_layer_host_s@hopper+experts_fp8", 5e-3)],
                         (), [("h100", None)]) == 0.0


def test_the_fold_plan_resets_a_held_out_generations_host_term_to_the_others_reading(readings, monkeypatch):
    entries = [provenance_entry("eager_layer_host_s@blackwell", 0.84e-3)]
    monkeypatch.setitem(pv.DECLARED_EVIDENCE, "eager_layer_host_s@blackwell", ("test", lambda c, d: c == "b200"))
    evidence = [("h100", None), ("b200", None)]
    plan = pv.fold_plan("B", lambda c: c[0].upper(), evidence, (), entries=entries)
    assert plan.actions["eager_layer_host_s@blackwell"][1] == pv.RESET
    assert plan.fixed == {"eager_layer_host_s@blackwell": 0.9e-3}
    assert plan.lines() == ["eager_layer_host_s@blackwell: reset to its stated prior, 0.0009 (host) (test; "
                            "evidence: test)"]
    # refit where the fold fits it: its weak prior pulls towards the reading, it starts at its embedded value
    refit = pv.fold_plan("B", lambda c: c[0].upper(), evidence, ("eager_layer_host_s@blackwell",), entries=entries)
    assert refit.prior == {"eager_layer_host_s@blackwell": 0.9e-3}
    assert refit.start == {"eager_layer_host_s@blackwell": 0.84e-3}


def test_a_reset_kv_read_rate_takes_the_folds_reset_weights_rate(monkeypatch):
    entries = [pv.Entry("memory_efficiency", 0.978, 0.8, "test"), provenance_entry("kv_memory_efficiency@hopper+kv_fp8", 0.3)]
    for key in ("memory_efficiency", "kv_memory_efficiency@hopper+kv_fp8"):
        monkeypatch.setitem(pv.DECLARED_EVIDENCE, key, ("test", lambda c, d: c == "h100"))
    plan = pv.fold_plan("H", lambda c: c[0].upper(), [("h100", None)], (), entries=entries)
    assert plan.fixed == {"memory_efficiency": 0.8, "kv_memory_efficiency@hopper+kv_fp8": 0.8}
