"""Validate the twin against measurements: the calibration engine serving the same workload for real, or a
``vllm bench serve`` result JSON from a real server.

The comparison is per metric (throughput; TTFT, TPOT, ITL, E2EL at mean, p50, p90, p99): measured, predicted,
and the relative error of the prediction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twin.results.bench_fields import parse_request_rate
from twin.errors import TwinInputError
from twin.workload.capped_open_loop import CappedOpenLoop
from twin.workload.spec import RequestSpec

COMPARED_METRICS: tuple[str, ...] = (
    "request_throughput", "output_throughput",
    "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "p90_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "median_itl_ms", "p90_itl_ms", "p99_itl_ms",
    "mean_e2el_ms", "median_e2el_ms", "p90_e2el_ms", "p99_e2el_ms",
)


@dataclass
class Comparison:
    """Measured against predicted, metric by metric."""

    rows: list[tuple[str, float | None, float | None, float | None]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def error(self, metric: str) -> float | None:
        for name, _, _, err in self.rows:
            if name == metric:
                return err
        raise KeyError(metric)

    def as_dict(self) -> dict[str, Any]:
        return {"rows": [{"metric": m, "measured": a, "predicted": b, "relative_error": e}
                         for m, a, b, e in self.rows], "notes": list(self.notes)}


def relative_error(measured: float | None, predicted: float | None) -> float | None:
    if measured is None or predicted is None or not math.isfinite(measured) or not math.isfinite(predicted):
        return None
    if measured == 0:
        return None if predicted != 0 else 0.0
    return (predicted - measured) / measured


def compare_metrics(measured: Mapping[str, Any], predicted: Mapping[str, Any],
                    metrics: Sequence[str] = COMPARED_METRICS) -> Comparison:
    cmp = Comparison()
    for key in metrics:
        a, b = measured.get(key), predicted.get(key)
        a = float(a) if isinstance(a, (int, float)) else None
        b = float(b) if isinstance(b, (int, float)) else None
        cmp.rows.append((key, a, b, relative_error(a, b)))
    return cmp


# ---- vllm bench serve result files ----------------------------------------------------------------------
def specs_from_bench_json(doc: Mapping[str, Any], source: str = "bench JSON") -> list[RequestSpec]:
    """The workload a ``vllm bench serve`` result describes: one request per entry of its per-request arrays
    (``input_lens``, ``output_lens``, and ``start_times`` for arrivals), each with a unique prompt (a bench
    result carries no prompt content, so no prefix sharing can be inferred). Without ``start_times`` the
    requests fall due evenly at a finite ``request_rate``, or all at t = 0 when it is ``inf`` (the client's
    ``max_concurrency`` then paces them: ``bench_max_concurrency``)."""
    for key in ("input_lens", "output_lens"):
        if not isinstance(doc.get(key), list) or not doc[key]:
            raise TwinInputError(f"{source}: '{key}' must be a non-empty list (run vllm bench serve with "
                                 f"--save-result --save-detailed)")
    inputs, outputs = doc["input_lens"], doc["output_lens"]
    if len(inputs) != len(outputs):
        raise TwinInputError(f"{source}: input_lens has {len(inputs)} entries, output_lens {len(outputs)}")
    starts = doc.get("start_times")
    if starts is None:
        rate = parse_request_rate(doc.get("request_rate"))
        if rate is None:
            raise TwinInputError(f"{source}: needs 'start_times' (per-request arrival times) or a "
                                 f"'request_rate' (a number > 0, or \"inf\")")
        starts = [0.0 if math.isinf(rate) else i / rate for i in range(len(inputs))]
    if len(starts) != len(inputs):
        raise TwinInputError(f"{source}: start_times has {len(starts)} entries, input_lens {len(inputs)}")
    t0 = min(starts)
    specs = []
    order = sorted(range(len(inputs)), key=lambda i: (starts[i], i))
    for new_id, i in enumerate(order):
        p, o = inputs[i], outputs[i]
        if not isinstance(p, int) or p < 1:
            raise TwinInputError(f"{source}: input_lens[{i}] = {p!r}: must be an integer >= 1")
        if not isinstance(o, int) or o < 1:
            raise TwinInputError(f"{source}: output_lens[{i}] = {o!r}: must be an integer >= 1 "
                                 f"(failed requests have no output; drop them or fix the file)")
        specs.append(RequestSpec(new_id, float(starts[i]) - t0, p, o, ((("bench", new_id), p),)))
    return specs


def bench_max_concurrency(doc: Mapping[str, Any], source: str = "bench JSON") -> int | None:
    """The client's ``max_concurrency`` of a bench result (None: absent or null, no cap)."""
    value = doc.get("max_concurrency")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TwinInputError(f"{source}: max_concurrency = {value!r}: must be an integer >= 1 or null")
    return value


def bench_traffic(doc: Mapping[str, Any], source: str = "bench JSON") -> list[RequestSpec] | CappedOpenLoop:
    """What to replay for a bench result: its requests, held to its ``max_concurrency`` when it has one (a
    request is sent at its start time or, when every slot is taken, when one frees)."""
    specs = specs_from_bench_json(doc, source)
    cap = bench_max_concurrency(doc, source)
    return CappedOpenLoop(specs, cap) if cap else specs


def metrics_from_bench_json(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar metrics of a bench result (twin results carry extra keys under 'twin', ignored here)."""
    return {k: v for k, v in doc.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def step_time_residuals(measured_s: Sequence[float], predicted_s: Sequence[float]) -> dict[str, float]:
    """Summary of per-step prediction errors (predicted - measured) on the same step shapes."""
    m = np.asarray(measured_s, dtype=float)
    p = np.asarray(predicted_s, dtype=float)
    if m.size == 0:
        return {}
    err = p - m
    rel = np.abs(err) / np.maximum(m, 1e-12)
    return {"steps": int(m.size), "mean_measured_ms": float(m.mean() * 1e3),
            "mean_predicted_ms": float(p.mean() * 1e3), "mape": float(rel.mean()),
            "p90_abs_error_ms": float(np.percentile(np.abs(err), 90) * 1e3), "bias_ms": float(err.mean() * 1e3)}
