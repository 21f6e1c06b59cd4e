"""SLOs: ``parse_slo`` reads every accepted spelling (per-request thresholds for goodput, bounds on a statistic,
vLLM's ``ttft:500`` CLI form) into an ``SLO``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from twin.errors import TwinInputError
from twin.slo_statistics import check_threshold, slo_statistics

_SLO_METRICS = {"ttft": "ttft", "ttft_ms": "ttft", "tpot": "tpot", "tpot_ms": "tpot", "e2el": "e2el",
                "e2el_ms": "e2el", "itl": "itl", "itl_ms": "itl"}
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


def _slo_number(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        # 0 ms is no objective any server meets (the scenario's slo: section refuses it too)
        raise TwinInputError(f"slo.{field}: {value!r} is not allowed; give a number of milliseconds > 0")
    return float(value)


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
    if isinstance(slo, str):
        slo = slo.split()
    if isinstance(slo, (list, tuple)):
        parsed: dict[str, Any] = {}
        for item in slo:
            name, sep, value = str(item).partition(":")
            try:
                if not sep:
                    raise ValueError
                parsed[name.strip()] = float(value)
            except ValueError:
                raise TwinInputError(f"slo: {item!r} is not KEY:VALUE; use e.g. 'ttft:500' (milliseconds)") from None
        slo = parsed
    if not isinstance(slo, Mapping):
        raise TwinInputError(f"slo: {slo!r} is not allowed; give a mapping like {{ttft_ms: 500, tpot_ms: {{p99: 50}}}}")
    per_request: dict[str, float] = {}
    bounds: dict[str, dict[str, float]] = {}
    allowed = ", ".join(sorted(_SLO_METRICS))
    for key, value in slo.items():
        metric = _SLO_METRICS.get(str(key))
        if metric is None:
            raise TwinInputError(f"slo.{key}: unknown SLO metric; allowed: {allowed}")
        if isinstance(value, Mapping):
            try:
                named = slo_statistics(value)
            except TwinInputError as exc:
                raise TwinInputError(f"slo.{key}: {exc}") from None
            stats = {name: _slo_number(f"{key}.{stat}", bound) for name, (stat, bound) in named.items()}
            bounds.setdefault(metric, {}).update(stats)
        else:
            try:
                check_threshold(metric)
            except TwinInputError as exc:
                raise TwinInputError(f"slo.{key}: {exc}") from None
            per_request[metric] = _slo_number(str(key), value)
    for metric, stats in bounds.items():
        if metric in _PER_REQUEST and metric not in per_request:
            per_request[metric] = max(stats.values())
    return SLO(per_request, bounds)
