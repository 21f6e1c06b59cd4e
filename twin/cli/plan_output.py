"""What ``twin plan`` and ``twin sweep`` show and write: the progress bar, the plan's candidates and deployments
tables, the sweep's summary table, and table files."""

from __future__ import annotations

import math
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from twin.cli.console import console, err_console
from twin.cli.plan_words import STEP_TIME, STEP_TIME_NOTE, limit_words, verdict_words
from twin.results import numbers
from twin.results.numbers import counted
from twin.results.report import label


def progress_bar(enabled: bool, what: str) -> Progress:
    return Progress(SpinnerColumn(), TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err_console, disable=not enabled, transient=True)


def write_table_file(frame, path: str) -> None:
    from twin.results.export import write_table

    write_table(frame, path)
    console.print(f"wrote {path}", highlight=False)


def fmt(v: Any, digits: int = 3, key: str = "") -> str:
    """A table cell (`twin.results.numbers`): latencies (``key`` ending ``_ms``) in their unit, other floats to
    ``digits`` significant figures, never an exponent."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return numbers.duration_ms(v, digits) if key.endswith("_ms") else numbers.number(v, digits)
    return str(v)


# the printed headers, in the words and units of `twin run`'s tables (the CSV / JSON keys stay as they are:
# docs/result-formats.md). "CI" is replaced by the plan's confidence level.
CANDIDATE_HEADERS: tuple[str, ...] = (
    "#", "GPU", "TP", "max seqs", "max batch tok", "prefix cache", "speculative decoding", "status",
    "max req/s per replica", "CI", "$/h per replica", "$/M out tok at max", "replicas (est.)", "limit above max")


def latency_columns(latency_key: str) -> list[str]:
    """The deployments table's latency columns: the plan's latency axis, then the TPOT p99 (once)."""
    return [latency_key] + ([] if latency_key == "p99_tpot_ms" else ["p99_tpot_ms"])


def deployment_headers(latency_key: str) -> tuple[str, ...]:
    """The deployments table's headers: the latency columns by their human names (``TTFT p99``), and the share
    of requests within the SLO (``goodput`` in `twin run` is requests per second)."""
    return ("#", "replicas", "GPU", "TP", "GPUs", "$/h", "meets SLO", *map(label, latency_columns(latency_key)),
            "within SLO (% of requests)", "$/M output tok", "limit")


def _describe(d: dict[str, Any]) -> str:
    spec = d.get("speculative_decoding")
    return (f"{d['gpu']} TP{d['tensor_parallel_size']} max_num_seqs={d['max_num_seqs']} "
            f"max_num_batched_tokens={d['max_num_batched_tokens']} "
            f"prefix_caching={'on' if d['enable_prefix_caching'] else 'off'}"
            + (f" speculative_decoding={spec}" if spec else ""))


def print_plan(result) -> None:
    key = result.spec.latency_metric
    table = Table(title="Candidates: max sustainable rate per replica", show_lines=False)
    shown: set[str] = set()                 # the limit cells printed, for STEP_TIME_NOTE
    cols = list(CANDIDATE_HEADERS)
    cols[cols.index("CI")] = f"{result.spec.confidence:.0%} CI (req/s)"
    has_spec = any(c.get("speculative_decoding") for c in result.candidates)
    for col in cols:
        if col == "speculative decoding" and not has_spec:
            continue
        table.add_column(col, justify="right" if col not in ("GPU", "status", "speculative decoding",
                                                             "limit above max") else "left")
    for c in result.candidates:
        if c["status"] == "infeasible":
            cells = [str(c["candidate"]), c.get("gpu") or "-", "-", "-", "-", "-", "-", "[red]infeasible[/]",
                     "-", "-", "-", "-", "-", "-"]
            table.add_row(*(cells if has_spec else cells[:6] + cells[7:]))
            continue
        ci = "-" if c.get("max_rate_ci_low") is None else \
            f"{numbers.number(c['max_rate_ci_low'])}..{numbers.number(c['max_rate_ci_high'])}"
        rate = fmt(c.get("max_rate_per_s"))
        if c["status"] == "pruned":
            rate = f"< {numbers.number(c['max_rate_upper_bound'])}"
        cells = [str(c["candidate"]), c["gpu"], str(c["tensor_parallel_size"]), str(c["max_num_seqs"]),
                 str(c["max_num_batched_tokens"]), "on" if c["enable_prefix_caching"] else "off",
                 c.get("speculative_decoding") or "-", c["status"], rate, ci,
                 fmt(c.get("price_per_replica_hour")), fmt(c.get("usd_per_million_output_tokens_at_max_rate"), 3),
                 fmt(c.get("replicas_estimate")), fmt(limit_words(c.get("limit"), False))]   # its first failing run
        shown.add(cells[-1])
        table.add_row(*(cells if has_spec else cells[:6] + cells[7:]))
    console.print(table)
    for c in result.candidates:
        if c["status"] in ("infeasible", "never", "error", "unbounded"):
            console.print(f"  candidate {c['candidate']} ({c['overrides']}): {c['status']}: {c['note']}",
                          highlight=False)
    table = Table(title=f"Deployments simulated at {numbers.with_unit(result.target_rate, 'req/s')} (router {result.spec.router}); "
                        f"# is the candidate")
    headers = deployment_headers(key)
    for col in headers:
        table.add_column(col, justify="left" if col in ("GPU", "limit") else "right")
    latency_keys = latency_columns(key)
    for d in result.deployments:
        if not d.get("replicas"):
            table.add_row(str(d["candidate"]), "-", d["gpu"], str(d["tensor_parallel_size"]), "-", "-",
                          "[red]no[/]", *["-"] * (len(headers) - 7))
            continue
        mark = "[green]yes[/]" if d["passed"] else "[red]no[/]"
        table.add_row(str(d["candidate"]), str(d["replicas"]), d["gpu"], str(d["tensor_parallel_size"]),
                      str(d["gpus"]), f"{d['cost_per_hour']:.2f}", mark, *(fmt(d.get(k), key=k) for k in latency_keys),
                      numbers.percent(d.get("goodput_fraction")), fmt(d.get("usd_per_million_output_tokens"), 3),
                      fmt(limit_words(d.get("limit"), d["passed"])))
        shown.add(fmt(limit_words(d.get("limit"), d["passed"])))
    console.print(table)
    for d in result.deployments:
        if not d.get("replicas") and d.get("note"):
            console.print(f"  candidate {d['candidate']}: {d['note']}", highlight=False)
    if STEP_TIME in shown:
        console.print(STEP_TIME_NOTE, highlight=False)
    if result.best:
        b = result.best
        console.print(f"[bold]cheapest:[/] {b['replicas']} x {_describe(b)} = {counted(b['gpus'], 'GPU')}, "
                      f"${b['cost_per_hour']:.2f}/h, ${fmt(b.get('usd_per_million_output_tokens'))} per million "
                      f"output tokens, {label(key)} {fmt(b.get(key), key=key)}", highlight=False)
        console.print(f"frontier ($/h -> {label(key)}): " + "; ".join(
            f"${d['cost_per_hour']:.2f}/h {d['replicas']}x{d['tensor_parallel_size']} {d['gpu']} -> "   # as twin run
            f"{fmt(d.get(key), key=key)}"
            for d in result.frontier), highlight=False)
    else:
        console.print("[bold red]no deployment in the search space meets the SLOs[/] (raise max_replicas, "
                      "widen the search, or relax the SLOs)")
    print_plan_bands(result)
    print_whatif(result.whatif)
    console.print(f"{counted(result.num_simulations, 'simulation')} in {counted(result.num_waves, 'wave')}, "
                  f"{result.wall_s:.1f} s", highlight=False)


def print_plan_bands(result) -> None:
    """Under the plan: for the cheapest deployment, the margin the held-out evidence says to leave (the
    twin's error on servers of its kind it was not fitted on), then the held-out error bands of every
    deployment simulated at the target (``twin.plan.heldout_rows``; issue 33)."""
    from twin.plan.heldout_rows import band_note, margin_line

    order = result.band_order()
    if result.best:
        name, keys = next(iter(order.items()))            # the cheapest comes first
        line = margin_line(keys)
        if line:
            console.print(f"cheapest {name}: {line}", highlight=False, markup=False)
    for line in band_note(order):
        console.print(line, highlight=False, markup=False)


# the sweep table's printed headers beside its summary keys (the CSV / Parquet keep the keys)
SWEEP_HEADERS: dict[str, str] = {"offered_rate_per_s": "offered rate (req/s)", "passed": "meets SLO",
                                 "usd_per_million_output_tokens": "$/M output tok", "limit": "limit"}


def sweep_header(key: str, knob_keys=()) -> str:
    """A sweep column's printed header: a grid knob by its dotted key (what the user typed in --grid), a
    metric by `twin run`'s name with its unit (``TTFT p99``, ``request throughput (req/s)``)."""
    if key in knob_keys:
        return key
    return SWEEP_HEADERS.get(key) or label(key)


def print_whatif(view: dict[str, Any] | None) -> None:
    """The what-if band along a sweep's axes or between a plan's candidates (``twin.plan.whatif_axes``)."""
    for line in (view or {}).get("lines", []):
        console.print(line, highlight=False, markup=False)


def print_sweep(summary, knob_keys, spec, whatif: dict[str, Any] | None = None) -> None:
    table = Table(title="Sweep (means over replications)")
    cols = [*knob_keys]
    if spec.rate_axis:
        cols += ["offered_rate_per_s"]
    cols += ["status", "passed", "request_throughput", "p99_ttft_ms", "p99_tpot_ms", "p99_e2el_ms"]
    if "usd_per_million_output_tokens" in summary:
        cols.append("usd_per_million_output_tokens")
    cols.append("limit")                      # what limits each configuration (twin.analysis.run_limits)
    for c in cols:
        table.add_column(sweep_header(c, knob_keys), justify="left" if c == "limit" else "right")
    shown: set[str] = set()                 # the limit cells printed, for STEP_TIME_NOTE
    for _, row in summary.head(200).iterrows():
        cells = []
        for c in cols:
            v = row.get(c)
            if c == "passed":
                cells.append(verdict_words(v, row.get("status")))
            elif c == "limit":
                cells.append(fmt(limit_words(v, row.get("passed"))))
                shown.add(cells[-1])
            else:
                cells.append(fmt(v.item() if hasattr(v, "item") else v, key=c))
        table.add_row(*cells)
    console.print(table)
    if len(summary) > 200:
        console.print(f"(first 200 of {len(summary)} rows; --summary-out writes them all)")
    if STEP_TIME in shown:
        console.print(STEP_TIME_NOTE, highlight=False)
    print_sweep_bands(summary, knob_keys)
    print_whatif(whatif)


def print_sweep_bands(summary, knob_keys) -> None:
    """Under the sweep's table: how far off the twin has been on held-out servers like each configuration's
    (``twin.plan.heldout_rows``; issue 33), naming the configurations by their grid values where they are on
    different servers."""
    from twin.plan.heldout_rows import band_note, column_keys

    if "heldout_bands" not in summary:
        return
    keys = {}
    for _, row in summary.iterrows():
        name = ", ".join(f"{k}={fmt(row.get(k))}" for k in knob_keys) or "the scenario"
        keys.setdefault(name, column_keys(row.get("heldout_bands")))
    for line in band_note(keys):
        console.print(line, highlight=False, markup=False)
