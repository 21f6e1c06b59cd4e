"""The step-based keys of the metrics (``num_steps``, ``busy_fraction``, ``mean_running_batch``,
``mean_queue_length``, ``mean_batched_tokens``, KV usage, drafting time), each step weighted by its overlap
with the measured span."""

from __future__ import annotations

from typing import Any

import numpy as np

from twin.results.records import StepRecords


def step_metrics(steps: StepRecords | None, span: tuple[float, float] | None, num_replicas: int | None) -> dict:
    keys = ("num_steps", "busy_fraction", "mean_running_batch", "mean_queue_length", "mean_batched_tokens",
            "mean_kv_usage", "p99_kv_usage", "max_kv_usage")
    out: dict[str, Any] = dict.fromkeys(keys)
    out["num_steps"] = 0
    if num_replicas is None:
        num_replicas = int(steps.column("replica").max()) + 1 if steps is not None and len(steps) else 1
    out["num_replicas"] = num_replicas
    if steps is None or len(steps) == 0 or span is None:
        return out
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
        out["mean_queue_length"] = float(np.dot(waiting, w)) / span_s
    if busy > 0:
        out["mean_running_batch"] = float(np.dot(running, w)) / busy
        out["mean_kv_usage"] = float(np.dot(kv, w)) / busy
    else:
        out["mean_running_batch"] = float(running.mean())
        out["mean_kv_usage"] = float(kv.mean())
    out["mean_batched_tokens"] = float(tokens.mean())
    draft = steps.column("draft_s")[inside]
    if draft.any():
        # a step's drafting time, prorated like its duration when the step straddles the window's edge
        draft_in_span = float(np.dot(draft, w / np.where(dur[inside] > 0, dur[inside], 1.0)))
        out["spec_decode_draft_time_s"] = draft_in_span
        out["spec_decode_draft_time_fraction"] = draft_in_span / busy if busy > 0 else None
    out["p99_kv_usage"] = float(np.percentile(kv, 99))
    out["max_kv_usage"] = float(kv.max())
    return out
