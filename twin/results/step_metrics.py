"""The step-based keys of the metrics (``num_steps``, ``busy_fraction``, ``mean_running_batch``,
``mean_queue_length``, ``mean_batched_tokens``, KV usage, drafting time), each step weighted by its overlap
with the measured span; from aggregated step records (``records.steps: aggregate``), for the whole run.""" 

from __future__ import annotations

from typing import Any

import numpy as np

from twin.results.records import StepRecords
from twin.results.weighted_sum import weighted_sum


def step_metrics(steps: StepRecords | None, span: tuple[float, float] | None, num_replicas: int | None) -> dict:
    keys = ("num_steps", "busy_fraction", "mean_running_batch", "mean_queue_length", "mean_batched_tokens",
            "mean_kv_usage", "p99_kv_usage", "max_kv_usage")
    out: dict[str, Any] = dict.fromkeys(keys)
    out["num_steps"] = 0
    aggregated = getattr(steps, "aggregated", False)
    if num_replicas is None:
        if steps is None or not len(steps):
            num_replicas = 1
        else:
            num_replicas = max(steps.replicas) + 1 if aggregated else int(steps.column("replica").max()) + 1
    out["num_replicas"] = num_replicas
    if steps is None or len(steps) == 0 or span is None:
        return out
    if aggregated:
        return _from_aggregate(steps, span, out)
    t0, t1 = span
    start = steps.column("start_s")
    dur = steps.column("duration_s")
    overlap = np.minimum(start + dur, t1) - np.maximum(start, t0)
    inside = (overlap > 0) | ((dur == 0) & (start >= t0) & (start <= t1))
    if not inside.any():
        return out
    w = np.clip(overlap[inside], 0.0, None)
    out["num_steps"] = int(inside.sum())
    kv = steps.column("kv_usage")[inside]
    running = steps.column("num_running")[inside]
    waiting = steps.column("num_waiting")[inside]
    tokens = steps.column("num_new_tokens")[inside]
    busy = float(w.sum())
    span_s = t1 - t0
    if span_s > 0:
        out["busy_fraction"] = busy / (span_s * num_replicas)
        out["mean_queue_length"] = weighted_sum(waiting, w) / span_s
    if busy > 0:
        out["mean_running_batch"] = weighted_sum(running, w) / busy
        out["mean_kv_usage"] = weighted_sum(kv, w) / busy
    else:
        out["mean_running_batch"] = float(running.mean())
        out["mean_kv_usage"] = float(kv.mean())
    out["mean_batched_tokens"] = float(tokens.mean())
    draft = steps.column("draft_s")[inside]
    if draft.any():
        # a step's drafting time, prorated like its duration when the step straddles the window's edge
        draft_in_span = weighted_sum(draft, w / np.where(dur[inside] > 0, dur[inside], 1.0))
        out["spec_decode_draft_time_s"] = draft_in_span
        out["spec_decode_draft_time_fraction"] = draft_in_span / busy if busy > 0 else None
    out["p99_kv_usage"] = float(np.percentile(kv, 99))
    out["max_kv_usage"] = float(kv.max())
    return out


def _from_aggregate(steps: Any, span: tuple[float, float], out: dict) -> dict:
    """The same keys from aggregated step records (``twin.results.step_summary``), for a span that holds
    every step; for any other span they are ``None`` (per-step overlap needs ``records.steps: full``)."""
    t0, t1 = span
    first, last = steps.span_s()
    if first < t0 or last > t1:
        out["num_steps"] = None
        return out
    c = steps.totals()
    busy, span_s = c["duration_s"], t1 - t0
    out["num_steps"] = int(c["num_steps"])
    if span_s > 0:
        out["busy_fraction"] = busy / (span_s * out["num_replicas"])
        out["mean_queue_length"] = c["waiting_s"] / span_s
    if busy > 0:
        out["mean_running_batch"] = c["running_s"] / busy
        out["mean_kv_usage"] = c["kv_usage_s"] / busy
    out["mean_batched_tokens"] = c["num_new_tokens"] / c["num_steps"]
    if c["draft_s"]:
        out["spec_decode_draft_time_s"] = c["draft_s"]
        out["spec_decode_draft_time_fraction"] = c["draft_s"] / busy if busy > 0 else None
    out["p99_kv_usage"] = steps.kv_usage_percentile(99)
    out["max_kv_usage"] = c["max_kv_usage"]
    return out
