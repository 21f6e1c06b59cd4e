"""``twin validate``: check the twin's predictions against measurements, from the calibration engine or from a
``vllm bench serve`` result file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from twin.errors import TwinInputError
from twin.cli.console import console
from twin.cli.option_types import OutputFile, refuse_outside_mode
from twin.results.report import format_value, label



@click.command()
@click.argument("scenario")
@click.option("--variant", "-v", default="baseline", help="Variant of SCENARIO to validate.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a scenario field (repeatable).")
@click.option("--profile", type=click.Path(exists=True, dir_okay=False),
              help="Calibrated profile JSON (sets cost_model to kind: profile).")
@click.option("--bench-json", type=click.Path(exists=True, dir_okay=False),
              help="A vllm bench serve result (--save-result --save-detailed) measured on a real server "
                   "configured as SCENARIO's deployment and server; the twin replays its requests.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Engine device for a real run (cpu or cuda).")
@click.option("--dtype", type=click.Choice(["auto", "fp32", "bf16", "fp16"]), default="auto", show_default=True,
              help="Engine dtype (fp32, bf16, fp16; auto: fp32 on CPU).")
@click.option("--max-kv-blocks", type=click.IntRange(16), default=4096, show_default=True,
              help="Cap on the engine's KV pool (the twin gets the same pool).")
@click.option("--json", "json_path", type=OutputFile(), help="Write the comparison as JSON.")
@click.option("--measured-json", type=OutputFile(),
              help="Also write the engine's measurements as a vllm bench serve result file.")
def validate(scenario: str, variant: str, sets: tuple[str, ...], profile: str | None, bench_json: str | None,
             device: str, dtype: str, max_kv_blocks: int, json_path: str | None, measured_json: str | None) -> None:
    """Run SCENARIO for real on the calibration engine and in the twin, and report the twin's error per metric
    (or, with --bench-json, against a real server's measurements)."""
    from twin.scenario import load_scenario, parse_set_options

    sc = load_scenario(scenario)
    overrides = parse_set_options(sets)
    if profile:
        overrides.setdefault("cost_model", {}).update({"kind": "profile", "profile": str(Path(profile).resolve())})
    body = sc.body(variant, overrides)
    from twin.sim.deployment import require_single_deployment

    require_single_deployment(body, "twin validate", sc.source)
    refuse_outside_mode("a run on the engine (without --bench-json)", not bench_json,
                        ("device", "dtype", "max_kv_blocks", "measured_json"))
    if bench_json:
        report = _validate_bench(body, sc.base_dir, Path(bench_json))
    else:
        report = _validate_engine(body, sc.base_dir, device, dtype, max_kv_blocks, measured_json, bool(profile))
    if json_path:
        Path(json_path).write_text(json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
        console.print(f"wrote {json_path}", highlight=False)


def _validate_engine(body, base_dir, device: str, dtype: str, max_kv_blocks: int,
                     measured_json: str | None, profile_given: bool = False) -> dict[str, Any]:
    try:
        from calibration.validation_run import validate_body
    except ImportError as exc:  # torch missing
        raise TwinInputError(f"validating against the engine needs torch ({exc.name} is not installed): "
                             f"pip install -e '.[calibration]'") from None
    console.print(f"serving {body.name} for real on {device} (this takes the workload's wall-clock time)...",
                  highlight=False)
    run = validate_body(body, base_dir, device=device, dtype=dtype, max_kv_blocks=max_kv_blocks)
    if measured_json:
        from twin.results.export import write_json

        write_json(run.measured, measured_json, slo=body.slo.as_dict() or None)
        console.print(f"wrote the engine's measurements to {measured_json}", highlight=False)
    print_comparison(run.comparison.rows, f"{body.name}: engine (measured) vs twin (predicted)")
    if run.residuals:
        r = run.residuals
        console.print(f"step time: {r['steps']} steps, measured mean {r['mean_measured_ms']:.2f} ms, predicted "
                      f"{r['mean_predicted_ms']:.2f} ms, MAPE {r['mape']:.1%}, p90 |error| "
                      f"{r['p90_abs_error_ms']:.2f} ms", highlight=False)
    console.print(scheduling_line(run.scheduling), highlight=False)
    step_note = step_time_note(run.residuals, device, profile_given)
    for note in run.comparison.notes + ([step_note] if step_note else []):
        console.print(f"note: {note}", highlight=False)
    return run.as_dict()


def _validate_bench(body, base_dir, path: Path) -> dict[str, Any]:
    from calibration.validate import bench_traffic, compare_metrics, metrics_from_bench_json
    from twin.sim.run import metrics_of
    from twin.sim.deployment import resolve_deployment
    from twin.sim.simulate import simulate
    from twin.sim.deployment import make_router
    from twin.core.schedulers import make_scheduler

    from twin.json_input import load_json_path

    from twin.analysis.measured import measured_from_bench

    doc = load_json_path(path, "bench result")
    measured_from_bench(doc, str(path))  # every per-request field checked before any of it is used
    traffic = bench_traffic(doc, str(path))
    dep = resolve_deployment(body, base_dir)
    result = simulate(traffic, lambda i: make_scheduler(dep.scheduler_config, dep.num_gpu_blocks),
                      lambda i: dep.cost_model_factory(), num_replicas=body.deployment.replicas,
                      router=make_router(body.deployment.router))
    predicted = metrics_of(result, body)
    cmp = compare_metrics(metrics_from_bench_json(doc), predicted)
    cap = f", at most {traffic.concurrency} in flight" if not isinstance(traffic, list) else ""
    print_comparison(cmp.rows, f"{path.name} (measured) vs twin (predicted), {len(result.requests)} requests{cap}")
    return {"bench_json": str(path), "comparison": cmp.as_dict()}


def scheduling_line(scheduling: dict[str, tuple[Any, Any]]) -> str:
    """``scheduling, engine vs twin: steps 673 vs 3,860; mean running batch 11.4 vs 1.98; ...``: each figure
    named as ``twin run`` names it, counts exact, the rest as its tables show them."""
    def value(key: str, v: Any) -> str:
        return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else format_value(key, v)

    parts = [f"{label(k)} {value(k, a)} vs {value(k, b)}" for k, (a, b) in scheduling.items()]
    return "scheduling, engine vs twin: " + "; ".join(parts)


STEP_RATIO_NOTE = 1.5   # engine / profile mean step time beyond which the profile no longer describes the machine


def step_time_note(residuals: dict[str, Any] | None, device: str = "cpu", profile_given: bool = False) -> str | None:
    """A note when the engine's mean step time is more than ``STEP_RATIO_NOTE`` times the profile's prediction
    (or less than its inverse): the latency errors then measure the machine's state, not the twin."""
    if not residuals or not residuals.get("mean_predicted_ms") or not residuals.get("mean_measured_ms"):
        return None
    ratio = residuals["mean_measured_ms"] / residuals["mean_predicted_ms"]
    if 1 / STEP_RATIO_NOTE <= ratio <= STEP_RATIO_NOTE:
        return None
    speed = "slower (busier)" if ratio > 1 else "faster"
    head = f"the engine's steps took {ratio:.2f}x the profile's step time on average: this machine ran {speed} "
    if profile_given:
        return (head + "than when the profile was measured, and the latency errors above follow from that; on a "
                "shared machine calibrate just before validating, or validate on an idle one")
    return (head + f"than the one the profile was measured on, and the latency errors above follow from that; "
            f"calibrate here (twin calibrate --quick --device {device}{' --threads 1' if device == 'cpu' else ''} "
            f"-o my-profile.json) and pass --profile my-profile.json")


def print_comparison(rows, title: str) -> None:
    """``title`` on its own line (wrapped at the terminal's width, not the table's), then the metrics as ``twin
    run`` names them, each latency in its unit."""
    console.print(title, highlight=False)
    table = Table()
    for col in ("metric", "measured", "predicted", "error"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    for metric, measured, predicted, err in rows:
        table.add_row(label(metric), _fmt(metric, measured), _fmt(metric, predicted),
                      "-" if err is None else f"{err:+.1%}")
    console.print(table)


def _fmt(metric: str, v: float | None) -> str:
    """4 significant figures (`twin.results.numbers`), latencies in their unit; never an exponent."""
    from twin.results import numbers

    if v is None:
        return "-"
    return numbers.duration_ms(v, 4) if str(metric).endswith("_ms") else numbers.number(v, 4)
