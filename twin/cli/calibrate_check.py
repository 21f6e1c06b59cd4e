"""``twin calibrate --from-results ... --check``: the leave-one-run-out errors and the five-seed spread of the
fitted parameters (``twin.fitting.calibrate_check``), printed after the fit."""

from __future__ import annotations

from rich.table import Table

from twin.cli.console import console
from twin.fitting.calibrate_check import CHECKED_METRICS, SEEDS, leave_one_run_out, seed_spread
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.results import numbers


RUN_LABEL_CHARS = 40


def run_label(name: str) -> str:
    """A run's name for a table cell: whole up to ``RUN_LABEL_CHARS``, else its end (the stage or file, which
    tells runs apart) after a leading ``...`` that says it was cut."""
    return name if len(name) <= RUN_LABEL_CHARS else "..." + name[-(RUN_LABEL_CHARS - 3):]


def print_check(cases, result, *, seed: int, replications: int, max_sim_s: float) -> None:
    folds = leave_one_run_out(result, seed=seed, replications=replications, max_sim_s=max_sim_s)
    table = Table(title="Leave one run out: each run predicted by a fit on the others (relative error)")
    table.add_column("held-out run")
    for k in CHECKED_METRICS:
        table.add_column(k, justify="right")
    for f in folds:
        table.add_row(run_label(f.run), *(f"{100 * f.errors[k]:+.0f}%" if k in f.errors else (f.note[:30] if
                                     f.note and k == CHECKED_METRICS[0] else "-") for k in CHECKED_METRICS))
    console.print(table)
    spread = seed_spread(cases, result, seed=seed, replications=replications, max_sim_s=max_sim_s)
    table = Table(title=f"Seed stability: each parameter over {SEEDS} seeds ({seed}..{seed + SEEDS - 1})")
    for col in ("parameter", "spread (1 s.d.)", "s.e.", "unit", "stable"):
        table.add_column(col, justify="left" if col in ("parameter", "unit") else "right")
    for name, (sd, se) in spread.items():
        p = PARAMETERS_BY_NAME[name]
        table.add_row(name, numbers.number(p.from_model(sd), 2), numbers.number(p.from_model(se), 2), p.unit,
                      "yes" if sd < se else "no: more replications (--replications) or longer runs")
    console.print(table)
