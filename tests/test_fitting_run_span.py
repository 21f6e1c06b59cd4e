"""Throughput over the measured run's span from a simulated slice (twin.fitting.run_span), exact values; and the
replay of a long open-loop run states its throughput over the run, as the client measured it."""

from __future__ import annotations

import pytest

from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.replay import Target, replay
from twin.fitting.run_span import over_run_span


def _run(rate=5.0, n=3000, duration_s=600.0, **kw) -> MeasuredRun:
    return MeasuredRun(name="r", source="test", num_requests=n, prompt_tokens=LengthSample.constant(100),
                       output_tokens=LengthSample.constant(50), metrics={}, rate_per_s=rate, duration_s=duration_s,
                       **kw)


SLICE = {"completed": 190, "failed": 10, "total_input_tokens": 19000, "total_output_tokens": 9500,
         "request_throughput": 4.0, "output_throughput": 190.0, "total_token_throughput": 570.0,
         "mean_ttft_ms": 30.0, "mean_tpot_ms": 7.0, "duration": 47.5}


def test_the_slice_is_restated_over_the_runs_sends_and_the_simulated_drain():
    out = over_run_span(SLICE, _run(), last_send_s=40.0, last_finish_s=42.0)
    # 190 of 200 succeeded; 3000 sent over 600 s; the drain after the last send 2 s
    assert out["request_throughput"] == 0.95 * 3000 / 602.0
    assert out["output_throughput"] == 0.95 * 3000 / 602.0 * 50.0
    assert out["total_token_throughput"] == 0.95 * 3000 / 602.0 * 150.0
    assert out["duration"] == 47.5 and out["mean_ttft_ms"] == 30.0          # the rest as the slice measured it
    assert SLICE["request_throughput"] == 4.0                                # the input is not changed


def test_a_finish_before_the_last_send_is_no_negative_drain():
    out = over_run_span(SLICE, _run(), last_send_s=40.0, last_finish_s=39.0)
    assert out["request_throughput"] == 0.95 * 3000 / 600.0


@pytest.mark.parametrize("run", [_run(rate=None, max_concurrency=8), _run(rate=float("inf")), _run(duration_s=None),
                                 _run(duration_s=0.0)])
def test_no_rate_or_no_send_duration_keeps_the_slice(run):
    assert over_run_span(SLICE, run, 40.0, 42.0) == SLICE


def test_a_slice_where_the_twin_queues_keeps_its_own_completion_rate():
    queued = SLICE | {"mean_ttft_ms": 50 * 7.0 + 1.0}
    assert over_run_span(queued, _run(), 40.0, 42.0) == queued
    at_the_limit = SLICE | {"mean_ttft_ms": 50 * 7.0}
    assert over_run_span(at_the_limit, _run(), 40.0, 42.0)["request_throughput"] == 0.95 * 3000 / 602.0


def test_nothing_completed_keeps_the_slice():
    empty = SLICE | {"completed": 0}
    assert over_run_span(empty, _run(), 40.0, 42.0) == empty


def test_replay_of_a_slice_or_a_cut_whole_run_states_the_runs_throughput():
    target = Target(model="meta-llama/Llama-2-7b-hf", gpu="H100-SXM", tensor_parallel_size=1)
    run = _run(rate=5.0, n=3000, duration_s=599.8)
    part = replay(run, target, {}, max_sim_s=20.0)
    thr = part.metrics["request_throughput"]
    # the client's 3000 over its 599.8 s plus a drain of about one request's latency (well under 5 s)
    assert 3000 / 604.8 < thr < 3000 / 599.8
    # round 19: a whole open-loop run measured after the warm-up cut is stated over the run's span too (the twin's
    # Poisson draw's span is not the client's send duration)
    whole = replay(_run(rate=5.0, n=100, duration_s=19.8), target, {}, max_sim_s=None)
    m = whole.metrics
    assert m["request_throughput"] != m["completed"] / m["duration"]
    assert 100 / 24.8 < m["request_throughput"] < 100 / 19.8
    # a run too short for a cut (20 requests or fewer) keeps its own completion rate
    short = replay(_run(rate=5.0, n=20, duration_s=3.8), target, {}, max_sim_s=None).metrics
    assert short["request_throughput"] == short["completed"] / short["duration"]
