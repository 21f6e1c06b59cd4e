"""The statistic of an SLO bound (``ttft_ms: {p99: 1000}``): ONE reader, used by ``twin.slo_section`` (the
reader of every path an SLO enters), so all take the same statistics and refuse the rest with the same line
(issue 33: the scenario took six, ``--slo`` any percentile, and a sweep's every run failed on the difference).

A statistic is ``mean``, ``median`` or a percentile ``p<0..100>``, spelt as vLLM's keys spell it
(``percentile_word``: ``p99.0`` -> ``p99``, ``p99.9``); the run computes any percentile an SLO names.
``twin.slo_section.slo_option_items`` reads ``--slo``'s items, whose statistic is all after the metric's dot
(``ttft_ms.p99.9``: a dotted ``--set`` path would split it into ``p99`` -> ``9``, which ``slo_statistics`` refuses
with the spellings that work)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from twin.errors import TwinInputError

ALLOWED = "mean, median, p<0..100> (e.g. p50, p99, p99.9)"


def percentile_word(p: float) -> str:
    """vLLM's spelling of a percentile in a key: 99 -> '99', 99.9 -> '99.9'."""
    return str(int(p)) if int(p) == p else str(p)


def slo_statistic(stat: object) -> str | None:
    """The one reader of an SLO bound's statistic, shared by the scenario's ``slo:`` section and ``parse_slo``
    (``--slo`` of ``twin sweep`` / ``twin plan``, a plan file's ``slo:``): ``mean``, ``median`` or a percentile
    ``p<0..100>`` spelt as vLLM's keys (``p99.0`` -> ``p99``, ``p99.9``); None for anything else."""
    if stat in ("mean", "median"):
        return str(stat)
    if not isinstance(stat, str) or not stat.startswith("p"):
        return None
    try:
        p = float(stat[1:])
    except ValueError:
        return None
    return "p" + percentile_word(p) if 0 <= p <= 100 else None


def slo_statistics(bounds: Mapping) -> dict[str, tuple[Any, Any]]:
    """{statistic (``slo_statistic``): (the key as given, its bound)} of one metric's bounds; a ``TwinInputError``
    whose text names no field (the caller prefixes it) for no bound, an unknown statistic or two spellings of
    one."""
    if not bounds:
        raise TwinInputError("empty; give e.g. {p99: 1000}")
    out: dict[str, tuple[Any, Any]] = {}
    for stat, bound in bounds.items():
        if isinstance(bound, Mapping):          # --set slo.ttft_ms.p99.9=1000 split the statistic at its dot
            raise TwinInputError(f"{stat}: {dict(bound)!r} is no bound; a statistic with a dot is one key, e.g. "
                                 "{p99.9: 1000} (--slo ttft_ms.p99.9=1000; --set 'slo.ttft_ms={p99.9: 1000}')")
        name = slo_statistic(stat)
        if name is None:
            raise TwinInputError(f"unknown statistic {stat!r}; allowed: {ALLOWED}")
        if name in out:
            raise TwinInputError(f"{out[name][0]!r} and {stat!r} are the same statistic ({name}); give it once")
        out[name] = (stat, bound)
    return out
