"""Tables that fit the terminal's width (80 columns and up) without cutting a cell.

Rich shrinks a table that is too wide by cutting cells short ("…") or squeezing columns to nothing. Instead,
:func:`fit_table` keeps a table that fits as it is; wraps one whose words fit (the first columns, the row's
name, never wrap); and otherwise splits its columns over several tables ("pages"), each repeating the first
``keep`` columns and a row number (unless the first column is one, ``#``), so every cell is shown whole. :func:`pack` is the greedy packing behind the pages, for
callers that build each page themselves (the comparison of many variants).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import TypeVar

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

T = TypeVar("T")
UNBOUNDED = 10_000
LONG_WORD = 24          # a word longer than this may be folded across lines rather than force a page


def measure(console: Console, table: Table) -> Measurement:
    """The table's (minimum, natural) width: its longest words side by side, and its cells unwrapped."""
    return console.measure(table, options=console.options.update_width(UNBOUNDED))


def wrapped_width(console: Console, table: Table) -> int:
    """The narrowest the table gets by wrapping its cells at spaces, words longer than ``LONG_WORD`` folded
    (columns that never wrap keep their natural width)."""
    options = console.options.update_width(UNBOUNDED)
    total = table._extra_width
    for column in table.columns:
        size = table._measure_column(console, options, column)
        total += size.maximum if column.no_wrap else min(size.minimum, LONG_WORD)
    return total


def pack(items: Sequence[T], fits: Callable[[list[T]], bool]) -> list[list[T]]:
    """Consecutive groups of ``items``, each as long as ``fits`` allows (at least one item per group)."""
    groups: list[list[T]] = []
    current: list[T] = []
    for item in items:
        if current and not fits(current + [item]):
            groups.append(current)
            current = [item]
        else:
            current.append(item)
    if current:
        groups.append(current)
    return groups


def with_columns(table: Table, indices: Sequence[int], title: str | None = None) -> Table:
    """A copy of ``table`` with only the columns at ``indices`` (and the same rows)."""
    out = copy.copy(table)
    out.columns = []
    for new_index, i in enumerate(indices):
        column = copy.copy(table.columns[i])
        column._index = new_index
        column._cells = list(table.columns[i]._cells)
        out.columns.append(column)
    if title is not None:
        out.title = title
    return out


def _unclipped(table: Table, console: Console, width: int, keep: int) -> Table:
    """A copy whose cells wrap (and fold a word longer than its column) instead of being cut with "…"; the
    first ``keep`` columns never wrap when they take at most half the width."""
    out = with_columns(table, range(len(table.columns)))
    for i, column in enumerate(out.columns):
        column.overflow = "fold"
        if i < keep:
            natural = measure(console, with_columns(table, [i])).maximum
            column.no_wrap = column.no_wrap or natural <= width // 2
    return out


def _numbered(table: Table) -> Table:
    """A copy with a leading ``#`` column numbering the rows from 1."""
    out = with_columns(table, range(len(table.columns)))
    number = copy.copy(out.columns[0])
    number.header, number.justify, number.no_wrap, number.ratio = "#", "right", True, None
    number.style, number.header_style, number.footer = "", "", ""
    number._cells = [str(i) for i in range(1, table.row_count + 1)]
    out.columns.insert(0, number)
    for i, column in enumerate(out.columns):
        column._index = i
    return out


def fit_table(table: Table, console: Console, width: int | None = None, *, keep: int = 1) -> list[Table]:
    """``table`` as one or more tables no wider than ``width`` (default: the console's), no cell cut short."""
    width = width or console.width
    size = measure(console, table)
    if size.maximum <= width or len(table.columns) <= keep:
        return [table]
    wrapped = _unclipped(table, console, width, keep)
    if wrapped_width(console, wrapped) <= width:
        return [wrapped]
    if str(wrapped.columns[0].header).strip() != "#":      # pages name each row: a row number leads them
        wrapped = _numbered(wrapped)
        keep += 1
    # narrow leading columns (a row's short name: "#", "N") come along on every page too
    while keep < len(wrapped.columns) - 1 and \
            measure(console, with_columns(wrapped, range(keep + 1))).maximum <= width // 4:
        keep += 1
    keys = list(range(keep))
    pages = pack(list(range(keep, len(wrapped.columns))),
                 lambda cols: measure(console, with_columns(wrapped, keys + cols)).maximum <= width)
    if len(pages) == 1:
        return [wrapped]
    title = str(table.title) if table.title else "table"
    out = []
    for n, cols in enumerate(pages, 1):
        page = with_columns(wrapped, keys + cols)
        page.title = f"{title} ({n}/{len(pages)})"
        if n > 1 and len(page.title) > measure(console, page).maximum:
            page.title = f"continued ({n}/{len(pages)})"      # the first page's title is the whole one
        if n < len(pages):
            page.caption = None
        out.append(page)
    return out


__all__ = ["fit_table", "measure", "pack", "with_columns", "wrapped_width"]
