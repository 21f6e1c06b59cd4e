"""The server profile a fit writes: fitted parameters with units and standard errors, what it was fitted on
(GPUs, models, TP sizes, rates, concurrency), and each run's measured and simulated metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from twin.fitting.fit import Case, FitResult
from twin.fitting.parameters import FIT_PARAMETERS

REPORTED_METRICS = ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_e2el_ms",
                    "p99_e2el_ms", "request_throughput")


def profile_document(result: FitResult, sources: Sequence[str], set_aside: Sequence[Case] = ()) -> dict[str, Any]:
    """``set_aside``: runs given but not fitted (they queued), listed by name."""
    units = {p.name: p.unit for p in FIT_PARAMETERS}
    cases = result.cases
    runs = []
    for case, pred in zip(cases, result.predicted):
        measured = {k: case.run.metrics[k] for k in REPORTED_METRICS if k in case.run.metrics}
        runs.append({
            "name": case.run.name, "model": case.target.model, "gpu": case.target.gpu,
            "tensor_parallel_size": case.target.tensor_parallel_size, "rate_per_s": case.run.rate_per_s,
            "max_concurrency": case.run.max_concurrency, "measured": measured,
            "simulated": {k: pred.get(k) for k in measured},
            "relative_error": {k: (pred[k] / v - 1.0) if v and pred.get(k) is not None else None
                               for k, v in measured.items()},
        })
    return {
        "params": dict(result.params),
        "std": {k: v for k, v in result.std.items()},
        "units": {k: units.get(k, "") for k in result.params},
        "fitted": list(result.names),
        "fitted_on": {
            "gpus": sorted({c.target.gpu for c in cases}),
            "models": sorted({c.target.model for c in cases}),
            "tensor_parallel_sizes": sorted({c.target.tensor_parallel_size for c in cases}),
            "rates_per_s": sorted({c.run.rate_per_s for c in cases if c.run.rate_per_s is not None}),
            "runs": len(cases), "sources": list(sources),
            "set_aside_queueing": [c.run.name for c in set_aside],
        },
        "iterations": result.iterations,
        "runs": runs,
    }
