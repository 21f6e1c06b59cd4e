"""The roofline's serving terms: the GEMM knee, the engine-core CPU cost per token, the request path, and the
vectorised step times the fit re-costs steps with."""

from __future__ import annotations

import random

import numpy as np
import pytest

from twin.core.scheduler_output import SchedulerOutput
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError


def _step(nn, cc, spec=None):
    return SchedulerOutput(0, [None] * len(nn), list(nn), list(cc), list(spec or [0] * len(nn)))


def _decode(n, ctx=500):
    return _step([1] * n, [ctx] * n)


def test_gemm_knee_costs_the_tokens_of_half_efficiency_and_bends_decode_upwards():
    flat = RooflineCostModel("llama-3.1-8b", "H100-SXM", gemm_half_tokens=0.0)
    knee = RooflineCostModel("llama-3.1-8b", "H100-SXM", gemm_half_tokens=128.0)
    # compute time of M tokens at efficiency ce * M / (M + h) = that of M + h tokens at ce (seconds)
    big = _step([2048], [0])
    extra = knee.explain(big)["linear_compute_s"] - flat.explain(big)["linear_compute_s"]
    assert extra == pytest.approx(128.0 * flat._k_linear)
    # memory-bound decode hides it; past the knee it shows, and the step time never falls as the batch grows
    assert knee.step_time_s(_decode(1)) == flat.step_time_s(_decode(1))
    times = [knee.step_time_s(_decode(n)) for n in range(1, 513, 7)]
    assert times == sorted(times)
    assert knee.step_time_s(_decode(512)) > flat.step_time_s(_decode(512))


def test_per_token_overhead_is_seconds_per_scheduled_token():
    a = RooflineCostModel("llama-3.1-8b", "H100-SXM")
    b = RooflineCostModel("llama-3.1-8b", "H100-SXM", per_token_overhead_s=2e-6)
    s = _step([300, 1, 1], [0, 40, 90])
    assert b.step_time_s(s) - a.step_time_s(s) == pytest.approx(302 * 2e-6)
    # named apart in explain(): 302 scheduled tokens x 2 us; the per-step and per-sequence part is unchanged
    assert b.explain(s)["per_token_overhead_s"] == pytest.approx(302 * 2e-6, rel=1e-12)
    assert b.explain(s)["overhead_s"] == pytest.approx(a.explain(s)["overhead_s"], rel=1e-12)
    assert "per_token_overhead_s" not in a.explain(s)
    parts = b.explain(s)
    assert sum(v for k, v in parts.items() if k != "total_s") == pytest.approx(parts["total_s"], rel=1e-9)


def test_request_path_is_no_step_cost_and_is_reported():
    a = RooflineCostModel("llama-3.1-8b", "H100-SXM", request_path_s=0.0)
    b = RooflineCostModel("llama-3.1-8b", "H100-SXM", request_path_s=0.02, request_path_jitter_s=0.003)
    assert a.step_time_s(_decode(8)) == b.step_time_s(_decode(8))
    assert b.parameters()["request_path_s"] == 0.02 and b.parameters()["request_path_jitter_s"] == 0.003
    for name in ("request_path_s", "request_path_jitter_s", "gemm_half_tokens", "per_token_overhead_s"):
        with pytest.raises(TwinInputError, match=name):
            RooflineCostModel("llama-3.1-8b", "H100-SXM", **{name: -1.0})


@pytest.mark.parametrize("model,gpu,tp", [("llama-3.1-8b", "H100-SXM", 1), ("llama-2-70b", "H100-SXM", 4),
                                          ("mixtral-8x7b", "H100-SXM", 2)])
def test_vectorised_step_times_equal_the_per_step_path(model, gpu, tp):
    cm = RooflineCostModel(model, gpu, tensor_parallel_size=tp, gemm_half_tokens=96.0, per_token_overhead_s=1e-6,
                           per_seq_overhead_s=2e-5)
    rng = random.Random(3)
    steps = []
    for _ in range(60):
        n = rng.randint(1, 40)
        nn = [rng.choice([1, 1, 1, rng.randint(1, 600)]) for _ in range(n)]
        cc = [rng.randint(0, 3000) for _ in range(n)]
        sp = [rng.choice([0, 0, 2]) for _ in range(n)]
        steps.append(_step(nn, cc, sp))
    cols = np.array([(sum(s.num_new_tokens), len(s.num_new_tokens), len(s.num_new_tokens) + sum(s.num_spec_tokens),
                      sum(s.num_computed_before),
                      sum(n * c + n * (n + 1) / 2 for n, c in zip(s.num_new_tokens, s.num_computed_before)))
                     for s in steps], dtype=float)
    vec = cm.step_times_s(*cols.T)
    np.testing.assert_allclose(vec, [cm.step_time_s(s) for s in steps], rtol=1e-12)
