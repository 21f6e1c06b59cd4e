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


@pytest.mark.parametrize("model, tp", [("llama-3.1-8b", 2), ("gpt-oss-120b", 1)])
def test_the_public_constants_are_the_ones_the_step_time_sums(model, tp):
    """``RooflineCostModel.constants`` (read by ``describe``): a mixed step's time is exactly their sum."""
    import dataclasses

    cm = RooflineCostModel(model, "H100-SXM", tp, gemm_half_tokens=64.0, per_token_overhead_s=1e-6)
    c = cm.constants
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.linear_s_per_token = 0.0
    with pytest.raises(AttributeError):
        cm.constants = c
    # two sequences: 100 new tokens after 50 computed, and one decode token after 300
    n_seqs, tokens, context, new_x_context, new_squared = 2, 101, 350, 100 * 50 + 300, 100 * 100 + 1
    pairs = new_x_context + 0.5 * (new_squared + tokens)
    linear = max(c.linear_s_per_token * tokens + c.gemm_knee_s + c.lm_head_s_per_logit * n_seqs,
                 c.weight_read_s if c.moe_weight_read_s is None else c.moe_weight_read_s(tokens))
    at = c.attention
    if at.window:
        win_pairs = min(tokens * at.window, pairs)
        win_kv = min(n_seqs * at.window + tokens, context + tokens)
        attention = max(at.k_attn_mixed * pairs + at.k_attn_win * win_pairs + at.k_index * pairs,
                        at.k_kv_full * (context + tokens) + at.k_kv_win * win_kv)
    else:
        attention = max(at.k_attn_mixed * pairs, at.k_kv * (context + tokens))
    expected = (linear + attention + c.kv_write_s_per_token * tokens
                + (c.collectives_s_per_step + c.collectives_s_per_token * tokens)
                + (c.overhead_s_per_step + c.overhead_s_per_seq * n_seqs + c.overhead_s_per_token * tokens))
    assert cm.step_time_from_sums(n_seqs, tokens, context, new_x_context, new_squared, 0) == expected
    assert bool(at.window) == (model == "gpt-oss-120b")
    assert (c.collectives_s_per_step > 0) == (tp > 1)
    d = cm.describe()
    assert (d["linear_s_per_token"], d["weight_read_all_experts_s"]) == (c.linear_s_per_token, c.weight_read_s)
