"""Words ``twin plan`` and ``twin sweep`` print for humans (a count with its noun, ``1 GPU`` / ``3 GPUs``, is
``twin.results.numbers.counted``): why a configuration misses its SLO with `twin run`'s metric names
(``TTFT p99 = 2.18 s``, not ``p99_ttft_ms = 2.18 s``). Text output only: the JSON / CSV keep
``twin.plan.evaluate.judge``'s reasons as they are (a file format)."""

from __future__ import annotations

import re

from twin.analysis.causes import LIMIT_NAMES, STEP_TIME as STEP_TIME_LIMIT
from twin.results import numbers
from twin.results.report import label

# judge()'s reasons that name a metric key: "KEY = VALUE", "KEY undefined", "KEY missed"
_METRIC_REASON = re.compile(r"^(?P<key>[a-z0-9.]+_[a-z0-9_]+?_ms)(?P<rest> = .*| undefined| missed)$")
_GOODPUT_REASON = re.compile(r"^goodput fraction (?P<frac>[0-9.]+) < (?P<need>[0-9.e+-]+)$")


def human_reason(reason: str) -> str:
    """One of ``judge``'s reasons in `twin run`'s words: a metric key by its printed name, the goodput
    fraction as the share of requests within the SLO (``goodput`` in `twin run` is a rate). Any other
    reason (requests in flight, rejected, an error) is already prose and comes back unchanged."""
    m = _METRIC_REASON.match(reason)
    if m:
        return f"{label(m['key'])}{m['rest']}"
    m = _GOODPUT_REASON.match(reason)
    if m:
        return (f"within SLO {numbers.percent(float(m['frac']), 2)} of requests, "
                f"below the {float(m['need']) * 100:g}% required")
    return reason


# `twin.analysis.run_limits.short_limit`'s `none` (the server keeps up) on a configuration that misses its SLO
# reads as the diagnosis names that case (`twin.analysis.causes`), explained once under the table (STEP_TIME_NOTE).
# The files keep `none` (docs/result-formats.md).
STEP_TIME = LIMIT_NAMES[STEP_TIME_LIMIT]
STEP_TIME_NOTE = (f"{STEP_TIME}: the SLO is missed while no limit binds (no scheduler limit holds requests back and "
                  "the GPU keeps up): the steps themselves are too slow; a faster GPU or another TP helps, not a "
                  "scheduler knob.")


def _failed(passed: object) -> bool:
    """``passed`` is a verdict of failure (a bool or numpy's; not None / NaN: not judged)."""
    return passed is not None and not isinstance(passed, float) and not passed


def limit_words(limit: object, passed: object) -> object:
    """A table's ``limit`` cell: the short verdict as the files keep it, except ``none`` where the configuration
    misses its SLO, which reads ``STEP_TIME`` (print ``STEP_TIME_NOTE`` under a table that shows it)."""
    return STEP_TIME if limit == "none" and _failed(passed) else limit


# a sweep row's status when its verdict was inferred, not simulated (`twin.plan.sweep`: --prune)
INFERRED = ("pruned", "inferred-pass", "inferred-fail")


def verdict_words(passed: object, status: object) -> str:
    """A sweep's ``meets SLO`` cell: ``yes`` / ``no`` (markup, green / red), ``(inferred)`` after it where the
    row did not run (``INFERRED``: a rate above one that failed, or bisection's bracket), ``-`` for no verdict."""
    if passed is None or (isinstance(passed, float) and passed != passed):
        return "-"
    mark = "[red]no[/]" if _failed(passed) else "[green]yes[/]"
    return mark + (" (inferred)" if status in INFERRED else "")
