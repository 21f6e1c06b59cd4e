"""The stated priors a fold applies after its fit for the MLA layer time and a sync server's host time
(twin.fitting.held_priors; issue 33, round 9)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.fitting_helpers import fake_fold_fit, silicon_row
from twin.fitting import joint
from twin.fitting import provenance as pv
from twin.fitting.held_priors import (MLA_KEY, SYNC_KEY, SYNC_SEQ_HOST_PRIOR_S, held_priors_after_fit,
                                      mla_layer_prior_s)
from twin.fitting.joint import FOLDS, run_fold, with_deployments


def test_the_mla_prior_is_six_kernels_at_a_gqa_layers_time_per_kernel():
    # 6 extra kernels x (2 all-reduces x 21.6 us per layer / 12 kernels per GQA layer) = 21.6 us per layer
    assert mla_layer_prior_s(21.6e-6) == pytest.approx(21.6e-6, rel=1e-12)
    assert mla_layer_prior_s(12e-6) == pytest.approx(6 * 2 * 12e-6 / 12, rel=1e-12)


def test_the_kimi_fold_takes_it_from_its_fitted_allreduce_latency_and_the_others_keep_theirs():
    ev = with_deployments([silicon_row("k", "kimi-k2.5", "B200", 8, "0.17", "nvfp4"),
                           silicon_row("l", "llama-3.1-70b", "B200", 4, "0.17", "fp8")])
    kimi = pv.fold_plan("kimi", FOLDS["family"], ev, ())
    assert kimi.fixed[MLA_KEY] == 0.0                       # the plan's flat prior, before the fit
    resets, added = held_priors_after_fit(kimi, {"allreduce_latency_s": 20e-6}, ())
    assert resets == {MLA_KEY: pytest.approx(20e-6, rel=1e-12)} and added == {}
    # not fitted: the embedded (inference-perf) all-reduce latency, 24.7 us
    assert held_priors_after_fit(kimi, {}, ())[0][MLA_KEY] == pytest.approx(24.7e-6, rel=1e-9)
    llama = pv.fold_plan("llama", FOLDS["family"], ev, ())
    assert held_priors_after_fit(llama, {"allreduce_latency_s": 20e-6}, ()) == ({}, {})


def test_a_fold_without_a_sync_server_adds_the_reenacted_host_time_to_its_async_value():
    ev = with_deployments([silicon_row("q", "qwen3-32b", "H100-SXM", 2, "0.12"),
                           silicon_row("l", "llama-3.1-70b", "H100-SXM", 8, "0.14")])
    qwen = pv.fold_plan("qwen3", FOLDS["family"], ev, ("per_seq_overhead_s", SYNC_KEY))
    fitted = {"per_seq_overhead_s": 5e-6}                  # the fold holds the @sync term (no sync training row)
    assert held_priors_after_fit(qwen, fitted, ("per_seq_overhead_s", SYNC_KEY)) == (
        {}, {SYNC_KEY: pytest.approx(5e-6 + 11.0e-6, rel=1e-12)})
    assert SYNC_SEQ_HOST_PRIOR_S == 11.0e-6      # vLLM 0.12's engine core timed (benchmarks/sync_engine_host.py)
    # a fitted @sync value (sync servers among the training rows) is the fold's own: nothing added
    assert held_priors_after_fit(qwen, fitted | {SYNC_KEY: 50e-6}, ("per_seq_overhead_s", SYNC_KEY)) == ({}, {})
    # nothing fitted: the plan's reset (the async 18.7 us) plus the host time
    reset = pv.fold_plan("qwen3", FOLDS["family"], ev, ())
    assert held_priors_after_fit(reset, {}, ())[0] == {SYNC_KEY: pytest.approx(18.7e-6 + 11.0e-6, rel=1e-12)}


def test_run_fold_simulates_the_held_out_sync_server_at_the_prior(monkeypatch):
    _, seen = fake_fold_fit(monkeypatch, 5e-6, held={SYNC_KEY: "no run (sync) in the data"})
    cases = [silicon_row("q", "qwen3-32b", "H100-SXM", 2, "0.12"), silicon_row("l", "llama-3.1-70b", "H100-SXM", 8, "0.14")]
    first = [SimpleNamespace(metrics={}) for _ in cases]
    fold = run_fold("family", "qwen3", cases, FOLDS["family"], first, names=("per_seq_overhead_s", SYNC_KEY),
                    outer_iterations=1, evidence=with_deployments(cases))
    assert fold.params[SYNC_KEY] == pytest.approx(5e-6 + SYNC_SEQ_HOST_PRIOR_S, rel=1e-12)
    assert seen[-1][SYNC_KEY] == fold.params[SYNC_KEY]      # the held-out prediction's value
    assert joint.simulated_value(fold, SYNC_KEY)[0] == fold.params[SYNC_KEY]
