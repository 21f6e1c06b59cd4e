"""The statistic of an SLO bound (``ttft_ms: {p99: 1000}``): ONE reader for the scenario's ``slo:`` section
(``twin.scenario.SLOConfig``) and ``twin.results.slo.parse_slo`` (``--slo`` of ``twin sweep`` / ``twin plan``, a
plan file's ``slo:``, the library), so both take the same statistics and refuse the rest with the same line
(issue 33: the scenario took six, ``--slo`` any percentile, and a sweep's every run failed on the difference).

A statistic is ``mean``, ``median`` or a percentile ``p<0..100>``, spelt as vLLM's keys spell it
(``percentile_word``: ``p99.0`` -> ``p99``, ``p99.9``); the run computes any percentile an SLO names.
``slo_option_items`` reads ``--slo``'s items, whose statistic is all after the metric's dot (``ttft_ms.p99.9``:
a dotted ``--set`` path would split it into ``p99`` -> ``9``, which ``slo_statistics`` refuses with the spellings
that work)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from twin.errors import TwinInputError

ALLOWED = "mean, median, p<0..100> (e.g. p50, p99, p99.9)"
OPTION_FORM = "METRIC=MS (a per-request threshold) or METRIC.STATISTIC=MS (a bound), e.g. ttft_ms.p99.9=1000"
# vLLM's metric names (``--goodput ttft:500``) as a scenario's slo: section spells them
VLLM_NAMES = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2el_ms", "itl": "itl_ms"}


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


def check_threshold(metric: str) -> None:
    """A plain number is a per-request threshold (goodput); ITL (``itl`` / ``itl_ms``) has no per-request value,
    so it takes statistic bounds only: a ``TwinInputError`` naming no field."""
    if metric in ("itl", "itl_ms"):
        raise TwinInputError("ITL has no per-request value; give a statistic bound such as {p99: 50}")


def slo_option_items(items: Sequence[str]) -> dict[str, Any]:
    """``--slo`` items (``twin sweep`` / ``twin plan``) -> the ``slo:`` mapping ``parse_slo`` reads: ``METRIC=MS``
    (a per-request threshold), ``METRIC.STATISTIC=MS`` (a bound; the statistic is everything after the first dot,
    so ``ttft_ms.p99.9=1000`` bounds p99.9) or vLLM's ``METRIC:MS``; vLLM's names (``ttft``) become the
    scenario's (``ttft_ms``: the runs read the mapping as their ``slo:`` section, which takes those only); the
    value is a YAML scalar, read as ``--set`` reads one. A ``TwinInputError`` line for an item without ``=``, an
    empty metric or statistic, or a metric / bound given twice (the statistic and the value are checked by
    ``parse_slo``, as a scenario's are)."""
    from twin.yaml_input import parse_set_options

    out: dict[str, Any] = {}
    for item in items:
        text = item if "=" in item else item.replace(":", "=", 1)
        key, eq, raw = text.partition("=")
        metric, dot, stat = key.strip().partition(".")
        if not eq or not metric or (dot and not stat):
            raise TwinInputError(f"--slo {item!r}: expected {OPTION_FORM}")
        value = parse_set_options([f"{metric}={raw}"])[metric]
        metric = VLLM_NAMES.get(metric, metric)
        node = out.setdefault(metric, {}) if dot else out
        name = stat if dot else metric
        if not isinstance(node, dict) or name in node:
            twice = f"{metric}.{stat}" if dot and isinstance(node, dict) else metric
            raise TwinInputError(f"--slo {item!r}: {twice} is given twice")
        node[name] = value
    return out


def scenario_names(slo: Any) -> Any:
    """A plan file's ``slo:`` mapping with vLLM's metric names (``ttft: 500``, which ``parse_slo`` takes) in the
    spelling of the runs' ``slo:`` section (``ttft_ms``), which takes those only: every run of a plan failed on
    them. A ``TwinInputError`` line for one metric under both names; anything else as given (``parse_slo``
    judges it)."""
    if not isinstance(slo, Mapping):
        return slo
    out: dict[Any, Any] = {}
    given: dict[Any, Any] = {}
    for key, value in slo.items():
        name = VLLM_NAMES.get(key, key) if isinstance(key, str) else key
        if name in out:
            raise TwinInputError(f"slo: {given[name]!r} and {key!r} are the same metric ({name}); give it once")
        out[name], given[name] = value, key
    return out
