"""``twin plan`` and ``twin sweep``: capacity planning and knob sweeps on a process pool or a Ray cluster."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click
import yaml
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
from twin.errors import TwinInputError

_BACKEND = click.Choice(["process", "ray", "serial"])


def _executor_options(f):
    f = click.option("--ray-address", help="Run on this Ray cluster (e.g. ray://head:10001 or auto); implies "
                                           "--backend ray.")(f)
    f = click.option("--backend", type=_BACKEND, default="process", show_default=True,
                     help="process: a local process pool; ray: a local Ray (or --ray-address); serial: here.")(f)
    f = click.option("--workers", "-j", type=click.IntRange(1, 4096),
                     help="Worker processes (default: the CPUs available).")(f)
    return f


def _common_options(f):
    f = click.option("--quiet", "-q", is_flag=True, help="No progress bar.")(f)
    f = click.option("--prices", "prices_file", type=click.Path(dir_okay=False),
                     help="YAML mapping GPU -> USD per GPU-hour (overrides the bundled approximate table).")(f)
    f = click.option("--price", "price_items", multiple=True, metavar="GPU=USD",
                     help="USD per GPU-hour for one GPU type (repeatable).")(f)
    f = click.option("--goodput", type=click.FloatRange(0, 1, min_open=True),
                     help="Fraction of requests that must meet every per-request SLO threshold.")(f)
    f = click.option("--slo", "slo_items", multiple=True, metavar="KEY=VALUE",
                     help="SLO in ms, e.g. ttft_ms.p99=1000, tpot_ms.p99=50 (a bound) or e2el_ms=20000 "
                          "(a per-request threshold, for goodput). Replaces the scenario's slo: section.")(f)
    f = click.option("--replications", type=click.IntRange(1, 1000), help="Replications (seeds) per point.")(f)
    f = click.option("--seed", type=int, help="Override the scenario's seed.")(f)
    f = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="Override a scenario field, e.g. --set workload.trace.window_s=300 (repeatable).")(f)
    f = click.option("--variant", "-v", default="baseline", show_default=True, help="Scenario variant.")(f)
    return f


def _progress(enabled: bool, what: str) -> Progress:
    return Progress(SpinnerColumn(), TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err_console, disable=not enabled, transient=True)


def _prices(price_items, prices_file, extra: dict[str, Any] | None = None):
    from twin.hardware.pricing import PriceTable, load_prices, parse_price_options

    given: dict[str, float] = {}
    if extra:
        from twin.hardware.pricing import _price_value

        given.update({str(k): _price_value(str(k), v) for k, v in extra.items()})
    if prices_file:
        given.update(load_prices(prices_file))
    given.update(parse_price_options(price_items))
    return PriceTable(given)


def _slo(slo_items) -> dict[str, Any] | None:
    from twin.scenario import parse_set_options

    if not slo_items:
        return None
    return parse_set_options([s if "=" in s else s.replace(":", "=", 1) for s in slo_items])


def _scenario_data(scenario_ref: str | dict, variant: str, sets, seed, base_dir: Path | None,
                   extra_overrides: dict | None = None) -> tuple[dict[str, Any], str | None]:
    from twin.scenario import Scenario, deep_merge, load_scenario, parse_set_options

    if isinstance(scenario_ref, dict):
        scenario = Scenario(scenario_ref, source="plan scenario", base_dir=base_dir)
    else:
        path = Path(scenario_ref)
        if base_dir is not None and not path.is_absolute() and (base_dir / path).exists():
            path = base_dir / path
        scenario = load_scenario(path)
    data = scenario.raw(variant)
    if extra_overrides:
        data = deep_merge(data, extra_overrides)
    overrides = parse_set_options(sets)
    if seed is not None:
        overrides["seed"] = seed
    data = deep_merge(data, overrides)
    scenario.body(variant, deep_merge(extra_overrides or {}, overrides))  # validate with a clear message
    bd = scenario.base_dir
    return data, None if bd is None else str(bd)


def _write_table(frame, path: str) -> None:
    from twin.results.export import write_table

    write_table(frame, path)
    console.print(f"wrote {path}", highlight=False)


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


# -------------------------------------------------------------------------------------------------------------
# twin plan
# -------------------------------------------------------------------------------------------------------------
@click.command()
@click.argument("target")
@_common_options
@click.option("--target-rate", type=click.FloatRange(0, min_open=True),
              help="Requests per second to serve (default: the scenario's own rate).")
@click.option("--search", "search_items", multiple=True, metavar="KEY=V1,V2",
              help="A search axis, e.g. deployment.gpu=H100-SXM,H200-SXM or server.max_num_seqs=64,256 "
                   "(repeatable; replaces the default space).")
@click.option("--router", type=click.Choice(["round_robin", "least_outstanding", "least_kv_usage",
                                             "prefix_affinity", "kv_cache_aware"]),
              help="Router in front of the replicas (default least_outstanding).")
@click.option("--rel-tol", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Bisection stops when failing/passing rate <= 1 + rel_tol (default 0.05).")
@click.option("--confidence", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Confidence level of the max-rate intervals (default 0.95).")
@click.option("--max-replicas", type=click.IntRange(1, 100000), help="Largest cluster to consider (default 256).")
@click.option("--frontier-extra", type=click.IntRange(0, 16),
              help="Extra replica counts per hardware option for the frontier (default 1).")
@click.option("--no-prune", is_flag=True, help="Measure every candidate's max rate fully.")
@click.option("--verify-all", is_flag=True, help="Size and simulate every measured candidate, not only the best "
                                                 "per hardware option.")
@click.option("--latency-metric", help="The frontier's latency axis (default p99_ttft_ms).")
@_executor_options
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the whole plan as JSON.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False),
              help="Candidates table (.csv or .parquet).")
@click.option("--deployments-csv", type=click.Path(dir_okay=False),
              help="Deployments simulated at the target (.csv or .parquet).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="Cost-latency frontier (Plotly HTML).")
def plan(target: str, variant: str, sets, seed, replications, slo_items, goodput, price_items, prices_file,
         quiet, target_rate, search_items, router, rel_tol, confidence, max_replicas, frontier_extra, no_prune,
         verify_all, latency_metric, workers, backend, ray_address, json_path, csv_path, deployments_csv,
         plot_path) -> None:
    """Find the cheapest deployment that serves TARGET's traffic within the SLOs.

    TARGET is a plan file (YAML with a `scenario:` key, see examples/plan_*.yaml) or a scenario. Prints every
    candidate's maximum sustainable rate per replica (bisection, with confidence intervals over
    replications), the deployments simulated at the target rate, the cheapest one and the cost-latency
    frontier."""
    from twin.plan.evaluate import Criteria
    from twin.plan.executor import Runner, make_executor
    from twin.plan.grid import parse_grid_options
    from twin.plan.plan_files import is_plan_file, read_plan_file
    from twin.plan.plan_spec import PlanSpec
    from twin.plan.planner import Planner
    from twin.scenario import resolve_scenario_path

    path = resolve_scenario_path(target)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        raise TwinInputError(f"{path}: malformed YAML") from None
    pf: dict[str, Any] = {}
    if is_plan_file(raw):
        pf = read_plan_file(raw, str(path))
        scenario_ref = pf["scenario"]
        plan_dir = path.parent
        if not isinstance(scenario_ref, (str, dict)):
            raise TwinInputError(f"{path}: scenario: must be a path or an inline scenario mapping")
        data, base_dir = _scenario_data(scenario_ref, pf.get("variant", variant) if variant == "baseline" else variant,
                                        sets, seed, plan_dir, pf.get("overrides"))
        if isinstance(scenario_ref, dict):
            base_dir = str(plan_dir)
    else:
        data, base_dir = _scenario_data(str(path), variant, sets, seed, None)
    slo = _slo(slo_items) or pf.get("slo") or data.get("slo") or None
    criteria = Criteria(slo, goodput if goodput is not None else pf.get("goodput"))
    prices = _prices(price_items, prices_file, pf.get("prices"))
    space = parse_grid_options(search_items) if search_items else [
        (k, list(v)) for k, v in (pf.get("search") or {}).items()]
    spec = PlanSpec(
        data=data, criteria=criteria, base_dir=base_dir, prices=prices,
        target_rate=target_rate if target_rate is not None else pf.get("target_rate_per_s"),
        space=space, candidates=None if search_items else pf.get("candidates"),
        router=router or pf.get("router") or "least_outstanding",
        replications=replications or pf.get("replications", 2),
        rel_tol=rel_tol or pf.get("rel_tol", 0.05), confidence=confidence or pf.get("confidence", 0.95),
        max_replicas=max_replicas or pf.get("max_replicas", 256),
        frontier_extra=frontier_extra if frontier_extra is not None else pf.get("frontier_extra_replicas", 1),
        prune=not no_prune and pf.get("prune", True), verify_all=verify_all or pf.get("verify_all", False),
        latency_metric=latency_metric or pf.get("latency_metric", "p99_ttft_ms"),
    )
    planner = Planner(spec)
    feasible = sum(c.error is None for c in planner.candidates)
    console.print(f"target {planner.target_rate:.4g} req/s = {planner.target_scale:.4g} x the scenario's "
                  f"{planner.base_rate:.4g} req/s | {len(planner.candidates)} candidates ({feasible} feasible) | "
                  f"SLO {json.dumps(criteria.as_dict()['slo'])}"
                  + (f", goodput >= {criteria.effective_goodput:g}" if criteria.effective_goodput else "")
                  + f" | router {spec.router} | {planner.replications} replications", highlight=False,
                  soft_wrap=True)
    with make_executor(backend, workers, ray_address) as executor, \
            _progress(not quiet and err_console.is_terminal, "simulations") as progress:
        task = progress.add_task("plan", total=None)
        runner = Runner(executor, on_done=lambda n: progress.advance(task, n))
        result = planner.run(runner)
    _print_plan(result)
    if json_path:
        from twin.results.export import dumps

        p = Path(json_path)
        if not p.parent.exists():
            raise TwinInputError(f"--json {json_path}: folder {p.parent} does not exist")
        p.write_text(dumps(result.to_dict()) + "\n", encoding="utf-8")
        console.print(f"wrote {json_path}", highlight=False)
    if csv_path:
        _write_table(result.candidates_frame(), csv_path)
    if deployments_csv:
        _write_table(result.deployments_frame(), deployments_csv)
    if plot_path:
        from twin.plan.sweep_tables import write_html

        write_html(result.figure(), plot_path)
        console.print(f"wrote {plot_path}", highlight=False)


def _describe(d: dict[str, Any]) -> str:
    spec = d.get("speculative_decoding")
    return (f"{d['gpu']} TP{d['tensor_parallel_size']} seqs={d['max_num_seqs']} "
            f"tok={d['max_num_batched_tokens']} cache={'on' if d['enable_prefix_caching'] else 'off'}"
            + (f" spec={spec}" if spec else ""))


def _print_plan(result) -> None:
    key = result.spec.latency_metric
    table = Table(title="Candidates: max sustainable rate per replica", show_lines=False)
    cols = ["#", "GPU", "TP", "seqs", "tok", "cache", "spec", "status", "max req/s",
            f"{result.spec.confidence:.0%} CI", "$/h", "$/M out @max", "N est"]
    has_spec = any(c.get("speculative_decoding") for c in result.candidates)
    for col in cols:
        if col == "spec" and not has_spec:
            continue
        table.add_column(col, justify="right" if col not in ("GPU", "status", "spec") else "left")
    for c in result.candidates:
        if c["status"] == "infeasible":
            cells = [str(c["candidate"]), c.get("gpu") or "-", "-", "-", "-", "-", "-", "[red]infeasible[/]",
                     "-", "-", "-", "-", "-"]
            table.add_row(*(cells if has_spec else cells[:6] + cells[7:]))
            continue
        ci = "-" if c.get("max_rate_ci_low") is None else f"{c['max_rate_ci_low']:.4g}..{c['max_rate_ci_high']:.4g}"
        rate = _fmt(c.get("max_rate_per_s"))
        if c["status"] == "pruned":
            rate = f"< {c['max_rate_upper_bound']:.4g}"
        cells = [str(c["candidate"]), c["gpu"], str(c["tensor_parallel_size"]), str(c["max_num_seqs"]),
                 str(c["max_num_batched_tokens"]), "on" if c["enable_prefix_caching"] else "off",
                 c.get("speculative_decoding") or "-", c["status"], rate, ci,
                 _fmt(c.get("price_per_replica_hour")), _fmt(c.get("usd_per_million_output_tokens_at_max_rate"), 3),
                 _fmt(c.get("replicas_estimate"))]
        table.add_row(*(cells if has_spec else cells[:6] + cells[7:]))
    console.print(table)
    for c in result.candidates:
        if c["status"] in ("infeasible", "never", "error", "unbounded"):
            console.print(f"  candidate {c['candidate']} ({c['overrides']}): {c['status']}: {c['note']}",
                          highlight=False, soft_wrap=True)
    table = Table(title=f"Deployments simulated at {result.target_rate:.4g} req/s (router {result.spec.router}); "
                        f"# is the candidate")
    short = {"p99_ttft_ms": "p99 TTFT", "p99_tpot_ms": "p99 TPOT", "p99_e2el_ms": "p99 E2EL"}
    for col in ("#", "N", "GPU", "TP", "GPUs", "$/h", "ok", short.get(key, key), "p99 TPOT", "goodput",
                "$/M out"):
        table.add_column(col, justify="left" if col == "GPU" else "right")
    for d in result.deployments:
        if not d.get("replicas"):
            table.add_row(str(d["candidate"]), "-", d["gpu"], str(d["tensor_parallel_size"]), "-", "-",
                          "[red]no[/]", "-", "-", "-", "-")
            continue
        mark = "[green]yes[/]" if d["passed"] else "[red]no[/]"
        table.add_row(str(d["candidate"]), str(d["replicas"]), d["gpu"], str(d["tensor_parallel_size"]),
                      str(d["gpus"]), f"{d['cost_per_hour']:.2f}", mark, _fmt(d.get(key)),
                      _fmt(d.get("p99_tpot_ms")), _fmt(d.get("goodput_fraction"), 3),
                      _fmt(d.get("usd_per_million_output_tokens"), 3))
    console.print(table)
    for d in result.deployments:
        if not d.get("replicas") and d.get("note"):
            console.print(f"  candidate {d['candidate']}: {d['note']}", highlight=False, soft_wrap=True)
    if result.best:
        b = result.best
        console.print(f"[bold]cheapest:[/] {b['replicas']} x {_describe(b)} = {b['gpus']} GPUs, "
                      f"${b['cost_per_hour']:.2f}/h, ${_fmt(b.get('usd_per_million_output_tokens'))} per million "
                      f"output tokens, {key} {_fmt(b.get(key))}", highlight=False, soft_wrap=True)
        console.print("frontier (cost -> " + key + "): " + "; ".join(
            f"${d['cost_per_hour']:.2f}/h {d['replicas']}x{d['gpu']} -> {_fmt(d.get(key))}" for d in result.frontier),
            highlight=False, soft_wrap=True)
    else:
        console.print("[bold red]no deployment in the search space meets the SLOs[/] (raise max_replicas, "
                      "widen the search, or relax the SLOs)")
    console.print(f"{result.num_simulations} simulations in {result.num_waves} waves, {result.wall_s:.1f} s",
                  highlight=False)


# -------------------------------------------------------------------------------------------------------------
# twin sweep
# -------------------------------------------------------------------------------------------------------------
@click.command()
@click.argument("scenario")
@click.option("--grid", "grid_items", multiple=True, metavar="KEY=V1,V2",
              help="An axis of the grid: a dotted scenario key (server.max_num_seqs=4,16,64), rate_scale=0.5,1,2 "
                   "or rate=10,20,40 (req/s). Repeatable; the grid is their product.")
@_common_options
@click.option("--prune", type=click.Choice(["monotone", "bisect", "none"]), default="monotone", show_default=True,
              help="Along the rate axis, with SLOs: skip rates above a failure (monotone), bisect the rates "
                   "(bisect), or run everything (none).")
@click.option("--search", "search_kind", type=click.Choice(["grid", "optuna"]), default="grid", show_default=True,
              help="Run the whole grid, or let Optuna (if installed) sample it.")
@click.option("--trials", type=click.IntRange(1, 100000), default=32, show_default=True, help="Optuna trials.")
@click.option("--objective", default="output_throughput", show_default=True,
              help="Optuna objective: a metric key (SLO misses score worst).")
@click.option("--direction", type=click.Choice(["maximize", "minimize"]), default="maximize", show_default=True)
@click.option("--batch", type=click.IntRange(1, 1024), default=4, show_default=True,
              help="Optuna trials per wave (fixed, so results do not depend on the workers).")
@_executor_options
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help="Every run as a table: .csv or .parquet (one row per config, rate and replication).")
@click.option("--summary-out", type=click.Path(dir_okay=False), help="The per-(config, rate) summary table.")
@click.option("--per-replica", is_flag=True, help="Add each run's per-replica metrics (a JSON column) to --out.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), help="A Plotly HTML plot of the summary.")
@click.option("--x", "x_key", help="Plot x axis (default: offered rate).")
@click.option("--y", "y_key", default="p99_ttft_ms", show_default=True, help="Plot y axis.")
@click.option("--color", "color_key", help="Plot colour: a grid key (default: the first one).")
def sweep(scenario: str, grid_items, variant, sets, seed, replications, slo_items, goodput, price_items,
          prices_file, quiet, prune, search_kind, trials, objective, direction, batch, workers, backend,
          ray_address, out_path, summary_out, per_replica, plot_path, x_key, y_key, color_key) -> None:
    """Run SCENARIO over a grid of knobs (and arrival rates) in parallel, print a table, write results."""
    from twin.plan.evaluate import Criteria
    from twin.plan.executor import Runner, make_executor
    from twin.plan.grid import parse_grid_options
    from twin.plan.sweep import SweepSpec, sweep_search
    from twin.plan.sweep_optuna import optuna_search
    from twin.plan.sweep_tables import rows_frame, summarize, sweep_figure, write_html

    if not grid_items:
        raise TwinInputError("--grid: give at least one axis, e.g. --grid server.max_num_seqs=4,16,64")
    data, base_dir = _scenario_data(scenario, variant, sets, seed, None)
    grid = parse_grid_options(grid_items)
    slo = _slo(slo_items) or data.get("slo") or None
    criteria = Criteria(slo, goodput) if (slo or goodput is not None) else None
    spec = SweepSpec(data, grid, base_dir, replications or data.get("replications", 1), criteria, prune,
                     _prices(price_items, prices_file), per_replica=per_replica)
    n_configs = len(spec.configs())
    n_rates = len(spec.rate_axis[1]) if spec.rate_axis else 1
    total = n_configs * n_rates * spec.replications
    console.print(f"{n_configs} configurations x {n_rates} rates x {spec.replications} replications = {total} "
                  f"runs at most | backend {('ray' if ray_address else backend)}", highlight=False)
    with make_executor(backend, workers, ray_address) as executor, \
            _progress(not quiet and err_console.is_terminal, "sweep") as progress:
        task = progress.add_task("sweep", total=total if search_kind == "grid" else None)
        runner = Runner(executor, on_done=lambda n: progress.advance(task, n))
        if search_kind == "optuna":
            rows = runner.drive(optuna_search(spec, trials=trials, objective=objective, direction=direction,
                                              batch=batch, seed=int(data.get("seed", 0))))
        else:
            rows = runner.drive(sweep_search(spec))
    knob_keys = [k for k, _ in spec.knob_axes]
    summary = summarize(rows, knob_keys)
    _print_sweep(summary, knob_keys, spec)
    console.print(f"{runner.num_run} simulations run", highlight=False)
    if out_path:
        _write_table(rows_frame(rows), out_path)
    if summary_out:
        _write_table(summary, summary_out)
    if plot_path:
        color = color_key or (knob_keys[0] if knob_keys else None)
        write_html(sweep_figure(summary, x_key, y_key, color, title=f"twin sweep: {data.get('name', scenario)}"),
                   plot_path)
        console.print(f"wrote {plot_path}", highlight=False)


def _print_sweep(summary, knob_keys, spec) -> None:
    table = Table(title="Sweep (means over replications)")
    cols = [*knob_keys]
    if spec.rate_axis:
        cols += ["offered_rate_per_s"]
    cols += ["status", "passed", "request_throughput", "p99_ttft_ms", "p99_tpot_ms", "p99_e2el_ms"]
    if "usd_per_million_output_tokens" in summary:
        cols.append("usd_per_million_output_tokens")
    for c in cols:
        table.add_column({"offered_rate_per_s": "rate/s", "request_throughput": "req/s",
                          "usd_per_million_output_tokens": "$/M out tok"}.get(c, c), justify="right")
    for _, row in summary.head(200).iterrows():
        cells = []
        for c in cols:
            v = row.get(c)
            if c == "passed":
                cells.append("-" if v is None or (isinstance(v, float) and math.isnan(v)) else
                             ("[green]yes[/]" if v else "[red]no[/]"))
            else:
                cells.append(_fmt(v.item() if hasattr(v, "item") else v))
        table.add_row(*cells)
    console.print(table)
    if len(summary) > 200:
        console.print(f"(first 200 of {len(summary)} rows; --summary-out writes them all)")
