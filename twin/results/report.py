"""Terminal output: a compact summary of one run and a side-by-side comparison of several.

Both take the flat metrics dict of `twin.results.metrics.compute_metrics` (or `twin.results.export.flatten_result` of a
result JSON, so a real `vllm bench serve` file compares with the twin's). On a terminal they draw rich tables
with colour; printed to a file or pipe the same tables come out as plain Markdown-style text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from twin.errors import TwinInputError
from twin.results import numbers
from twin.results.numbers import finite_number

# +1: higher is better, -1: lower is better, 0: neither
_HIGHER = {
    "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
    "max_output_tokens_per_s", "completed", "num_good_requests", "prefix_cache_hit_rate",
    "prefix_cache_hit_tokens", "spec_decode_acceptance_rate", "spec_decode_acceptance_length",
}
_LOWER = {"failed", "num_rejected", "num_aborted", "num_incomplete", "num_preemptions", "mean_queue_length"}
_FRACTIONS = {"prefix_cache_hit_rate", "busy_fraction", "mean_kv_usage", "p99_kv_usage", "max_kv_usage"}
_PERCENT = {"spec_decode_acceptance_rate"}
_INTEGERS = {"completed", "failed", "total_input_tokens", "total_output_tokens", "max_concurrent_requests",
             "num_requests", "num_rejected", "num_aborted", "num_incomplete", "num_good_requests", "num_preemptions",
             "num_steps", "prefix_cache_hit_tokens", "prefix_cache_query_tokens", "spec_decode_num_drafts",
             "spec_decode_draft_tokens", "spec_decode_accepted_tokens", "num_replicas"}

_LATENCY_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}
_STAT_NAMES = {"mean": "mean", "median": "p50", "std": "std"}

LABELS: dict[str, str] = {
    "duration": "duration",
    "completed": "completed requests",
    "failed": "failed (rejected or timed out)",
    "total_input_tokens": "input tokens",
    "total_output_tokens": "output tokens",
    "request_throughput": "request throughput (req/s)",
    "request_goodput": "goodput (req/s)",
    "output_throughput": "output throughput (tok/s)",
    "total_token_throughput": "total throughput (tok/s)",
    "max_output_tokens_per_s": "peak output (tok/s)",
    "max_concurrent_requests": "peak concurrent requests",
    "num_good_requests": "requests within SLO",
    "prefix_cache_hit_rate": "prefix cache hit rate",
    "num_preemptions": "preemptions",
    "num_rejected": "rejected",
    "num_aborted": "timed out (aborted)",
    "num_incomplete": "unfinished at end",
    "mean_kv_usage": "KV usage mean",
    "p99_kv_usage": "KV usage p99",
    "max_kv_usage": "KV usage max",
    "busy_fraction": "busy fraction",
    "mean_running_batch": "mean running batch",
    "mean_queue_length": "mean queue length",
    "mean_batched_tokens": "mean tokens per step",
    "num_steps": "engine steps",
    "spec_decode_acceptance_rate": "spec acceptance rate",
    "spec_decode_acceptance_length": "spec acceptance length",
    "spec_decode_num_drafts": "spec drafts",
}

COMPARISON_KEYS: tuple[str, ...] = (
    "request_throughput", "output_throughput", "request_goodput", "max_output_tokens_per_s",
    "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "p99_itl_ms",
    "mean_e2el_ms", "p99_e2el_ms",
    "completed", "failed", "prefix_cache_hit_rate", "num_preemptions",
    "mean_kv_usage", "busy_fraction", "mean_running_batch", "mean_queue_length",
    "spec_decode_acceptance_rate", "spec_decode_acceptance_length",
)


def label(key: str) -> str:
    if key in LABELS:
        return LABELS[key]
    parts = key.split("_")
    if len(parts) == 3 and parts[2] == "ms" and parts[1] in _LATENCY_NAMES:
        stat = _STAT_NAMES.get(parts[0], parts[0])
        return f"{_LATENCY_NAMES[parts[1]]} {stat}"   # the value carries its unit (ms, s, min)
    return key.replace("_", " ")


def direction(key: str) -> int:
    """+1 if a larger value is better, -1 if smaller is better, 0 if neither."""
    if key in _HIGHER:
        return 1
    if key in _LOWER or (key.endswith("_ms") and key.split("_")[0] != "std"):
        return -1
    return 0


def format_value(key: str, value: Any) -> str:
    """A metric's value as a table or card shows it (``twin.results.numbers``): latencies (``*_ms``) and the
    duration with their scaled unit (``812 ms``, ``4.51 s``, ``4.00 min``), shares in percent, counts exact,
    anything else to 3 significant figures (``12.3k`` from 10,000)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    v = finite_number(value)
    if v is None:
        return "-" if value is None else str(value)
    if key in _FRACTIONS:
        return numbers.percent(v)
    if key in _PERCENT:
        return f"{v:.1f}%"
    if key in _INTEGERS:
        return numbers.count(v)
    if key.endswith("_ms"):
        return numbers.duration_ms(v)
    if key == "duration":
        return numbers.duration_s(v)
    return numbers.number(v)


def format_delta(key: str, delta: float, pct: float | None) -> str:
    """A change against the baseline: ``+3.75 ms, +22.6%``; shares in percentage points (``-0.05 pp``, never
    ``-0.0``: ``numbers.small_change``), counts exact."""
    if delta == 0:
        return "="
    if key in _FRACTIONS:
        text = numbers.small_change(delta * 100, " pp")
    elif key in _PERCENT:
        text = numbers.small_change(delta, " pp")
    elif key in _INTEGERS:
        text = f"{delta:+,.0f}"
    elif key.endswith("_ms"):
        text = numbers.delta_ms(delta)
    elif key == "duration":
        text = numbers.signed(numbers.duration_s(abs(delta)), delta)
    else:
        text = numbers.delta(delta)
    if pct is not None:
        text += f", {numbers.percent_change(pct)}"
    return text


def _box(console: Console) -> box.Box:
    return box.SIMPLE_HEAD if console.is_terminal else box.MARKDOWN


# --------------------------------------------------------------------------------------------------------
# one run
# --------------------------------------------------------------------------------------------------------
def summary_tables(metrics: Mapping[str, Any], title: str = "Results", *, plain: bool = False) -> Group:
    """The summary as rich renderables (a latency table and a throughput/server table)."""
    style = box.MARKDOWN if plain else box.SIMPLE_HEAD
    lat = Table(title=f"{title}: latency", box=style, title_justify="left")
    lat.add_column("")
    for col in ("mean", "p50", "p90", "p99"):
        lat.add_column(col, justify="right")
    for m, name in _LATENCY_NAMES.items():
        row = [metrics.get(f"{stat}_{m}_ms") for stat in ("mean", "median", "p90", "p99")]
        lat.add_row(name, *(format_value(f"x_{m}_ms", v) for v in row))

    kv = Table(title=f"{title}: throughput and server", box=style, title_justify="left", show_header=False)
    kv.add_column("metric")
    kv.add_column("value", justify="right")
    kv.add_column("metric")
    kv.add_column("value", justify="right")
    items: list[tuple[str, str]] = []

    def add(key: str, text: str | None = None) -> None:
        if key in metrics:
            items.append((label(key), text if text is not None else format_value(key, metrics.get(key))))

    add("completed")
    add("failed")
    add("duration")
    add("request_throughput")
    add("output_throughput")
    add("total_token_throughput")
    if metrics.get("request_goodput") is not None:
        add("request_goodput")
    add("max_output_tokens_per_s")
    add("max_concurrent_requests")
    add("prefix_cache_hit_rate")
    add("num_preemptions")
    if metrics.get("num_incomplete"):
        add("num_incomplete")
    if "mean_kv_usage" in metrics:
        items.append(("KV usage mean / p99", f"{format_value('mean_kv_usage', metrics.get('mean_kv_usage'))} / "
                                             f"{format_value('p99_kv_usage', metrics.get('p99_kv_usage'))}"))
    add("busy_fraction")
    add("mean_running_batch")
    add("mean_queue_length")
    if metrics.get("spec_decode_num_drafts"):
        add("spec_decode_acceptance_rate")
        add("spec_decode_acceptance_length")
    for key, met in (metrics.get("slo_met") or {}).items():
        items.append((f"SLO {label(key)}", "-" if met is None else ("met" if met else "MISSED")))
    half = (len(items) + 1) // 2
    for left, right in zip(items[:half], items[half:] + [("", "")]):
        kv.add_row(left[0], left[1], right[0], right[1])
    return Group(lat, kv)


def render_summary(metrics: Mapping[str, Any], title: str = "Results", console: Console | None = None) -> None:
    """Print a compact summary of one run's metrics."""
    console = console or Console()
    console.print(summary_tables(metrics, title, plain=not console.is_terminal))


# --------------------------------------------------------------------------------------------------------
# one run, replica by replica
# --------------------------------------------------------------------------------------------------------
PER_REPLICA_COLUMNS: tuple[tuple[str, str], ...] = (
    ("num_requests", "reqs"), ("output_throughput", "tok/s"), ("median_ttft_ms", "TTFT\np50"),
    ("p99_ttft_ms", "TTFT\np99"), ("median_tpot_ms", "TPOT\np50"), ("mean_kv_usage", "KV\nuse"),
    ("prefix_cache_hit_rate", "hits"),
)
MAX_REPLICA_ROWS = 32


def replica_label(row: Mapping[str, Any]) -> str:
    """``fast · H100-SXM``, or just the GPU for an unnamed group; ``TP2`` appended above TP 1."""
    gpu = str(row.get("gpu") or "?")
    tp = row.get("tensor_parallel_size")
    if isinstance(tp, int) and tp > 1:
        gpu += f" TP{tp}"
    group = row.get("group")
    return f"{group} · {gpu}" if isinstance(group, str) else gpu


def per_replica_table(rows: Sequence[Mapping[str, Any]], imbalance: float | None = None, *,
                      plain: bool = False, max_rows: int = MAX_REPLICA_ROWS) -> Table:
    """One row per replica (``twin.results.per_replica.per_replica_metrics``): its group and GPU, requests, output
    throughput, TTFT p50/p99 and TPOT p50 (ms), mean KV usage and prefix-cache hit rate; the title carries the
    load imbalance (max over mean requests per replica). At most ``max_rows`` rows; a note counts the rest."""
    title = "per replica"
    if imbalance is not None:
        title += f" (load imbalance {imbalance:.2f}: max / mean requests)"
    notes = []
    if any(row.get("num_preemptions") for row in rows):
        notes.append("hits: cached / prompt tokens at each request's first admission (the summary's hit rate "
                     "also counts re-admissions after preemption)")
    if len(rows) > max_rows:
        notes.append(f"... and {len(rows) - max_rows} more replicas (--replicas-out has every row)")
    table = Table(title=title, box=box.MARKDOWN if plain else box.SIMPLE_HEAD, title_justify="left",
                  caption="\n".join(notes) or None, caption_justify="left")
    table.add_column("#", justify="right")
    table.add_column("group / GPU", no_wrap=True)   # the row's name: wraps never split it
    for _, head in PER_REPLICA_COLUMNS:   # a value and its unit stay on one line; a header may wrap
        table.add_column(head, justify="right", no_wrap=True)
    for row in rows[:max_rows]:
        table.add_row(str(row.get("replica")), replica_label(row),
                      *(format_value(key, row.get(key)) for key, _ in PER_REPLICA_COLUMNS))
    return table


def render_per_replica(rows: Sequence[Mapping[str, Any]], imbalance: float | None = None,
                       console: Console | None = None) -> None:
    """Print the per-replica table within the console's width (a console of `twin.cli.console` splits a table
    too wide for it rather than cut a cell)."""
    console = console or Console()
    table = per_replica_table(rows, imbalance, plain=not console.is_terminal)
    notes, table.caption = table.caption, None     # below the table at the full width, however it is split
    console.print(table)
    if notes:
        console.print(notes, highlight=False)


# --------------------------------------------------------------------------------------------------------
# several runs
# --------------------------------------------------------------------------------------------------------
def compare_metrics(runs: Mapping[str, Mapping[str, Any]], baseline: str | None = None,
                    keys: Sequence[str] | None = None) -> list[dict]:
    """Rows of a comparison: for each key, each run's value and its delta against ``baseline`` (absolute,
    percent of the baseline or ``None`` where the baseline is 0 or missing) and a verdict, "better", "worse",
    "same" or ``None`` (no direction or no value). Keys no run has a value for are left out."""
    if not runs:
        raise TwinInputError("compare: no runs to compare")
    names = list(runs)
    if baseline is None:
        baseline = names[0]
    if baseline not in runs:
        raise TwinInputError(f"compare baseline: {baseline!r} is not one of the runs ({', '.join(map(str, names))})")
    if keys is None:
        keys = list(COMPARISON_KEYS)
    rows = []
    base = runs[baseline]
    for key in keys:
        values = {name: runs[name].get(key) for name in names}
        if all(finite_number(v) is None for v in values.values()):
            continue
        b = finite_number(base.get(key))
        deltas: dict[str, dict] = {}
        for name in names:
            if name == baseline:
                continue
            v = finite_number(values[name])
            if v is None or b is None:
                deltas[name] = {"delta": None, "pct": None, "verdict": None}
                continue
            d = v - b
            pct = d / abs(b) * 100 if b != 0 else None
            sign = direction(key)
            if d == 0:
                verdict = "same"
            elif sign == 0:
                verdict = None
            else:
                verdict = "better" if d * sign > 0 else "worse"
            deltas[name] = {"delta": d, "pct": pct, "verdict": verdict}
        rows.append({"key": key, "label": label(key), "values": values, "deltas": deltas})
    return rows


_VERDICT_STYLE = {"better": "green", "worse": "red"}


def comparison_table(runs: Mapping[str, Mapping[str, Any]], baseline: str | None = None, *,
                     keys: Sequence[str] | None = None, title: str | None = None, plain: bool = False) -> Table:
    names = list(runs)
    baseline = names[0] if baseline is None and names else baseline
    rows = compare_metrics(runs, baseline, keys)
    table = Table(title=title, box=box.MARKDOWN if plain else box.SIMPLE_HEAD, title_justify="left")
    table.add_column("metric")
    table.add_column(str(baseline) if baseline == "baseline" else f"{baseline} (reference)", justify="right")
    others = [n for n in names if n != baseline]
    for name in others:
        table.add_column(str(name), justify="right")
    for row in rows:
        key = row["key"]
        cells: list[Text | str] = [row["label"], format_value(key, row["values"][baseline])]
        for name in others:
            cell = Text(format_value(key, row["values"][name]))
            d = row["deltas"][name]
            if d["delta"] is not None:
                cell.append(f" ({format_delta(key, d['delta'], d['pct'])})",
                            style=_VERDICT_STYLE.get(d["verdict"] or "", ""))
            cells.append(cell)
        table.add_row(*cells)
    return table


def comparison_pages(runs: Mapping[str, Mapping[str, Any]], baseline: str | None = None, *, width: int,
                     console: Console, keys: Sequence[str] | None = None, title: str | None = None,
                     plain: bool = False) -> list[Table]:
    """The comparison as tables no wider than ``width``: as many variants beside the baseline as fit, the rest
    in further tables (each with the metric and baseline columns again), so no cell is cut short."""
    from twin.results.tables import measure, pack

    names = list(runs)
    baseline = names[0] if baseline is None and names else baseline

    def table(others: Sequence[str], page_title: str | None) -> Table:
        subset = {baseline: runs[baseline], **{n: runs[n] for n in others}} if baseline in runs else runs
        return comparison_table(subset, baseline, keys=keys, title=page_title, plain=plain)

    others = [n for n in names if n != baseline]
    if baseline not in runs or len(others) <= 1:
        return [comparison_table(runs, baseline, keys=keys, title=title, plain=plain)]
    pages = pack(others, lambda group: measure(console, table(group, title)).maximum <= width)
    if len(pages) == 1:
        return [table(others, title)]
    out, first = [], 1
    for group in pages:
        last = first + len(group) - 1
        span = f"variant {first}" if first == last else f"variants {first}-{last}"
        out.append(table(group, f"{title + ': ' if title else ''}{span} of {len(others)} against {baseline}"))
        first = last + 1
    return out


def render_comparison(runs: Mapping[str, Mapping[str, Any]], baseline: str | None = None,
                      console: Console | None = None, *, keys: Sequence[str] | None = None,
                      title: str | None = None) -> None:
    """Print runs side by side, each value with its delta to ``baseline`` (default: the first run), absolute
    and in percent; green where the change is better for that metric, red where worse. Variants that do not
    fit the console's width beside the baseline go to further tables."""
    console = console or Console()
    for table in comparison_pages(runs, baseline, width=console.width, console=console, keys=keys, title=title,
                                  plain=not console.is_terminal):
        console.print(table)
