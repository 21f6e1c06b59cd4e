"""``twin sweep``: a grid (or an Optuna search) over scenario knobs and arrival rates, on a process pool or a Ray
cluster, as one table."""

from __future__ import annotations

import click

from twin.cli.console import console
from twin.cli.option_types import OutputFile, refuse_outside_mode
from twin.cli.plan_options import (
    common_options,
    executor_options,
    prices_from_options,
    scenario_data,
    slo_from_options,
)
from twin.cli.plan_output import print_sweep, write_table_file
from twin.cli.plan_progress import plan_progress
from twin.errors import TwinInputError
from twin.results.numbers import counted
from twin.slo_section import slo_section


@click.command()
@click.argument("scenario")
@click.option("--grid", "grid_items", multiple=True, metavar="KEY=V1,V2",
              help="An axis of the grid: a dotted scenario key (server.max_num_seqs=4,16,64), rate_scale=0.5,1,2 "
                   "or rate=10,20,40 (req/s). Repeatable; the grid is their product.")
@common_options
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
@executor_options
@click.option("--out", "out_path", type=OutputFile(),
              help="Every run as a table: .csv or .parquet (one row per config, rate and replication).")
@click.option("--summary-out", type=OutputFile(), help="The per-(config, rate) summary table.")
@click.option("--per-replica", is_flag=True, help="Add each run's per-replica metrics (a JSON column) to --out.")
@click.option("--plot", "plot_path", type=OutputFile(), help="A Plotly HTML plot of the summary.")
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
    from twin.plan.price_names import gpu_names_in
    from twin.plan.sweep_optuna import optuna_search
    from twin.plan.sweep_tables import rows_frame, summarize, sweep_figure, write_html
    from twin.plan.whatif_axes import sweep_whatif, with_whatif_column

    if not grid_items:
        raise TwinInputError("--grid: give at least one axis, e.g. --grid server.max_num_seqs=4,16,64")
    refuse_outside_mode("--search optuna", search_kind == "optuna", ("trials", "objective", "direction", "batch"))
    refuse_outside_mode("--plot", bool(plot_path), ("x_key", "y_key", "color_key"))
    refuse_outside_mode("--out (the table it adds a column to)", bool(out_path), ("per_replica",))
    data, base_dir = scenario_data(scenario, variant, sets, seed, None)
    grid = parse_grid_options(grid_items)
    slo = slo_from_options(slo_items) or slo_section(data.get("slo")) or None
    criteria = Criteria(slo, goodput) if (slo or goodput is not None) else None
    prices = prices_from_options(price_items, prices_file, what="this sweep", gpus=gpu_names_in(data, grid),
                                 base_dir=base_dir)
    spec = SweepSpec(data, grid, base_dir, replications or data.get("replications", 1), criteria, prune,
                     prices, per_replica=per_replica)
    refuse_outside_mode("--search grid, a rate axis (--grid rate=... or rate_scale=...) and an SLO",
                        search_kind == "grid" and spec.rate_axis is not None and criteria is not None, ("prune",))
    n_configs = len(spec.configs())
    n_rates = len(spec.rate_axis[1]) if spec.rate_axis else 1
    total = n_configs * n_rates * spec.replications
    console.print(f"{counted(n_configs, 'configuration')} x {counted(n_rates, 'rate')} x "
                  f"{counted(spec.replications, 'replication')} = {counted(total, 'run')} at most | "
                  f"backend {('ray' if ray_address else backend)}", highlight=False)
    with make_executor(backend, workers, ray_address) as executor, \
            plan_progress(quiet, "sweep") as progress:
        task = progress.add_task("sweep", total=total if search_kind == "grid" else None)
        runner = Runner(executor, on_done=lambda n: progress.advance(task, n))
        if search_kind == "optuna":
            rows = runner.drive(optuna_search(spec, trials=trials, objective=objective, direction=direction,
                                              batch=batch, seed=int(data.get("seed", 0))))
        else:
            rows = runner.drive(sweep_search(spec))
    knob_keys = [k for k, _ in spec.knob_axes]
    summary = summarize(rows, knob_keys)
    whatif = sweep_whatif(spec)       # the what-if band along the sweep's axes (issue 33)
    print_sweep(summary, knob_keys, spec, whatif)
    console.print(f"{counted(runner.num_run, 'simulation')} run", highlight=False)
    if out_path:
        write_table_file(with_whatif_column(rows_frame(rows), spec, whatif), out_path)
    if summary_out:
        write_table_file(with_whatif_column(summary, spec, whatif), summary_out)
    if plot_path:
        color = color_key or (knob_keys[0] if knob_keys else None)
        write_html(sweep_figure(summary, x_key, y_key, color, title=f"twin sweep: {data.get('name', scenario)}"),
                   plot_path)
        console.print(f"wrote {plot_path}", highlight=False)
