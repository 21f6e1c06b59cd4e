"""The Marlin stream prior where a fold keeps no Marlin path: the other generation's dense rate per SM
(twin.fitting.marlin_unkept_prior, called from twin.fitting.held_priors; issue 33, round 18)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.fitting_helpers import silicon_row
from twin.fitting import provenance as pv
from twin.fitting.held_priors import held_priors_after_fit
from twin.fitting.joint import FOLDS, with_deployments
from twin.fitting.marlin_stream_prior import marlin_stream_prior
from twin.fitting.marlin_unkept_prior import marlin_unkept_prior

INT4 = "moe_expert_efficiency@experts_int4"
FOLD = {"memory_efficiency": 0.96, "memory_efficiency@blackwell": 0.91, "allreduce_latency_s": 24e-6}
KIMI_INT4 = silicon_row("ki", "kimi-k2.5", "B200", 8, "0.15", "int4", fuse=True)
GPTOSS_H100 = silicon_row("g", "gpt-oss-120b", "H100-SXM", 4, "0.18", "mxfp4")
object.__setattr__(GPTOSS_H100, "row", SimpleNamespace(system="h100_sxm", model_path="openai/gpt-oss-120b",
                                                       published_client=True, vllm_version="0.18.0"))
LLAMA = silicon_row("l", "llama-3.1-70b", "B200", 4, "0.17", "fp8")
EV = with_deployments([KIMI_INT4, GPTOSS_H100, LLAMA])


def test_a_fold_that_keeps_no_marlin_path_streams_blackwells_at_hoppers_dense_rate_per_sm():
    silicon = pv.fold_plan("silicon", FOLDS["source"], EV, ())
    assert marlin_stream_prior(silicon, FOLD) == {}                  # no kept Marlin path speaks
    expected = (0.96 * 3.35e12 / 132) / (0.91 * 8.0e12 / 148)        # 0.495
    assert marlin_unkept_prior(silicon, FOLD, {}) == {INT4: pytest.approx(expected, rel=1e-12)}
    # the silicon source fold's own fractions (one fitted, Hopper's, carried to Blackwell): 0.4695
    assert marlin_unkept_prior(silicon, {"memory_efficiency": 0.9999}, {})[INT4] == pytest.approx(
        (3.35e12 / 132) / (8e12 / 148), rel=1e-12)
    resets, added = held_priors_after_fit(silicon, FOLD, (), [])
    assert resets[INT4] == pytest.approx(expected, rel=1e-12) and INT4 not in added


def test_a_fold_that_keeps_a_marlin_path_keeps_round_15s_carry():
    for plan in (pv.fold_plan("kimi", FOLDS["family"], EV, ()), pv.fold_plan("B200", FOLDS["GPU"], EV, ())):
        carried = marlin_stream_prior(plan, FOLD)
        assert INT4 in carried and marlin_unkept_prior(plan, FOLD, carried) == {}
        assert held_priors_after_fit(plan, FOLD, (), [])[0][INT4] == carried[INT4]


def test_a_fold_that_resets_no_marlin_stream_gets_nothing_and_hopper_is_never_below_its_dense_rate():
    assert marlin_unkept_prior(pv.fold_plan("llama", FOLDS["family"], EV, ()), FOLD, {}) == {}
    reset = SimpleNamespace(actions={"moe_expert_efficiency@hopper+experts_mxfp4": (None, pv.RESET)})
    assert marlin_unkept_prior(reset, FOLD, {}) == {"moe_expert_efficiency@hopper+experts_mxfp4": 1.0}
