"""The ``twin`` command line: run scenarios, compare variants, list what is catalogued."""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from pathlib import Path
from typing import Any

# pydantic looks for plugins by reading the entry points of every installed distribution when it builds its first
# model (~50 ms of each start-up); the twin uses none. An explicit setting of the user's is kept.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import click  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402

from twin.errors import TwinInputError
from twin.results.numbers import counted
from twin.cli.catalog_pointer import on_terminal
from twin.cli.deployment_parts import deployment_parts
from twin.cli.option_types import OutputFile
from twin.cli.variant_options import compare_names, run_names

from twin.cli.console import console, err_console

SUMMARY_FROM = 4   # more variants than this: a summary table first (twin.results.compare_summary)


def _say_error(message: str) -> None:
    """One line on stderr. escape: messages carry brackets ("[variant x]", "[and 2 more problems]") that are
    not markup."""
    line = " ".join(message.split())
    err_console.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)


def _say_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
                 line: str | None = None) -> None:
    """A warning (a lenient trace policy's count, a profile used outside its range) as one line."""
    err_console.print(f"[yellow]warning:[/] {escape(' '.join(str(message).split()))}", highlight=False,
                      soft_wrap=True)


# the other commands live in their own modules, imported when named (or listed by --help): a `twin run` does not
# pay for plan's, sweep's and calibrate's imports
LAZY_COMMANDS = {
    "calibrate": "twin.cli.calibrate:calibrate",
    "validate": "twin.cli.validate:validate",
    "plan": "twin.cli.plan:plan",
    "sweep": "twin.cli.sweep:sweep",
    "protocol": "twin.cli.protocol:protocol",
    "diagnose": "twin.cli.protocol:diagnose",
}


class TwinGroup(click.Group):
    """Bad input becomes one line on stderr and exit status 2, never a traceback: the twin's own input errors
    and click's usage errors (unknown option, a value of the wrong type) alike."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            module, attr = LAZY_COMMANDS[cmd_name].split(":")
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _say_warning
                return super().invoke(ctx)
        except TwinInputError as exc:
            _say_error(on_terminal(str(exc)))
            sys.exit(2)

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `twin`: the help, as click shows it
            click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
            sys.exit(0)
        except click.UsageError as exc:
            command = exc.ctx.command_path if exc.ctx is not None else "twin"
            from twin.cli.usage_hints import usage_hint
            _say_error(f"{exc.format_message()}{usage_hint(exc)} (see {command} --help)")
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            _say_error(exc.format_message())
            sys.exit(exc.exit_code)
        except click.Abort:
            _say_error("aborted")
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=TwinGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="llm-serving-twin", prog_name="twin")
def main() -> None:
    """A digital twin of an LLM inference server: predict throughput, TTFT, TPOT, ITL, goodput and cache
    behaviour of a vLLM-style server before a change reaches production."""


class _NoProgress:
    """The calls the run loop makes on a progress bar, doing nothing: rich.progress and its imports (~30 ms of a
    start-up) are only loaded when a bar is shown."""

    def __enter__(self) -> "_NoProgress":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        return None

    def add_task(self, description: str, total: float) -> int:
        return 0

    def update(self, task_id: int, completed: float) -> None:
        return None


def _progress(enabled: bool) -> Any:
    if not enabled:
        return _NoProgress()
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                    TimeElapsedColumn(), console=err_console, transient=True)


def _run_variants(scenario_path: str, variants: list[str], sets: tuple[str, ...], seed: int | None,
                  replications: int | None, show_progress: bool):
    from twin.deploy.run import metrics_of, resolve_for_run, run_body
    from twin.results.replications import replicate_summary
    from twin.scenario import load_scenario, parse_set_options

    scenario = load_scenario(scenario_path)
    overrides = parse_set_options(sets)
    if seed is not None:
        overrides["seed"] = seed
    if replications is not None:
        overrides["replications"] = replications
    names = variants or ["baseline"]
    bodies = {name: scenario.body(name, overrides) for name in names}
    deployments = {}
    for name, body in bodies.items():
        try:
            deployments[name] = resolve_for_run(body, scenario.base_dir)
        except TwinInputError as exc:  # say which file and variant the deployment came from
            where = scenario.source if name == "baseline" else f"{scenario.source} [variant {name}]"
            raise TwinInputError(f"{where}: {exc}") from None
    runs: dict[str, dict[str, Any]] = {}
    with _progress(show_progress) as progress:
        for name, body in bodies.items():
            reps = []
            for r in range(body.replications):
                label = name if body.replications == 1 else f"{name} (replication {r + 1}/{body.replications})"
                task = progress.add_task(label, total=1.0)
                result = run_body(body, scenario.base_dir, replication=r, deployment=deployments[name],
                                  progress=lambda f, t=task: progress.update(t, completed=f))
                progress.update(task, completed=1.0)
                reps.append((result, metrics_of(result, body)))
            summary = replicate_summary([m for _, m in reps]) if len(reps) > 1 else None
            runs[name] = {"body": body, "deployment": deployments[name], "replications": reps,
                          "ci": summary}
    return scenario, runs


def _headline_parts(run: dict[str, Any], ref: dict[str, Any] | None = None) -> list[str]:
    """A run's deployment as parts (``llama-3.1-8b on 1x1 H100-SXM``, ``max_num_seqs=4``, ...); a mixed
    cluster adds one part per replica group. With ``ref`` (the reference run) a single deployment also names a
    format it leaves at the model's own where the reference's sets one (``bf16 KV cache``)."""
    dep = run["deployment"]
    body = run["body"]
    if body.disaggregation is not None:  # a PdDeployment: one line per pool
        return [f"{body.deployment.model} disaggregated {dep.engines['prefill']}P{dep.engines['decode']}D",
                f"KV link {dep.link.kind} {dep.link.bandwidth_bytes_per_s / 1e9:g} GB/s"
                + (" layer-wise" if dep.link.layerwise else "")] + [
            f"  {n}: " + ", ".join(deployment_parts(dep.bodies[n], dep.deployments[n])) for n in ("prefill", "decode")]
    if body.deployment.groups is not None:  # a ClusterDeployment
        parts = [f"{body.deployment.model} on {counted(dep.num_replicas, 'replica')} in "
                 f"{counted(len(dep.groups), 'group')}", f"{body.deployment.router} router"]
        for i, (g, gb, d) in enumerate(zip(dep.groups, dep.bodies, dep.deployments)):
            parts.append(f"  {g.name or f'group {i}'}: " + ", ".join(deployment_parts(gb, d)) +
                         (f", weight {g.weight:g}" if g.weight != 1 else ""))   # a line of its own
        return parts
    ref_body = ref["body"] if ref is not None and ref["body"].deployment.groups is None \
        and ref["body"].disaggregation is None else None
    return [f"{body.deployment.model} on " + p if i == 0 else p
            for i, p in enumerate(deployment_parts(body, dep, ref_body))]


def _print_headlines(runs: dict[str, dict[str, Any]]) -> None:
    """The first run's deployment in full, wrapped to the width; each other run only where it differs, and the
    runs that do not differ at all named on one line."""
    def say(name: str, parts: list[str]) -> None:
        console.print(f"{name}: " + ", ".join(p for p in parts if not p.startswith("  ")), highlight=False)
        for part in parts:
            if part.startswith("  "):    # a replica group
                console.print(part, highlight=False)

    first, *others = runs
    ref = _headline_parts(runs[first])
    say(first, ref)
    same = []
    for name in others:
        diff = [p for p in _headline_parts(runs[name], runs[first]) if p not in ref]
        if diff:
            say(name, diff)
        else:
            same.append(name)
    if same:
        console.print(f"same deployment as {first}: " + ", ".join(same), highlight=False)


@main.command()
@click.argument("scenario")
@click.option("--variant", "-v", "variants", multiple=True, help="Variant to run (repeatable; default baseline).")
@click.option("--all-variants", is_flag=True, help="Run the baseline and every variant, side by side.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a scenario field, e.g. --set server.max_num_seqs=4 (repeatable).")
@click.option("--seed", type=int, help="Override the scenario's seed.")
@click.option("--replications", type=click.IntRange(1, 1000), help="Independent replications (seeds seed..seed+n-1).")
@click.option("--json", "json_path", type=OutputFile(),
              help="Write results in the vllm bench serve JSON schema; several variants: one file per variant "
                   "(out.json -> out.<variant>.json).")
@click.option("--requests-out", type=OutputFile(),
              help="Per-request table (.csv or .parquet); several runs: every one, with variant and replication "
                   "columns.")
@click.option("--steps-out", type=OutputFile(),
              help="Per-step table (.csv or .parquet); several runs: every one, with variant and replication "
                   "columns.")
@click.option("--replicas-out", type=OutputFile(),
              help="Per-replica metrics table (.csv or .parquet), one row per replica; several runs: every one, "
                   "with variant and replication columns.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def run(scenario: str, variants: tuple[str, ...], all_variants: bool, sets: tuple[str, ...], seed: int | None,
        replications: int | None, json_path: str | None, requests_out: str | None, steps_out: str | None,
        replicas_out: str | None, quiet: bool) -> None:
    """Simulate SCENARIO (a YAML file, or a bundled scenario's name: twin list) and print its metrics."""
    names = run_names(scenario, variants, all_variants)
    _, runs = _run_variants(scenario, names, sets, seed, replications, not quiet and console.is_terminal)
    _report(runs, json_path, requests_out, steps_out, replicas_out=replicas_out)


@main.command()
@click.argument("scenario")
@click.option("--variants", "variant_list", help="Comma-separated variants, run beside the baseline (default: all).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a field in every variant.")
@click.option("--seed", type=int, help="Override the scenario's seed.")
@click.option("--replications", type=click.IntRange(1, 1000), help="Independent replications per variant.")
@click.option("--reference", "-r", default="baseline", show_default=True,
              help="The run every other is compared against (the baseline or a variant's name).")
@click.option("--full", is_flag=True,
              help="With many variants: the full per-metric tables after the summary.")
@click.option("--json", "json_path", type=OutputFile(),
              help='Write all results as one JSON file: {"variants": {name: <vllm bench serve result>}}.')
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def compare(scenario: str, variant_list: str | None, sets: tuple[str, ...], seed: int | None,
            replications: int | None, reference: str, full: bool, json_path: str | None, quiet: bool) -> None:
    """Run the baseline and variants of SCENARIO and show them side by side with deltas against the reference
    (the baseline unless --reference names a variant); more than a few variants: a summary first."""
    from twin.errors import did_you_mean
    from twin.scenario import load_scenario

    sc = load_scenario(scenario)
    names = compare_names(sc, variant_list)
    if reference not in sc.names():
        raise TwinInputError(f"--reference {reference!r}: not a run of {sc.source}"
                             f"{did_you_mean(reference, sc.names())} (runs: {', '.join(sc.names())})")
    if reference not in names:
        names.append(reference)
    names = [reference] + [n for n in names if n != reference]
    _, runs = _run_variants(scenario, names, sets, seed, replications, not quiet and console.is_terminal)
    _report(runs, json_path, None, None, one_json_file=True, full=full, whatif=True)


def _report(runs: dict[str, dict[str, Any]], json_path: str | None, requests_out: str | None,
            steps_out: str | None, *, one_json_file: bool = False, full: bool = False,
            replicas_out: str | None = None, whatif: bool = False) -> None:
    from twin.results.report import render_comparison, render_summary

    _print_headlines(runs)
    many = len(runs) - 1 > SUMMARY_FROM
    if many:
        from twin.results.compare_summary import summary_table

        reference = next(iter(runs))
        console.print(summary_table({name: run["replications"][0][1] for name, run in runs.items()}, reference,
                                    plain=not console.is_terminal))
        if not full:
            console.print(f"Every metric of each variant against {reference}: --full; a few variants side by "
                          "side: --variants a,b", highlight=False)
    if many and not full:
        pass                       # the summary stands for the full tables
    elif len(runs) == 1:
        (name, run), = runs.items()
        result, metrics = run["replications"][0]
        render_summary(metrics, title=name, console=console)
        if (result.num_replicas or 1) > 1 and "disaggregation" not in result.config:   # P/D: per pool below
            _print_per_replica(result, run["body"])
        if run["ci"]:
            _print_ci(run["ci"])
    else:
        render_comparison({name: run["replications"][0][1] for name, run in runs.items()},
                          baseline=next(iter(runs)), console=console)
    from twin.cli.outputs import write_json_outputs, write_table_outputs
    from twin.cli.pd_output import print_bands, print_cold_start, print_kv_offload, print_limits, print_pd_pools

    print_pd_pools(runs, console)
    print_kv_offload(runs, console)
    print_cold_start(runs, console)
    print_limits(runs, console, short=many and not full)     # issue 33 round 21: what caps the server
    change = print_bands(runs, console, whatif=whatif)   # issue 33: the held-out error bands; compare's what-if band
    if json_path:
        for path in write_json_outputs(runs, json_path, one_file=one_json_file, whatif=change):
            console.print(f"wrote {path}", highlight=False)
    for path in write_table_outputs(runs, requests_out, steps_out, replicas_out):
        console.print(f"wrote {path}", highlight=False)


def _print_per_replica(result: Any, body: Any) -> None:
    """The per-replica table of a multi-replica run (the first replication) and its load imbalance."""
    from twin.results.per_replica import load_imbalance, per_replica_metrics
    from twin.results.report import render_per_replica

    window = (body.warmup_s, None) if body.warmup_s > 0 else None
    rows = per_replica_metrics(result, slo=body.slo.as_dict() or None, window=window)
    render_per_replica(rows, load_imbalance(rows), console=console)


def _print_ci(ci: dict[str, Any]) -> None:
    from twin.results.report import format_value, label

    table = Table(title="Replications: mean ± 95% half-width", show_header=True)
    table.add_column("metric")
    table.add_column("mean", justify="right")
    table.add_column("± half-width", justify="right")
    for key in ("request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms",
                "p99_tpot_ms", "p99_e2el_ms"):
        entry = ci.get(key)
        if entry and entry.get("mean") is not None:
            hw = entry.get("half_width")
            table.add_row(label(key), format_value(key, entry["mean"]), "-" if hw is None else format_value(key, hw))
    console.print(table)


@main.command(name="list")
@click.argument("what", type=click.Choice(["scenarios", "gpus", "models", "all"]), default="all")
def list_cmd(what: str) -> None:
    """List bundled scenarios, catalogued GPUs and models."""
    from twin.hardware.catalog import list_gpus, list_models
    from twin.scenario import list_scenarios, load_scenario

    if what in ("scenarios", "all"):
        table = Table(title="Scenarios", expand=True)   # expand: the ratios share out a narrow terminal
        table.add_column("name", no_wrap=True)
        table.add_column("variants", ratio=2)
        table.add_column("description", ratio=3)
        for path in list_scenarios():
            try:
                sc = load_scenario(path)
                table.add_row(path.stem, ", ".join(sc.names()[1:]), str(sc.baseline_data.get("description", "")))
            except TwinInputError as exc:
                table.add_row(path.stem, "", f"[red]invalid: {escape(on_terminal(str(exc)))}[/]")
        console.print(table)
    if what in ("gpus", "all"):
        table = Table(title="GPUs", caption="Any case; aliases work too (h100, a100, h200, b200, 4090).")
        for col in ("name", "bf16 TFLOP/s", "bandwidth TB/s", "memory GiB", "interconnect"):
            table.add_column(col)
        for g in list_gpus():
            table.add_row(g.name, f"{g.flops('bf16') / 1e12:,.0f}", f"{g.memory_bandwidth_bytes_per_s / 1e12:.2f}",
                          f"{g.memory_gib:.0f}", g.interconnect)
        console.print(table)
    if what in ("models", "all"):
        table = Table(title="Models", caption="Any case; Hugging Face ids work too (meta-llama/Llama-3.1-8B-Instruct).")
        for col in ("name", "params (B)", "layers", "hidden", "heads/kv", "KV KiB/token (bf16)", "max len"):
            table.add_column(col)
        for m in list_models():
            table.add_row(m.name, f"{m.num_params / 1e9:.2f}", str(m.num_hidden_layers), str(m.hidden_size),
                          f"{m.num_attention_heads}/{m.num_key_value_heads}",
                          f"{m.kv_bytes_per_token('bf16') / 1024:.0f}", str(m.max_position_embeddings))
        console.print(table)


if __name__ == "__main__":
    main()
