"""``twin calibrate``: measure the real torch engine on this machine and write a calibrated cost profile; with
``--from-results``, fit the cost model to a real server's benchmark results instead
(``twin.cli.calibrate_results``), and with ``--plan``, print the benchmark commands that gather them.

torch is imported only when the command runs, so the rest of the twin never needs it. Registered in
``twin.cli.main`` with ``main.add_command(calibrate)``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from twin.errors import TwinInputError
from twin.results.numbers import counted
from twin.cli.option_types import FiniteFloatRange, OutputFile
from twin.cli.console import console, err_console



def _fmt_ms(seconds: float | None) -> str:
    from twin.results import numbers

    return "-" if seconds is None else numbers.number(seconds * 1e3)


def _metrics_table(fit: Any) -> Table:
    table = Table(title="Fit quality (measured vs fitted step time)")
    for col in ("set", "steps", "MAPE %", "median APE %", "p90 APE %", "p90 |error| ms", "bias %"):
        table.add_column(col, justify="right" if col != "set" else "left")
    rows = [("held-out", fit.metrics["test"]), ("training", fit.metrics["train"])]
    rows += [(f"  {kind}", m) for kind, m in fit.metrics["all_by_kind"].items()]
    for name, m in rows:
        if not m.get("n"):
            continue
        table.add_row(name, str(m["n"]), f"{m['mape_pct']:.1f}", f"{m['median_ape_pct']:.1f}",
                      f"{m['p90_ape_pct']:.1f}", _fmt_ms(m["p90_abs_error_s"]), f"{m['bias_pct']:+.1f}")
    return table


def _coef_table(fit: Any) -> Table:
    from twin.cost.profile_features import FEATURE_NAMES, FEATURE_UNITS

    from twin.results import numbers

    table = Table(title=f"Coefficients (knee at {numbers.number(fit.knee_tokens)} tokens)")
    table.add_column("term")
    table.add_column("coefficient", justify="right")
    table.add_column("unit")
    table.add_column("fitted range", justify="right")
    for name in FEATURE_NAMES:
        rng = fit.range.get(name)
        shown = f"{numbers.number(rng[0], 4)} .. {numbers.number(rng[1], 4)}" if rng else ""
        table.add_row(name, numbers.number(fit.coefficients[name], 4), FEATURE_UNITS[name], shown)
    return table


# what the two tables' terms mean, printed once under them
FIT_GLOSS = ("MAPE: mean absolute percentage error of the fitted step time against the measured one; APE: one "
             "step's; held-out: steps left out of the fit; knee: the step size (tokens) past which the GEMMs turn "
             "compute-bound (tokens_over_knee counts the tokens beyond it)")


def print_fit(fit: Any) -> None:
    """The fit-quality and coefficient tables, and the gloss of their terms."""
    console.print(_metrics_table(fit))
    console.print(_coef_table(fit))
    console.print(FIT_GLOSS, highlight=False, soft_wrap=True)


def _read_plan(path: str) -> dict[str, Any]:
    from twin.json_input import load_json_path

    doc = load_json_path(path, "calibration plan")
    if not isinstance(doc, dict):
        raise TwinInputError(f"--sweep-plan {path}: expected a JSON object of plan fields")
    from calibration.sweep_plan import checked_overrides

    try:
        checked_overrides(doc)          # before the model is built: a bad field is one line naming the file
    except ValueError as exc:
        raise TwinInputError(f"--sweep-plan {path}: {exc}") from None
    return doc


ENGINE_OPTIONS = ("device", "dtype", "budget_s", "quick", "samples_out", "threads", "max_pool_gib", "plan_path",
                  "no_replay")
RESULTS_OPTIONS = ("tensor_parallel_size", "max_sim_s", "workers", "replications")


def _refuse_unused(from_results: bool, bench_plan: bool) -> None:
    """An option of the other mode (the engine run vs --from-results) is one line, not silently unused."""
    from twin.cli.option_types import refuse_outside_mode

    if bench_plan and from_results:
        raise TwinInputError("--plan: prints the benchmark runs to make; give it without --from-results")
    refuse_outside_mode("--from-results", from_results, RESULTS_OPTIONS)
    refuse_outside_mode("--from-results or --plan", from_results or bench_plan, ("gpu",))
    refuse_outside_mode("a run on the engine (without --from-results or --plan)", not (from_results or bench_plan),
                        ENGINE_OPTIONS)
    refuse_outside_mode("a calibration (without --plan)", not bench_plan, ("output",))


def engine_profile_use(path) -> str:
    """The line after an engine calibration: where the profile goes, and the command that checks it."""
    return (f"use it with: cost_model: {{kind: profile, profile: {path}}} (or twin validate SCENARIO --profile "
            f"{path}: the engine against the twin on it)")


@click.command()
@click.argument("more_results", nargs=-1, type=click.Path(), metavar="[RESULT]...")
@click.option("--from-results", "from_results", multiple=True, type=click.Path(),
              help="Fit to a real server's benchmark results instead of measuring the engine: result files, "
                   "folders of them or globs, several after one flag (--from-results a.json b.json results/ "
                   "'rate-*.json') or the flag repeated.")
@click.option("--plan", "bench_plan", is_flag=True,
              help="Print the vllm bench serve commands (about 30 GPU minutes) whose results --from-results fits "
                   "(with --model and --gpu filled in).")
@click.option("--gpu", default=None, help="With --from-results: the GPU the server ran on (twin list gpus).")
@click.option("--scenario", "server_scenario", default=None, metavar="SCN",
              help="With --from-results: a scenario whose deployment and server blocks describe the server the "
                   "results were measured on (the result files' own settings win, --set and --vllm-version over "
                   "both).")
@click.option("--vllm-version", default=None,
              help="With --from-results: the server's vLLM release (e.g. 0.11.0): its defaults and behaviours, "
                   "async scheduling among them.")
@click.option("--set", "server_sets", multiple=True, metavar="KEY=VALUE",
              help="With --from-results: a server setting or deployment field, e.g. --set server.max_num_seqs=128 "
                   "--set deployment.kv_dtype=fp8 (repeatable).")
@click.option("--check", is_flag=True,
              help="With --from-results: also report leave-one-run-out errors and each parameter's spread over "
                   "5 seeds (about 7x the fit's time).")
@click.option("--acceptance", "acceptance_file", type=click.Path(), default=None,
              help="Read a speculative server's acceptance: a vLLM /metrics text dump "
                   "(spec_decode_num_accepted_tokens_per_pos) or a vllm bench serve result "
                   "(spec_decode_per_position_acceptance_rates); prints the per-position rates and the scenario "
                   "entry (with --from-results also stored in the profile).")
@click.option("--acceptance-before", "acceptance_before", type=click.Path(), default=None,
              help="A /metrics dump taken before the benchmark: its counters are subtracted.")
@click.option("--replications", type=click.IntRange(min=1, max=16), default=2, show_default=True,
              help="With --from-results: simulations of each run per fit round (the same seeds every round).")
@click.option("--tp", "tensor_parallel_size", type=click.IntRange(min=1, max=64), default=None,
              help="With --from-results: tensor-parallel size, when the results do not say.")
@click.option("--max-sim-s", type=FiniteFloatRange(min=10, max=86400), default=60.0, show_default=True,
              help="With --from-results: seconds of each run's traffic simulated per fit round.")
@click.option("--workers", type=click.IntRange(min=1, max=64), default=1, show_default=True,
              help="With --from-results: processes simulating runs in parallel.")
@click.option("--model", "-m", default=None,
              help="Catalog model name or a Hugging Face config.json (random weights of that shape; default "
                   "tiny-llama). With --from-results: the served model, when the results do not say.")
@click.option("--device", "-d", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="auto: cuda when available, else cpu.")
@click.option("--dtype", type=click.Choice(["auto", "fp32", "bf16", "fp16"]), default="auto", show_default=True,
              help="auto: bf16 on cuda, fp32 on cpu.")
@click.option("--budget", "budget_s", type=FiniteFloatRange(min=0.5), default=None,
              help="Seconds of measurement (default 300; 45 with --quick). Points are ordered coarse to fine, "
                   "so any budget covers the whole range.")
@click.option("--quick", is_flag=True, help="Thinner grids and a short budget: about a minute on a CPU.")
@click.option("--output", "-o", type=OutputFile(), default=None,
              help="Profile JSON to write (default ./<model>-<device>.json); the raw samples go beside it as "
                   "<name>.samples.json.")
@click.option("--samples-out", type=OutputFile(), default=None, help="Where to write the raw samples.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="torch CPU threads (default: torch's choice). 1 gives steadier timings on a shared machine.")
@click.option("--max-pool-gib", type=FiniteFloatRange(min=0.001), default=None,
              help="Cap on the KV cache allocated for profiling (default: what the sweeps need; on a GPU at most "
                   "45% of the memory left after the weights).")
@click.option("--sweep-plan", "plan_path", type=click.Path(dir_okay=False), default=None,
              help="JSON object of sweep-plan fields to override (e.g. {\"decode_batches\": [1, 8, 64]}); see "
                   "calibration.sweep_plan.SweepPlan.")
@click.option("--no-replay", is_flag=True, help="Skip the served-workload replay (sweeps only).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the weights, random points, split.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def calibrate(more_results: tuple[str, ...], from_results: tuple[str, ...], bench_plan: bool, gpu: str | None,
              server_scenario: str | None, vllm_version: str | None, server_sets: tuple[str, ...], check: bool,
              acceptance_file: str | None, acceptance_before: str | None,
              replications: int, tensor_parallel_size: int | None,
              max_sim_s: float, workers: int, model: str | None, device: str, dtype: str, budget_s: float | None,
              quick: bool, output: str | None, samples_out: str | None, threads: int | None,
              max_pool_gib: float | None, plan_path: str | None, no_replay: bool, seed: int, quiet: bool) -> None:
    """Measure the real engine (paged KV, batched prefill and decode, driven by the twin's scheduler) on this
    machine, fit a per-step cost model and write it as a profile (a scenario's cost_model: {kind: profile,
    profile: FILE}).

    With --from-results, fit the twin to a real vLLM server's benchmark results instead (see --plan)."""
    if more_results and not from_results:
        raise TwinInputError(f"twin calibrate: unexpected argument {more_results[0]!r}; result files go after "
                             "--from-results")
    _refuse_unused(bool(from_results), bench_plan)
    if acceptance_before and not acceptance_file:
        raise TwinInputError("--acceptance-before: goes with --acceptance (the dump after the benchmark)")
    if acceptance_file and not from_results:
        from twin.cli.calibrate_results import print_acceptance

        print_acceptance(acceptance_file, acceptance_before)
        return
    if not from_results and (server_scenario or vllm_version or server_sets or check):
        raise TwinInputError("twin calibrate: --scenario, --vllm-version, --set and --check go with --from-results")
    if bench_plan:
        from twin.cli.calibrate_results import print_bench_plan

        print_bench_plan(model, gpu)
        return
    if from_results:
        from twin.cli.calibrate_results import calibrate_from_results

        calibrate_from_results(from_results + more_results, output=output, gpu=gpu, model=model, tp=tensor_parallel_size,
                               max_sim_s=max_sim_s, workers=workers, seed=seed, quiet=quiet, scenario=server_scenario,
                               sets=server_sets, vllm_version=vllm_version, replications=replications, check=check,
                               acceptance=(acceptance_file, acceptance_before) if acceptance_file else None)
        return
    model = model or "tiny-llama"
    try:
        import torch  # noqa: F401
    except ImportError:
        raise TwinInputError("twin calibrate needs torch: pip install 'llm-serving-twin[calibration]'") from None
    from calibration.calibrate import calibrate as run_calibration
    from calibration.fit import summarize

    if output is not None and not Path(output).resolve().parent.exists():
        raise TwinInputError(f"--output {output}: folder {Path(output).parent} does not exist")
    overrides = _read_plan(plan_path) if plan_path else None
    t0 = time.perf_counter()
    progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                        TimeElapsedColumn(), console=err_console, disable=quiet or not err_console.is_terminal,
                        transient=True)
    with progress:
        task = progress.add_task("building the model", total=1.0)

        def on_progress(fraction: float, label: str) -> None:
            progress.update(task, completed=fraction, description=f"calibrating: {label}")

        try:
            result = run_calibration(model, device=device, dtype=dtype, budget_s=budget_s, quick=quick,
                                     output=output, samples_output=samples_out, threads=threads, seed=seed,
                                     replay=not no_replay, max_pool_gib=max_pool_gib, plan_overrides=overrides,
                                     progress=on_progress)
        except ValueError as exc:   # bad options the engine or the fit refused (TwinInputError is one too)
            raise TwinInputError(str(exc).splitlines()[0]) from None
    fit = result.fit
    env = result.run.environment
    console.print(f"calibrated {result.model.name} on {env['device_name']} ({env['device_type']}, {env['dtype']}, "
                  f"{counted(env['threads'], 'thread')}, torch {env['torch']}): {len(result.run.samples)} steps "
                  f"measured in {result.run.wall_s:.1f} s", highlight=False, soft_wrap=True)
    for note in result.run.notes:
        console.print(f"note: {note}", highlight=False, soft_wrap=True)
    print_fit(fit)
    noise = fit.metrics.get("timing_noise_pct")
    if noise is not None and noise > 10:
        hint = "an idle machine or a longer --budget" if env["threads"] == 1 else \
            "--threads 1, an idle machine or a longer --budget"
        console.print(f"[yellow]warning:[/] timing noise is high (median interquartile spread {noise:.0f}% of a "
                      f"step); the machine is busy. Try {hint}.", highlight=False, soft_wrap=True)
    console.print(summarize(fit), highlight=False)
    console.print(f"wrote {result.profile_path} and {result.samples_path} ({time.perf_counter() - t0:.1f} s in all)",
                  highlight=False, soft_wrap=True)
    console.print(engine_profile_use(result.profile_path), highlight=False, soft_wrap=True)
    sys.stdout.flush()
