"""Many variants at a glance: one row per run with the headline metrics, each with its change against the
reference run, before (or instead of) the full per-metric comparison (`twin.results.report`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from twin.results import numbers
from twin.results.report import compare_metrics, format_value

SUMMARY_KEYS: tuple[tuple[str, str], ...] = (
    ("request_throughput", "req/s"), ("output_throughput", "tok/s"), ("median_ttft_ms", "TTFT p50"),
    ("p99_ttft_ms", "TTFT p99"), ("median_tpot_ms", "TPOT p50"), ("p99_e2el_ms", "E2EL p99"),
    ("request_goodput", "goodput"),
)
SUMMARY_FROM = 4          # more variants than this beside the reference: the summary comes first
_STYLE = {"better": "green", "worse": "red"}


def summary_table(runs: Mapping[str, Mapping[str, Any]], reference: str, *,
                  keys: Sequence[tuple[str, str]] = SUMMARY_KEYS, title: str | None = None,
                  plain: bool = False) -> Table:
    """One row per run (the reference first): each headline metric's value and its relative change against
    ``reference`` (``4.51 s -48.8%``), green where better, red where worse. Metrics no run has are left out."""
    rows = {r["key"]: r for r in compare_metrics(runs, reference, [k for k, _ in keys])}
    shown = [(k, head) for k, head in keys if k in rows]
    table = Table(title=title or f"{len(runs) - 1} variants against {reference}",
                  box=box.MARKDOWN if plain else box.SIMPLE_HEAD, title_justify="left",
                  caption="change: against the reference, in percent", caption_justify="left")
    table.add_column("run")
    for _, head in shown:
        table.add_column(head, justify="right")
    order = [reference] + [n for n in runs if n != reference]
    for name in order:
        cells: list[Text | str] = [name if name != reference else f"{name} (ref)"]
        for key, _ in shown:
            row = rows[key]
            cell = Text(format_value(key, row["values"][name]))
            d = row["deltas"].get(name)
            if d and d["pct"] is not None and d["delta"]:
                cell.append(f" {numbers.percent_change(d['pct'])}", style=_STYLE.get(d["verdict"] or "", ""))
            cells.append(cell)
        table.add_row(*cells)
    return table


__all__ = ["SUMMARY_FROM", "SUMMARY_KEYS", "summary_table"]
