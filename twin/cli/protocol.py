"""``twin protocol`` (the 30-minute protocol: scheduler limits, prefix caching, speculative decoding, one change
at a time, predicted with intervals and with the commands that measure them) and ``twin diagnose`` (measured
results in, likely causes out). Registered in ``twin.cli.main``."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from twin.cli.console import console, err_console
from twin.cli.option_types import FiniteFloatRange
from twin.errors import TwinInputError
from twin.results.numbers import counted


def _int_list(text: str | None, option: str) -> list[int] | None:
    if not text:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            v = int(part)
        except ValueError:
            raise TwinInputError(f"{option} {text!r}: {part!r} is not an integer (give e.g. 1,4,16)") from None
        if v < 1:
            raise TwinInputError(f"{option} {text!r}: {v} must be >= 1")
        if v in out:
            raise TwinInputError(f"{option} {text!r}: {v} is given twice")
        out.append(v)
    return out


def _say(text: str) -> None:
    console.print(escape(text), highlight=False, soft_wrap=True)


@click.command()
@click.argument("scenario")
@click.option("--variant", "-v", default="baseline", show_default=True,
              help="The scenario's variant that describes the current deployment and traffic.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a scenario field (repeatable).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False),
              help="Replay this trace (Azure, Mooncake, BurstGPT or length CSV) as the traffic instead.")
@click.option("--replications", type=click.IntRange(1, 100), default=3, show_default=True,
              help="Runs per configuration (seeds seed..seed+n-1) for the confidence intervals.")
@click.option("--seed", type=int, help="Override the scenario's seed.")
@click.option("--spec-concurrency", metavar="N,N,...",
              help="Extra closed-loop concurrencies for the speculative-decoding grid (1 and the operating "
                   "concurrency are always run).")
@click.option("--engine", type=click.Choice(["cpu", "cuda"]),
              help="Also serve each step for real on the calibration engine (tiny-model scenarios with a "
                   "calibrated profile, e.g. validate_tiny_cpu).")
@click.option("--engine-duration", type=FiniteFloatRange(min=0.5), metavar="SECONDS",
              help="Shorten the workload (workload.duration_s) for predictions and engine runs alike.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Write protocol.md, protocol.html (Plotly figures) and protocol.json here.")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
def protocol(scenario: str, variant: str, sets: tuple[str, ...], trace_path: str | None, replications: int,
             seed: int | None, spec_concurrency: str | None, engine: str | None, engine_duration: float | None,
             out_dir: str | None, quiet: bool) -> None:
    """Check the serving stack before buying GPUs: scheduler limits, then prefix caching, then speculative
    decoding, then the combination; each change predicted against SCENARIO's current configuration, with the
    vllm serve / vllm bench serve lines that measure it."""
    from twin.analysis.protocol import run_protocol
    from twin.analysis.protocol_evaluation import merge_overrides
    from twin.analysis.protocol_verdicts import VERDICT_WORDS
    from twin.scenario import load_scenario, parse_set_options

    sc = load_scenario(scenario)
    overrides = parse_set_options(sets)
    if trace_path:  # the trace replaces the traffic; --set options still apply on top of it
        try:
            resolved = Path(trace_path).resolve()
        except (OSError, RuntimeError):     # a symbolic-link loop (RuntimeError before Python 3.13)
            raise TwinInputError(f"--trace {trace_path}: a symbolic link loop") from None
        overrides = merge_overrides({"workload": {"_replace": True, "trace": {"path": str(resolved)}}}, overrides)
    show = not quiet and err_console.is_terminal

    def progress(msg: str) -> None:
        if show:
            err_console.print(f"[dim]{escape(msg)}[/]", highlight=False)

    rep = run_protocol(sc, scenario_arg=scenario, variant=variant, overrides=overrides, replications=replications,
                       seed=seed, spec_concurrency=_int_list(spec_concurrency, "--spec-concurrency"), engine=engine,
                       engine_duration_s=engine_duration, progress=progress)
    _say(f"{rep.scenario}{'' if variant == 'baseline' else ' [' + variant + ']'}: {rep.headline}")
    _say(f"traffic: {rep.offered_load}; {counted(rep.replications, 'replication')} per configuration")
    table = Table(title="The protocol, one change at a time")
    for col in ("step", "verdict", "change"):
        table.add_column(col)
    for i, s in enumerate(rep.steps, 1):
        table.add_row(f"{i}. {s.title}", VERDICT_WORDS.get(s.verdict, s.verdict), escape(s.change_label or "-"))
    console.print(table)
    for i, s in enumerate(rep.steps, 1):
        _say(f"{i}. {s.title}: {s.finding}")
        for note in s.notes:
            _say(f"   note: {note}")
        if s.measured and s.measured.get("deltas"):
            d = s.measured["deltas"]
            parts = [f"{k} {v['rel'] * 100:+.1f}%" for k, v in d.items() if v.get("rel") is not None]
            _say(f"   measured on the engine: {', '.join(parts)}")
    for a in rep.assumptions:
        _say(f"assumption: {a}")
    for n in rep.command_notes:
        _say(f"about the commands: {n}")
    final = rep.step("combination")
    if final.commands:
        _say("measure the combination on the real server:")
        for c in final.commands:
            _say(f"  {c}")
    if out_dir:
        from twin.analysis.protocol_report import write_protocol_report

        paths = write_protocol_report(rep, out_dir)
        _say("wrote " + ", ".join(str(p) for p in paths.values()))


@click.command()
@click.argument("results", type=click.Path(dir_okay=False))
@click.option("--scenario", "scenario", help="The deployment the results were measured on (a scenario YAML or a "
                                             "bundled name): the twin is fitted on it. Without it the "
                                             "measurements alone are read (no fit).")
@click.option("--variant", "-v", default="baseline", show_default=True, help="Variant of SCENARIO.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a scenario field (repeatable).")
@click.option("--run", "run_name", metavar="NAME",
              help="The run to read in a file of several (a GuideLLM sweep, a table with a concurrency column): "
                   "one of the names the file's runs have (a file of several without it lists them).")
@click.option("--max-concurrency", type=click.IntRange(1),
              help="The benchmark ran closed-loop at this concurrency, each user sending when its last request "
                   "ended (vllm bench serve --max-concurrency at --request-rate inf; inference-perf's concurrent "
                   "load): replayed so, whatever rate RESULTS shows.")
@click.option("--hit-rate", type=FiniteFloatRange(0.0, 1.0),
              help="Measured prefix-cache hit rate (vLLM's prefix_cache_hits / prefix_cache_queries).")
@click.option("--candidates", metavar="N,N,...", help="max_num_seqs values to fit (default: powers of two up to "
                                                      "the offered concurrency, and the measured ceiling).")
@click.option("--shared-prefix-tokens", type=click.IntRange(0),
              help="Every measured prompt began with the same N tokens (default: from the scenario).")
@click.option("--fit-speed/--no-fit-speed", default=True, show_default=True,
              help="Scale the twin's step times to the measured median TPOT before comparing.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Write diagnosis.md, diagnosis.html (Plotly figures) and diagnosis.json here.")
def diagnose(results: str, scenario: str | None, variant: str, sets: tuple[str, ...], run_name: str | None,
             max_concurrency: int | None, hit_rate: float | None, candidates: str | None,
             shared_prefix_tokens: int | None, fit_speed: bool, out_dir: str | None) -> None:
    """Name the likely causes behind measured RESULTS (a vllm bench serve JSON saved with --save-result
    --save-detailed, or a CSV of arrival, first-token and finish times with token counts, e.g. twin run
    --requests-out; also the per-request files twin calibrate --from-results reads: inference-perf's
    per_request_lifecycle_metrics.json, AIPerf's profile_export.jsonl, a GuideLLM report listing every request,
    a JSON Lines table): a concurrency cap, queueing against saturated service, KV-capacity preemption, a
    prefix-cache hit rate below what the traffic allows. Summaries without per-request times (inference-perf's
    stage files) fit the twin with twin calibrate --from-results instead."""
    from twin.analysis.diagnose import diagnose_measured
    from twin.analysis.measured import load_measured
    from twin.scenario import load_scenario, parse_set_options

    m = load_measured(results, run_name)
    if max_concurrency is not None:    # the option says the client ran closed-loop: a rate read off the sends is
        m.max_concurrency = max_concurrency     # what the loop produced, not a rate the client was given
        m.request_rate = None
    body = base_dir = None
    if scenario:
        sc = load_scenario(scenario)
        body = sc.body(variant, parse_set_options(sets))
        base_dir = sc.base_dir
        from twin.sim.deployment import require_single_deployment

        require_single_deployment(body, "twin diagnose --scenario (one server's measurements)", sc.source)
    elif sets:
        raise TwinInputError("--set: needs --scenario (it overrides the scenario's fields)")
    for name, value in (("--candidates", candidates), ("--shared-prefix-tokens", shared_prefix_tokens)):
        if value is not None and not scenario:
            raise TwinInputError(f"{name}: needs --scenario (the twin is fitted on its deployment)")
    if shared_prefix_tokens and shared_prefix_tokens >= int(m.input_lens.max()):
        raise TwinInputError(f"--shared-prefix-tokens {shared_prefix_tokens}: no measured prompt is longer (the "
                             f"longest has {int(m.input_lens.max())} tokens)")
    rep = diagnose_measured(m, body, base_dir, candidates=_int_list(candidates, "--candidates"),
                            fit_speed=fit_speed, hit_rate=hit_rate, scenario=scenario,
                            shared_prefix_tokens=shared_prefix_tokens)
    _say(f"{Path(results).name}: {counted(rep.num_requests, 'completed request')}")
    _say(f"verdict: {rep.summary}")
    for i, c in enumerate(rep.causes, 1):
        _say(f"{i}. {c.title} ({c.likelihood})")
        for e in c.evidence:
            _say(f"   - {e}")
        _say(f"   fix: {c.fix}")
    for n in rep.notes:
        _say(f"note: {n}")
    if out_dir:
        from twin.analysis.diagnose_report import write_diagnose_report

        paths = write_diagnose_report(rep, out_dir)
        _say("wrote " + ", ".join(str(p) for p in paths.values()))


__all__ = ["diagnose", "protocol"]
