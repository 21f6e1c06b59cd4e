"""The held-out prior of the Marlin MoE path's decode stream rate, carried between generations at equal bytes per SM
per second, and the MLA layer prior net of the norms a fused all-reduce absorbs (twin.fitting.marlin_stream_prior,
twin.fitting.held_priors; issue 33, round 15)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.fitting_helpers import silicon_row
from twin.fitting import provenance as pv
from twin.fitting.held_priors import MLA_KEY, held_priors_after_fit, mla_layer_prior_s, mla_servers_fuse
from twin.fitting.joint import FOLDS, with_deployments
from twin.fitting.marlin_stream_prior import (REFERENCE_GPU, carried_stream_efficiency, dense_rate_per_sm,
                                              marlin_stream_prior)

INT4 = "moe_expert_efficiency@experts_int4"
FOLD = {"memory_efficiency": 0.96, "memory_efficiency@blackwell": 0.91, "allreduce_latency_s": 24e-6}


KIMI_INT4 = silicon_row("ki", "kimi-k2.5", "B200", 8, "0.15", "int4", fuse=True)
KIMI_FP4 = silicon_row("kf", "kimi-k2.5", "B200", 4, "0.17", "nvfp4", fuse=True)
GPTOSS_H100 = silicon_row("g", "gpt-oss-120b", "H100-SXM", 4, "0.18", "mxfp4")
# the Hopper Marlin path's evidence is the H100 gpt-oss silicon rows (twin.fitting.provenance): its row's labels
object.__setattr__(GPTOSS_H100, "row", SimpleNamespace(system="h100_sxm", model_path="openai/gpt-oss-120b",
                                                       published_client=True, vllm_version="0.18.0"))
LLAMA = silicon_row("l", "llama-3.1-70b", "B200", 4, "0.17", "fp8")


def test_the_dense_rate_per_sm_is_the_datasheet_bandwidth_at_the_folds_fraction_over_the_sms():
    assert REFERENCE_GPU == {"hopper": (3.35e12, 132), "blackwell": (8.0e12, 148)}
    assert dense_rate_per_sm("hopper", FOLD) == pytest.approx(0.96 * 3.35e12 / 132, rel=1e-12)
    assert dense_rate_per_sm("blackwell", FOLD) == pytest.approx(0.91 * 8.0e12 / 148, rel=1e-12)
    # a generation without its own fraction takes the unscoped one
    assert dense_rate_per_sm("blackwell", {"memory_efficiency": 0.96}) == pytest.approx(0.96 * 8e12 / 148, rel=1e-12)


def test_hoppers_dense_rate_per_sm_carried_to_blackwell_is_about_half_and_never_above_one():
    expected = (0.96 * 3.35e12 / 132) / (0.91 * 8.0e12 / 148)          # 0.495
    assert carried_stream_efficiency(1.0, "hopper", "blackwell", FOLD) == pytest.approx(expected, rel=1e-12)
    assert 0.49 < expected < 0.50
    assert carried_stream_efficiency(0.8, "hopper", "blackwell", FOLD) == pytest.approx(0.8 * expected, rel=1e-12)
    assert carried_stream_efficiency(1.0, "blackwell", "hopper", FOLD) == 1.0         # capped at the dense rate


def test_the_kimi_fold_carries_the_kept_hopper_marlin_path_and_a_fold_without_it_stays_flat():
    ev = with_deployments([KIMI_INT4, GPTOSS_H100, LLAMA])
    kimi = pv.fold_plan("kimi", FOLDS["family"], ev, ())
    assert kimi.fixed[INT4] == 1.0                                       # the plan's flat prior, before the fit
    expected = carried_stream_efficiency(1.0, "hopper", "blackwell", FOLD)
    assert marlin_stream_prior(kimi, FOLD) == {INT4: pytest.approx(expected, rel=1e-12)}
    held = with_deployments([KIMI_INT4])
    assert held_priors_after_fit(kimi, FOLD, (), held)[0][INT4] == pytest.approx(expected, rel=1e-12)
    # the B200 fold holds the INT4 rows out and keeps the H100 ones: the same carry at its own fractions
    b200 = pv.fold_plan("B200", FOLDS["GPU"], ev, ())
    assert marlin_stream_prior(b200, {"memory_efficiency": 0.96}) == {
        INT4: pytest.approx((3.35e12 / 132) / (8e12 / 148), rel=1e-12)}
    # the silicon source fold holds both Marlin paths' rows out: no path speaks, the flat prior stays
    silicon = pv.fold_plan("silicon", FOLDS["source"], ev, ())
    assert INT4 in silicon.fixed and marlin_stream_prior(silicon, FOLD) == {}
    # a fold that keeps the INT4 rows resets nothing here
    assert marlin_stream_prior(pv.fold_plan("llama", FOLDS["family"], ev, ()), FOLD) == {}


def test_the_mla_prior_nets_out_the_two_norms_a_fused_server_absorbs():
    assert mla_layer_prior_s(24e-6, fused=True) == pytest.approx(4 * 2 * 24e-6 / 12, rel=1e-12)   # 16 us
    assert mla_layer_prior_s(24e-6) == pytest.approx(6 * 2 * 24e-6 / 12, rel=1e-12)              # 24 us
    assert mla_servers_fuse(with_deployments([KIMI_INT4, KIMI_FP4, LLAMA]))    # the MLA rows fuse; Llama is ignored
    unfused = silicon_row("k2", "kimi-k2.5", "B200", 8, "0.15", "int4")
    assert not mla_servers_fuse(with_deployments([KIMI_INT4, unfused]))
    assert not mla_servers_fuse(with_deployments([LLAMA])) and not mla_servers_fuse([])
    ev = with_deployments([KIMI_FP4, LLAMA])
    kimi = pv.fold_plan("kimi", FOLDS["family"], ev, ())
    held = with_deployments([KIMI_FP4])
    assert held_priors_after_fit(kimi, FOLD, (), held)[0][MLA_KEY] == pytest.approx(16e-6, rel=1e-12)
    assert held_priors_after_fit(kimi, FOLD, (), [])[0][MLA_KEY] == pytest.approx(24e-6, rel=1e-12)
