"""``twin calibrate --from-results``: fit the cost model to a real server's benchmark results, and
``twin calibrate --plan``: the benchmark commands that gather enough of them.

Each result file is read into runs (``twin.fitting.readers``), each run is replayed in the twin on its
deployment, and the roofline's physical parameters are fitted so that the simulated metrics match the measured
ones (``twin.fitting.fit``). The profile written is used with ``cost_model: {kind: profile, profile: FILE}``."""

from __future__ import annotations

import glob
import math
import warnings
from collections.abc import Sequence
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from twin.cli.console import console, err_console
from twin.cost.server_profile import write_server_profile
from twin.errors import TwinInputError
from twin.fitting.fit import Case, fit, identifiable_parameters
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.profile_doc import profile_document
from twin.fitting.readers import READERS, read_results
from twin.fitting.replay import Target
from twin.results import numbers
from twin.hardware.catalog import resolve_gpu, resolve_model

BENCH_PLAN = """\
# About 30 minutes of GPU time. Start the server as in production (same vLLM version, flags, GPU), then:
MODEL={model}   # the served model
GPU={gpu}   # the GPU it runs on (twin list gpus)
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
# then, in this folder:
twin calibrate --from-results conc-*.json rate-*.json --gpu $GPU -o my-server.json"""
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
        elif f.is_file() and f.suffix.lower() in RESULT_SUFFIXES:
            (found if _recognised(f) else skipped).append(f if _recognised(f) else str(f.relative_to(item)))


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
                warnings.warn(f"--from-results {item}: left out {len(skipped)} file(s) no reader recognises: "
                              + ", ".join(skipped[:5]) + (" ..." if len(skipped) > 5 else ""), stacklevel=2)
            out += found
        else:
            out.append(p)
    return list(dict.fromkeys(out))


def _target(run, gpu: str | None, model: str | None, tp: int | None) -> Target:
    name = model or run.model
    if not name:
        raise TwinInputError(f"{run.name}: the result does not name its model; give --model")
    gpu_name = gpu or run.gpu
    if not gpu_name:
        raise TwinInputError(f"{run.name}: the result does not name its GPU; give --gpu (twin list gpus)")
    size = tp or run.tensor_parallel_size or 1
    m = resolve_model(name)
    g = resolve_gpu(gpu_name)
    m.check_tensor_parallel(size)
    return Target(m.name, g.name, size)


def _params_table(result) -> Table:
    table = Table(title="Fitted parameters")
    for col in ("parameter", "value", "+/- 1 s.e.", "unit"):
        table.add_column(col, justify="left" if col in ("parameter", "unit") else "right")
    for name, value in result.params.items():
        p = PARAMETERS_BY_NAME.get(name)
        scale = p.scale if p else 1.0
        err = result.std.get(name)
        table.add_row(name, numbers.number(value / scale, 4),
                      "" if err is None or math.isnan(err) else numbers.number(err / scale, 2),
                      p.unit if p else "")
    return table


def _runs_table(doc: dict) -> Table:
    table = Table(title="Runs: simulated vs measured (relative error)")
    table.add_column("run")
    for col in ("TTFT p50", "TTFT p99", "TPOT", "E2E"):
        table.add_column(col, justify="right")
    for run in doc["runs"]:
        err = run["relative_error"]
        cells = [err.get(k) for k in ("median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")]
        table.add_row(run["name"][-40:], *("-" if e is None else f"{100 * e:+.0f}%" for e in cells))
    return table


def calibrate_from_results(paths: Sequence[str], *, output: str | None, gpu: str | None, model: str | None,
                           tp: int | None, max_sim_s: float, workers: int, seed: int, quiet: bool) -> None:
    if output is not None and not Path(output).resolve().parent.exists():
        raise TwinInputError(f"--output {output}: folder {Path(output).parent} does not exist")
    paths = expand_result_paths(paths)
    runs = [run for p in paths for run in read_results(p)]
    if not runs:
        raise TwinInputError("--from-results: the files hold no run")
    cases = [Case(run, _target(run, gpu, model, tp)) for run in runs]
    names = identifiable_parameters(cases)
    outer = 3
    progress = Progress(TextColumn("simulating runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=err_console, disable=quiet or not err_console.is_terminal, transient=True)
    with progress:
        task = progress.add_task("fit", total=sum(not c.run.queueing for c in cases) * (outer + 1))
        result = fit(cases, names=names, outer_iterations=outer, max_sim_s=max_sim_s, workers=workers, seed=seed,
                     progress=lambda k: progress.advance(task, k))
    doc = profile_document(result, [str(p) for p in paths], [c for c in cases if c.run.queueing])
    out = Path(output or "server-profile.json")
    write_server_profile(out, doc)
    console.print(f"fitted {len(result.names)} parameters on {len(cases)} runs "
                  f"({', '.join(doc['fitted_on']['models'])} on {', '.join(doc['fitted_on']['gpus'])}) in "
                  f"{result.iterations} simulation rounds", highlight=False, soft_wrap=True)
    console.print(_params_table(result))
    console.print(_runs_table(doc))
    console.print(f"wrote {out}; use it with: cost_model: {{kind: profile, profile: {out}}}", highlight=False,
                  soft_wrap=True)
