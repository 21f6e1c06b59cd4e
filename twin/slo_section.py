"""ONE reader of an ``slo:`` section for every path an SLO enters (issue 33): a scenario's ``slo:`` (``twin run`` /
``compare`` / ``sweep`` / ``plan``, the dashboard's uploads and editor, ``--set slo.*``; ``twin.scenario.SLOConfig``),
``--slo`` (``slo_option_items``), a plan file's ``slo:`` and ``twin.results.slo.parse_slo``.

``slo_section`` takes every spelling any of them takes (metric names with or without ``_ms``, vLLM's list or string
form ``"ttft:500 tpot:50"``, statistics as ``twin.slo_statistics`` reads them) and returns the scenario's mapping
(``ttft_ms`` ...; values and statistic keys as given, so a valid section reads back unchanged); ``slo_value`` is
the one check of a number, worded one way: ``slo.ttft_ms.p99: must be a number of milliseconds > 0 (got 0)``.
A refusal is a ``TwinInputError`` whose line starts with the field (``slo.ttft_ms: ...``) or ``slo: ...``."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from twin.errors import TwinInputError, did_you_mean
from twin.slo_statistics import slo_statistics

METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")
OPTION_FORM = "METRIC=MS (a per-request threshold) or METRIC.STATISTIC=MS (a bound), e.g. ttft_ms.p99.9=1000"
# vLLM's metric names (``--goodput ttft:500``) as a scenario's slo: section spells them
VLLM_NAMES = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2el_ms", "itl": "itl_ms"}
FORM = "a mapping like {ttft_ms: 500, tpot_ms: {p99: 50}}, or vLLM's 'ttft:500 tpot:50'"
_NUMBER_WITH_UNIT = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)\s*[^\d\s.]")


def slo_value(field: str, value: Any, *, bound: bool = True) -> Any:
    """``value`` when it is a finite number of milliseconds > 0, else the one refusal naming ``slo.<field>``, the
    allowed range and the value (a per-request threshold, ``bound=False``, may also be a mapping of bounds)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return value
    allowed = "a number of milliseconds > 0" + ("" if bound else ", or a mapping like {p99: 1000}")
    hint = ""
    if isinstance(value, str) and _NUMBER_WITH_UNIT.match(value):
        hint = "; write the number alone: its name's _ms is the unit"
    raise TwinInputError(f"slo.{field}: must be {allowed} (got {value!r}{hint})")


def metric_name(key: Any) -> str:
    """The scenario's name of an SLO metric (``ttft`` -> ``ttft_ms``); a refusal naming the allowed ones."""
    name = VLLM_NAMES.get(key, key) if isinstance(key, str) else key
    if name not in METRICS:
        hint = did_you_mean(key, list(METRICS), VLLM_NAMES)
        raise TwinInputError(f"slo.{key}: unknown SLO metric{hint}; allowed: {', '.join(METRICS)} (or vLLM's "
                             f"{', '.join(VLLM_NAMES)})")
    return name


def _vllm_items(items: list | tuple) -> list[tuple[Any, Any]]:
    """vLLM's ``["ttft:500", "tpot:50"]`` as (metric, value) pairs; a value that is no number stays text (the
    value check words its refusal)."""
    pairs = []
    for item in items:
        name, sep, text = item.partition(":") if isinstance(item, str) else ("", "", "")
        if not sep or not name.strip():
            raise TwinInputError(f"slo: each item of vLLM's form must be METRIC:MS, e.g. 'ttft:500' (got {item!r})")
        try:
            value: Any = float(text)
        except ValueError:
            value = text.strip()
        pairs.append((name.strip(), value))
    return pairs


def slo_section(slo: Any) -> dict[str, Any]:
    """Any accepted spelling of an SLO -> the scenario's ``slo:`` mapping (``{}`` for none; a metric given as
    null sets no objective, as in a variant that drops one). Refuses, one line each: an unknown metric, one metric
    under two names, an unknown statistic, a value that is not a number of milliseconds > 0, a per-request ITL."""
    if slo is None:
        return {}
    if isinstance(slo, str):
        slo = slo.split()
    if isinstance(slo, (list, tuple)):
        pairs = _vllm_items(slo)
    elif isinstance(slo, Mapping):
        pairs = list(slo.items())
    else:
        raise TwinInputError(f"slo: must be {FORM} (got {slo!r})")
    out: dict[str, Any] = {}
    given: dict[str, Any] = {}
    for key, value in pairs:
        name = metric_name(key)
        if name in given:
            raise TwinInputError(f"slo: {given[name]!r} and {key!r} are the same metric ({name}); give it once")
        given[name] = key
        if isinstance(value, Mapping):
            try:
                stats = slo_statistics(value)
            except TwinInputError as exc:
                raise TwinInputError(f"slo.{key}: {exc}") from None
            for stat, bound in stats.values():
                slo_value(f"{key}.{stat}", bound)
            out[name] = dict(value)
        elif value is not None:
            try:
                check_threshold(name)
            except TwinInputError as exc:
                raise TwinInputError(f"slo.{key}: {exc} (got {value!r})") from None
            out[name] = slo_value(str(key), value, bound=False)
    return out


def relative_to_section(exc: TwinInputError) -> str:
    """A refusal as a pydantic validator of the ``slo:`` section raises it: ``slo.ttft_ms: x`` -> ``.ttft_ms: x``
    (the path extends the section's), ``slo: x`` -> ``x``."""
    text = str(exc)
    return text[3:] if text.startswith("slo.") else text.removeprefix("slo: ")


def check_threshold(metric: str) -> None:
    """A plain number is a per-request threshold (goodput); ITL (``itl`` / ``itl_ms``) has no per-request value,
    so it takes statistic bounds only: a ``TwinInputError`` naming no field."""
    if metric in ("itl", "itl_ms"):
        raise TwinInputError("ITL has no per-request value; give a statistic bound such as {p99: 50}")


def slo_option_items(items: Sequence[str]) -> dict[str, Any]:
    """``--slo`` items (``twin sweep`` / ``twin plan``) -> the ``slo:`` mapping ``parse_slo`` reads: ``METRIC=MS``
    (a per-request threshold), ``METRIC.STATISTIC=MS`` (a bound; the statistic is everything after the first dot,
    so ``ttft_ms.p99.9=1000`` bounds p99.9) or vLLM's ``METRIC:MS``; the value is a YAML scalar, read as ``--set``
    reads one (``twin.yaml_input.parse_option_value``). A ``TwinInputError`` line for an item without ``=``, an empty metric or statistic, a metric / bound
    given twice in one spelling or a null value; then ``slo_section`` reads the mapping as on every other path
    (vLLM's names -> the scenario's, one metric under two names, the statistic, the value)."""
    from twin.yaml_input import parse_option_value

    out: dict[str, Any] = {}
    for item in items:
        text = item if "=" in item else item.replace(":", "=", 1)
        key, eq, raw = text.partition("=")
        metric, dot, stat = key.strip().partition(".")
        if not eq or not metric or (dot and not stat):
            raise TwinInputError(f"--slo {item!r}: expected {OPTION_FORM}")
        value = parse_option_value(raw, f"--slo {metric}")
        node = out.setdefault(metric, {}) if dot else out
        name = stat if dot else metric
        if not isinstance(node, dict) or name in node:
            twice = f"{metric}.{stat}" if dot and isinstance(node, dict) else metric
            raise TwinInputError(f"--slo {item!r}: {twice} is given twice")
        if value is None:                       # null drops an objective from a scenario; here it sets none
            slo_value(f"{metric}.{stat}" if dot else metric, value, bound=bool(dot))
        node[name] = value
    return slo_section(out)
