"""Throughput over the measured run's span, from a simulated slice of it.

Every client here reports request throughput as completed requests over the run's span, from its first send to
its last completion: inference-perf (its report's ``requests_per_sec``: successes over the latest end time
minus the earliest start time of the stage; the stage files here give ``count / requests_per_sec`` =
``send_duration`` + 1.6-4.8 s on every stable stage), ``vllm bench serve`` (``completed / duration``, the
benchmark's duration from the first send to the last answer). An open-loop run the server keeps up with
therefore measures ``N / (D + T)``: ``N`` requests sent over ``D`` seconds (the client's own inputs) and the
drain ``T`` after the last send (one request's latency, what the server sets).

The fit simulates only the first ``max_sim_s`` seconds of such a run and measures after a warm-up cut, a slice
of ~40 s where the run lasted 600-1200 s; the same definition on the slice weighs the drain 15-30 times as much
(``T / 40 s`` against ``T / 600 s``) and came out 3-9 % below the measured figure on every stable inference-perf
stage. ``over_run_span`` states the twin's prediction for the whole run instead: the simulated drain and the
slice's success fraction over the run's own ``N`` and ``D``. A slice in which the twin itself queues (mean TTFT
over ``QUEUEING_TTFT_STEPS`` mean TPOTs, ``MeasuredRun.queueing``'s rule) keeps the slice's figure: a server that
cannot keep up completes at its own rate, whatever the client sends.
"""

from __future__ import annotations

import math
from typing import Any

from twin.fitting.measured_run import QUEUEING_TTFT_STEPS, MeasuredRun

THROUGHPUT_KEYS = ("request_throughput", "output_throughput", "total_token_throughput")


def over_run_span(metrics: dict[str, Any], run: MeasuredRun, last_send_s: float, last_finish_s: float) -> dict:
    """``metrics`` (the simulated slice's) with its throughputs restated over the run's span: requests per
    second ``(completed / (completed + failed)) x N / (D + T)`` with ``T = last_finish_s - last_send_s`` (the
    slice's drain after its last send), output and total tokens per second at the slice's mean tokens per
    completed request. Unchanged where the run has no send duration or no finite rate (a closed loop), where
    the slice completed nothing, or where the twin queues in the slice (see the module's docstring)."""
    rate, span_s = run.rate_per_s, run.duration_s
    completed, failed = metrics.get("completed") or 0, metrics.get("failed") or 0
    if rate is None or not math.isfinite(rate) or not span_s or span_s <= 0 or completed <= 0:
        return metrics
    ttft, tpot = metrics.get("mean_ttft_ms"), metrics.get("mean_tpot_ms")
    if ttft is not None and tpot and ttft > QUEUEING_TTFT_STEPS * tpot:
        return metrics
    drain_s = max(0.0, last_finish_s - last_send_s)
    rps = completed / (completed + failed) * run.num_requests / (span_s + drain_s)
    out = dict(metrics)
    out["request_throughput"] = rps
    out["output_throughput"] = rps * metrics["total_output_tokens"] / completed
    out["total_token_throughput"] = rps * (metrics["total_input_tokens"] + metrics["total_output_tokens"]) / completed
    return out
