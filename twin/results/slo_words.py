"""An SLO in words, the one wording every surface prints (the dashboard's verdict line, `twin plan`'s header):
per-request thresholds ``TTFT ≤ 500 ms, TPOT ≤ 50 ms``, a bound on a statistic ``p99 TTFT ≤ 1000 ms``; a bound
from 10 s in a larger unit (``2 min``). The files keep the ``slo:`` mapping (``twin.slo_section``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from twin.results import numbers

SLO_NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL", "e2el_ms": "E2E"}


def bound_words(ms: float) -> str:
    """An SLO bound as the scenario gives it (``500 ms``), in a larger unit from 10 s (``2 min``)."""
    return f"{numbers.given(ms)} ms" if abs(ms) < 10_000 else numbers.duration_ms(ms)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def threshold_words(slo: Mapping[str, Any]) -> str:
    """The per-request thresholds of an ``slo:`` mapping: ``TTFT ≤ 500 ms, TPOT ≤ 50 ms`` (``""``: none)."""
    return ", ".join(f"{SLO_NAMES.get(k, k)} ≤ {bound_words(v)}" for k, v in slo.items() if _is_number(v))


def statistic_words(metric: str, stat: str, bound: float) -> str:
    """One bound on a statistic: ``p99 TTFT ≤ 1000 ms`` (the statistic as the scenario spells it)."""
    return f"{stat} {SLO_NAMES.get(metric, metric)} ≤ {bound_words(bound)}"


def slo_words(slo: Mapping[str, Any] | None) -> str:
    """A whole ``slo:`` mapping: its per-request thresholds, then its bounds on statistics (``TTFT ≤ 500 ms,
    p99 TPOT ≤ 50 ms``); ``none`` for no SLO."""
    slo = slo or {}
    parts = [threshold_words(slo)] if threshold_words(slo) else []
    for metric, stats in slo.items():
        if isinstance(stats, Mapping):
            parts += [statistic_words(metric, stat, bound) for stat, bound in stats.items()]
    return ", ".join(parts) or "none"
