"""SLOs: ``parse_slo`` reads every accepted spelling (per-request thresholds for goodput, bounds on a statistic,
vLLM's ``ttft:500`` CLI form) into an ``SLO``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from twin.slo_section import slo_section
from twin.slo_statistics import slo_statistic

_PER_REQUEST = ("ttft", "tpot", "e2el")


@dataclass(frozen=True)
class SLO:
    """Parsed SLO: per-request thresholds (ms, for goodput) and statistic bounds (ms, for ``slo_met``)."""

    per_request_ms: dict[str, float]
    bounds_ms: dict[str, dict[str, float]]  # metric -> {"p99": 1000.0, "mean": ..., "median": ...}

    @property
    def percentiles(self) -> list[float]:
        out = []
        for stats in self.bounds_ms.values():
            out += [float(s[1:]) for s in stats if s.startswith("p")]
        return out

    def __bool__(self) -> bool:
        return bool(self.per_request_ms or self.bounds_ms)


def parse_slo(slo: Any) -> SLO:
    """Accept ``{"ttft_ms": 500, "tpot_ms": 50, "e2el_ms": 10000}`` (per-request thresholds, vLLM goodput),
    ``{"ttft_ms": {"p99": 1000}, "tpot_ms": {"mean": 40}}`` (bounds on a statistic), a mix of both, vLLM's
    names without ``_ms``, or vLLM's CLI form ``["ttft:500", "tpot:50"]`` / ``"ttft:500 tpot:50"``.

    For goodput a request is good when each per-request value is <= its threshold; a metric given only as
    statistic bounds uses its loosest bound as the per-request threshold (for one p99 bound, that bound).
    ITL has no per-request value, so it takes statistic bounds only."""
    if slo is None:
        return SLO({}, {})
    if isinstance(slo, SLO):
        return slo
    per_request: dict[str, float] = {}
    bounds: dict[str, dict[str, float]] = {}
    for name, value in slo_section(slo).items():       # the one reader every SLO path shares (issue 33)
        metric = name.removesuffix("_ms")
        if isinstance(value, Mapping):
            bounds[metric] = {slo_statistic(stat): float(bound) for stat, bound in value.items()}
        else:
            per_request[metric] = float(value)
    for metric, stats in bounds.items():
        if metric in _PER_REQUEST and metric not in per_request:
            per_request[metric] = max(stats.values())
    return SLO(per_request, bounds)
