"""The held-out readings' one summary of signed relative errors: median |error|, median signed error and count of one
metric over the cases that have it (issue 33; shared by the reading scripts that each wrote it again)."""

from __future__ import annotations

import statistics


def error_medians(errs: list[dict[str, float]], key: str) -> tuple[float, float, int] | None:
    """(median |error|, median signed error, cases) of ``key`` over the error dicts in ``errs`` that have it
    (fractions), None where none has it."""
    xs = [e[key] for e in errs if key in e]
    if not xs:
        return None
    return statistics.median(abs(x) for x in xs), statistics.median(xs), len(xs)


def metric_medians(errs: list[dict[str, float]], metrics) -> dict[str, tuple[float, float, int] | None]:
    """``error_medians`` of each metric in ``metrics``, in that order."""
    return {m: error_medians(errs, m) for m in metrics}


def median_cell(xs: list[float], unit: str = "") -> str:
    """``|error| median (signed median)`` of signed relative errors ``xs`` in percent to one decimal, each number
    followed by ``unit`` (``"%"`` or nothing); ``-`` for none."""
    if not xs:
        return "-"
    return f"{100 * statistics.median(abs(x) for x in xs):.1f}{unit} ({100 * statistics.median(xs):+.1f}{unit})"
