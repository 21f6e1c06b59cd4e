"""``twin calibrate --from-results``: fit the cost model to a real server's benchmark results, and
``twin calibrate --plan``: the benchmark commands that gather enough of them.

Each result file is read into runs (``twin.fitting.readers``; folders walked), the server they ran on is
described (``twin.cli.calibrate_server``: result files, ``--scenario``, ``--vllm-version``, ``--set``) and printed
with what was assumed, each run is replayed in the twin on that server, and the roofline's physical parameters are
fitted, regularised toward the twin's defaults, so that the simulated metrics match the measured ones
(``twin.fitting.calibrate_fit``); ``--check`` adds leave-one-run-out errors and the five-seed spread. The profile written is used with ``cost_model: {kind: profile, profile: FILE}``."""

from __future__ import annotations

import glob
import math
import warnings
from collections.abc import Sequence
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from twin.cli.calibrate_check import run_label
from twin.cli.console import console, err_console
from twin.cost.server_profile import write_server_profile
from twin.errors import TwinInputError
from twin.results.numbers import counted
from twin.cli.calibrate_server import apply, describe, server_table
from twin.core.vllm_versions import NEWEST_VLLM_VERSION
from twin.fitting.calibrate_fit import CANDIDATES, PRIOR_WIDTHS, CalibrationFit, calibrate_fit
from twin.fitting.fit import Case
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.profile_doc import REPORTED_METRICS
from twin.fitting.readers import READERS, read_results
from twin.fitting.readers.spec_counters import read_acceptance
from twin.fitting.readers.fields import YAML_SUFFIXES
from twin.results import numbers
from twin.hardware.catalog import resolve_gpu

BENCH_PLAN = """\
# About 30 minutes of GPU time. Start the server as in production (same vLLM version, flags, GPU), then:
MODEL={model}   # the served model
GPU={gpu}   # the GPU it runs on (twin list gpus)
VLLM=0.11.0   # the server's vLLM release (vllm --version)
for C in 1 4 16 64 128; do
  vllm bench serve --model $MODEL --dataset-name random --random-input-len 512 --random-output-len 256 \\
    --ignore-eos --max-concurrency $C --num-prompts $((C * 8 > 64 ? C * 8 : 64)) \\
    --save-result --save-detailed --result-filename conc-$C-in512.json
done
for C in 1 16 64; do
  vllm bench serve --model $MODEL --dataset-name random --random-input-len 2048 --random-output-len 128 \\
    --ignore-eos --max-concurrency $C --num-prompts $((C * 8 > 64 ? C * 8 : 64)) \\
    --save-result --save-detailed --result-filename conc-$C-in2048.json
done
for R in 2 8; do
  vllm bench serve --model $MODEL --dataset-name random --random-input-len 512 --random-output-len 256 \\
    --ignore-eos --request-rate $R --num-prompts $((R * 120)) \\
    --save-result --save-detailed --result-filename rate-$R-in512.json
done
# then, in this folder (add --check for leave-one-run-out errors and the five-seed spread, ~7x the time):
twin calibrate --from-results conc-*.json rate-*.json --gpu $GPU --vllm-version $VLLM -o my-server.json"""
DEFAULT_PLAN_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DEFAULT_PLAN_GPU = "H100-SXM"
RESULT_SUFFIXES = (".json", ".jsonl", ".csv")
GLOB_CHARS = ("*", "?", "[")


def print_bench_plan(model: str | None, gpu: str | None) -> None:
    """The benchmark runs to make, as a shell script that works as printed (edit MODEL and GPU)."""
    if gpu is not None:
        gpu = resolve_gpu(gpu).name
    text = BENCH_PLAN.format(model=model or DEFAULT_PLAN_MODEL, gpu=gpu or DEFAULT_PLAN_GPU)
    console.print(text, highlight=False, soft_wrap=True, markup=False)


def _recognised(path: Path) -> bool:
    return any(recognise(path) for _, recognise, _ in READERS)


MAX_WALK_DEPTH = 8
MAX_WALK_ENTRIES = 20_000


def _walk(folder: Path, item: str, depth: int, found: list[Path], skipped: list[str], seen: list[int]) -> None:
    """Result files and result folders under ``folder``: a folder a reader recognises as one (an inference-perf
    results folder, an AIPerf artifacts folder) stays one; other folders are walked (not through links, at most
    ``MAX_WALK_DEPTH`` deep and ``MAX_WALK_ENTRIES`` entries)."""
    if _recognised(folder):
        found.append(folder)
        return
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise TwinInputError(f"--from-results {folder}: cannot read the folder ({exc.strerror})") from None
    seen[0] += len(entries)
    if seen[0] > MAX_WALK_ENTRIES:
        raise TwinInputError(f"--from-results {item}: more than {MAX_WALK_ENTRIES:,} files and folders under it; "
                             f"give the result folders themselves")
    for f in entries:
        if f.is_symlink() and f.is_dir():
            continue
        if f.is_dir():
            if depth < MAX_WALK_DEPTH:
                _walk(f, item, depth + 1, found, skipped, seen)
        elif f.is_file() and f.suffix.lower() in RESULT_SUFFIXES + YAML_SUFFIXES:
            if _recognised(f):
                found.append(f)
            elif f.suffix.lower() in RESULT_SUFFIXES:    # a YAML file beside results is usually a config
                skipped.append(str(f.relative_to(item)))


def expand_result_paths(items: Sequence[str]) -> list[Path]:
    """The result files named by ``items``: files as given, a folder walked for result files and result folders
    (``_walk``), a glob (quoted, or left unexpanded by the shell) as what it matches. Each path once, in the
    order given."""
    out: list[Path] = []
    for item in items:
        p = Path(item)
        if not p.exists() and any(c in str(item) for c in GLOB_CHARS):
            matches = sorted(glob.glob(str(item)))
            if not matches:
                raise TwinInputError(f"--from-results {item}: matches no file")
            out += expand_result_paths(matches)
        elif p.is_dir():
            found: list[Path] = []
            skipped: list[str] = []
            _walk(p, item, 0, found, skipped, [0])
            if not found:
                raise TwinInputError(f"--from-results {item}: a folder with no result file twin reads "
                                     f"({', '.join(n for n, _, _ in READERS)})")
            if skipped:
                warnings.warn(f"--from-results {item}: left out {counted(len(skipped), 'file')} no reader "
                              f"recognises: " + ", ".join(skipped[:5]) + (" ..." if len(skipped) > 5 else ""), stacklevel=2)
            out += found
        else:
            out.append(p)
    return list(dict.fromkeys(out))


def _params_table(result: CalibrationFit) -> Table:
    table = Table(title="Fitted parameters (unit column's unit; regularised toward the defaults)")
    for col in ("parameter", "value", "+/- 1 s.e.", "default", "prior width", "unit", "status"):
        table.add_column(col, justify="left" if col in ("parameter", "unit", "status") else "right")
    for name in CANDIDATES:
        p = PARAMETERS_BY_NAME[name]
        value = result.params.get(name, result.prior[name])
        err = result.std.get(name)
        table.add_row(name, numbers.number(p.from_model(value), 4),
                      "" if err is None or math.isnan(err) else numbers.number(p.from_model(err), 2),
                      numbers.number(p.from_model(result.prior[name]), 4), numbers.number(PRIOR_WIDTHS[name], 2),
                      p.unit, result.status[name])
    return table


def runs_table(cases, result: CalibrationFit) -> Table:
    table = Table(title="Runs: simulated vs measured (relative error)")
    table.add_column("run")
    table.add_column("fitted on")
    for col in ("TTFT p50", "TTFT p90", "TPOT", "E2E", "throughput"):
        table.add_column(col, justify="right")
    role = {c.run.name: "latency, cold start: mean TTFT not fitted" if c.run.cold_start else "latency"
            for c in result.latency_cases}
    role.update({c.run.name: "capacity (saturated)" for c in result.capacity_cases})
    role.update({name: f"dropped: {why}" for name, why in result.dropped})
    for c in cases:
        pred = result.predicted.get(c.run.name, {})
        cells = []
        for k in ("median_ttft_ms", "p90_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "output_throughput"):
            v, q = c.run.metrics.get(k), pred.get(k)
            if k == "output_throughput" and role[c.run.name].startswith("latency") and not c.run.closed_loop:
                v = None        # an open loop the server kept up with: its throughput is the offered rate
            cells.append("-" if not v or q is None else f"{100 * (q / v - 1):+.0f}%")
        table.add_row(run_label(c.run.name), role[c.run.name], *cells)
    return table


def server_profile_use(path) -> str:
    """Where a server profile goes: a scenario's cost model, or one run's --set."""
    return (f"use it with: cost_model: {{kind: profile, profile: {path}}} (and the server's vllm_version), or twin "
            f"run SCENARIO --set cost_model.kind=profile --set cost_model.profile={path}")


MISFIT_CHI2_PER_DOF = 4.0   # above it the runs differ from the fitted twin by well over their stated noise


def misfit_note(chi2_per_dof: float) -> str | None:
    """What a chi^2/dof far above 1 says and what to check first, or None below ``MISFIT_CHI2_PER_DOF``."""
    if not math.isfinite(chi2_per_dof) or chi2_per_dof <= MISFIT_CHI2_PER_DOF:
        return None
    return (f"note: chi^2/dof {chi2_per_dof:.1f}: no setting of these parameters reproduces the runs within their "
            f"noise (the standard errors above are inflated by it; the runs table shows which run misfits). Check "
            f"first what the files cannot say: prompts sharing a prefix (vllm bench serve --metadata "
            f"random_prefix_len=N; otherwise every prompt is taken as unique), and the settings marked assumed "
            f"above (--vllm-version, --set server.KNOB=VALUE)")


def profile_doc(result: CalibrationFit, cases, sources: Sequence[str]) -> dict:
    used = result.latency_cases + result.capacity_cases
    runs = []
    for c in cases:
        measured = {k: c.run.metrics[k] for k in REPORTED_METRICS if k in c.run.metrics}
        pred = result.predicted.get(c.run.name, {})
        runs.append({"name": c.run.name, "model": c.target.model, "gpu": c.target.gpu,
                     "tensor_parallel_size": c.target.tensor_parallel_size, "rate_per_s": c.run.rate_per_s,
                     "max_concurrency": c.run.max_concurrency, "server": dict(c.run.server), "measured": measured,
                     "simulated": {k: pred.get(k) for k in measured},
                     "relative_error": {k: (pred[k] / v - 1.0) if v and pred.get(k) is not None else None
                                        for k, v in measured.items()}})
    return {
        "params": {n: result.params[n] for n in result.names},
        "std": {n: result.std[n] for n in result.names},
        "prior": {n: {"default": result.prior[n], "width": PARAMETERS_BY_NAME[n].to_model(PRIOR_WIDTHS[n])}
                  for n in CANDIDATES},
        "status": dict(result.status),
        "units": {n: PARAMETERS_BY_NAME[n].unit for n in CANDIDATES},
        "fitted": list(result.names),
        "fitted_on": {
            "gpus": sorted({c.target.gpu for c in used}), "models": sorted({c.target.model for c in used}),
            "tensor_parallel_sizes": sorted({c.target.tensor_parallel_size for c in used}),
            "vllm_versions": sorted({str(c.run.server.get("vllm_version", NEWEST_VLLM_VERSION)) for c in used}),
            "runs_read": len(cases), "runs": len(used), "latency_runs": [c.run.name for c in result.latency_cases],
            "capacity_runs": [c.run.name for c in result.capacity_cases],
            "dropped": [{"run": n, "why": w} for n, w in result.dropped], "sources": list(sources)},
        "chi2_per_dof": result.chi2_per_dof,
        "rounds": result.rounds,
        "runs": runs,
    }


def print_acceptance(path: str, before: str | None):
    """The per-position acceptance a server's counters give, and the scenario entry that replays it."""
    acc = read_acceptance(path, before)
    rates = ", ".join(f"{r:.3f}" for r in acc.rates)
    console.print(f"speculative decoding acceptance from {acc.source}: {acc.num_drafts:g} drafts; per position "
                  f"(P(at least i accepted)): {rates}; mean acceptance length {acc.mean_acceptance_length:.3f}",
                  highlight=False, soft_wrap=True)
    entry = acc.scenario_entry()["counters"]
    console.print("scenario entry: speculative_decoding: {acceptance: {counters: {num_drafts: "
                  f"{entry['num_drafts']:g}, accepted_per_position: "
                  f"[{', '.join(f'{a:g}' for a in entry['accepted_per_position'])}]}}}}}}",
                  highlight=False, soft_wrap=True, markup=False)
    return acc


def read_cases(paths: Sequence[str], *, scenario: str | None, sets: tuple[str, ...], vllm_version: str | None,
               gpu: str | None, model: str | None, tp: int | None, quiet: bool = True):
    """(result paths, cases) with the server description merged into every run; prints what was read and
    assumed unless ``quiet``."""
    files = expand_result_paths(paths)
    read = [run for p in files for run in read_results(p)]
    if not read:
        raise TwinInputError("--from-results: the files hold no run")
    desc = describe(scenario=scenario, sets=sets, vllm_version=vllm_version, gpu=gpu, model=model, tp=tp)
    merged = [apply(run, desc) for run in read]
    cases = [Case(run, target) for run, target in merged]
    if not quiet:
        table, notes = server_table(read, [r for r, _ in merged], [t for _, t in merged], desc)
        where = "result file or folder" if len(files) == 1 else "result files or folders"
        console.print(f"read {counted(len(read), 'run')} from {len(files)} {where}", highlight=False)
        console.print(table)
        for note in notes:
            console.print(f"note: {note}", highlight=False, soft_wrap=True)
    return files, cases


def calibrate_from_results(paths: Sequence[str], *, output: str | None, gpu: str | None, model: str | None,
                           tp: int | None, max_sim_s: float, workers: int, seed: int, quiet: bool,
                           scenario: str | None = None, sets: tuple[str, ...] = (), vllm_version: str | None = None,
                           replications: int = 2, check: bool = False,
                           acceptance: tuple[str, str | None] | None = None) -> None:
    if output is not None and not Path(output).resolve().parent.exists():
        raise TwinInputError(f"--output {output}: folder {Path(output).parent} does not exist")
    files, cases = read_cases(paths, scenario=scenario, sets=sets, vllm_version=vllm_version, gpu=gpu, model=model,
                              tp=tp, quiet=False)
    progress = Progress(TextColumn("simulating runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err_console, disable=quiet or not err_console.is_terminal, transient=True)
    with progress:
        task = progress.add_task("fit", total=None)
        result = calibrate_fit(cases, seed=seed, replications=replications, max_sim_s=max_sim_s,
                               progress=lambda k: progress.advance(task, k), workers=workers)
    doc = profile_doc(result, cases, [str(p) for p in files])
    if acceptance is not None:
        doc["speculative_acceptance"] = print_acceptance(*acceptance).scenario_entry()
    out = Path(output or "server-profile.json")
    write_server_profile(out, doc)
    n_lat, n_cap = len(result.latency_cases), len(result.capacity_cases)
    console.print(f"fitted {counted(len(result.names), 'parameter')} on {n_lat + n_cap} of "
                  f"{counted(len(cases), 'run')}: {n_lat} on "
                  f"their latencies, {n_cap} on their capacity (saturated); {len(result.dropped)} dropped"
                  + "".join(f"; {n}: {w}" for n, w in result.dropped)
                  + f" ({result.rounds} simulation rounds, {counted(replications, 'replication')} each, chi^2/dof "
                  f"{result.chi2_per_dof:.2f})", highlight=False, soft_wrap=True)
    console.print(_params_table(result))
    console.print(runs_table(cases, result))
    if (note := misfit_note(result.chi2_per_dof)) is not None:
        console.print(note, highlight=False, soft_wrap=True)
    if check:
        from twin.cli.calibrate_check import print_check

        print_check(cases, result, seed=seed, replications=replications, max_sim_s=max_sim_s)
    console.print(f"wrote {out}; {server_profile_use(out)}", highlight=False, soft_wrap=True)
