"""A GPU run judged again offline: the profile refitted from the run's own samples with today's cost model and
fit, and the twin with it set against the engine's held-out measurements of that run. A change to the cost
model or the fit is checked on real GPU data without a GPU.

    python -m calibration.revalidate calibration/profiles/h200-sxm-8b

reads ``<stem>.samples.json``, ``<stem>.report.json`` and (if present) ``<stem>.heldout-steps.json`` as
:mod:`calibration.gpu_run` wrote them, and writes the refitted profile ``<name>.refit.json`` and the comparison
``<name>.refit.md`` (as run, then refitted) into ``--out-dir``: by default a new temporary folder, so the
command never changes a checkout; ``--out-dir calibration/profiles`` refreshes the committed refit. The held-out workloads are regenerated from the plan and the
seeds, so the twin's side is recomputed whole; the engine's side is the measurements in the report.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from calibration.calibrate import refit
from calibration.gpu_report import pct
from calibration.heldout import HEADLINE_METRICS, heldout_specs, predict, predicted_step_times_s
from calibration.samples import load_samples
from calibration.sweep_plan import SweepPlan
from calibration.validate import compare_metrics, step_time_residuals
from twin.errors import TwinInputError
from twin.json_input import load_json_path

SHOWN = ("request_throughput", "mean_ttft_ms", "p90_ttft_ms", "mean_tpot_ms", "p90_tpot_ms")


def _read_json(path: Path) -> dict[str, Any]:
    doc = load_json_path(path, "GPU run file")
    if not isinstance(doc, dict):
        raise TwinInputError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    return doc


def revalidate(stem: str | Path, out_dir: str | Path | None = None) -> dict[str, Any]:
    """Refit, re-predict every held-out load, write ``<name>.refit.json`` and ``<name>.refit.md`` into
    ``out_dir`` (default: beside the run's files); returns the comparison. A file that lacks a field the run writes, or holds one of the wrong type, is a
    ``TwinInputError`` naming the file and the field."""
    stem = Path(stem)
    try:
        return _revalidate(stem, Path(out_dir) / stem.name if out_dir is not None else stem)
    except TwinInputError:
        raise
    except KeyError as e:
        raise TwinInputError(f"{stem}.*.json: field {e} is missing (files written by calibration.gpu_run "
                             f"are expected)") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise TwinInputError(f"{stem}.*.json: a field has the wrong type or value ({e})") from None


def _revalidate(stem: Path, out: Path) -> dict[str, Any]:
    from pydantic import ValidationError

    from twin.core.scheduler_config import SchedulerConfig
    from twin.cost.profile import ProfileCostModel

    report = _read_json(Path(f"{stem}.report.json"))
    validation = report.get("validation")
    if not isinstance(validation, dict) or not validation.get("loads"):
        raise TwinInputError(f"{stem}.report.json: field 'validation' holds no held-out loads (the run stopped "
                             f"before its validation phase)")
    try:
        _, samples_doc = load_samples(f"{stem}.samples.json")
    except ValueError as e:
        raise TwinInputError(str(e)) from None
    steps_path = Path(f"{stem}.heldout-steps.json")
    steps = _read_json(steps_path).get("loads", {}) if steps_path.exists() else {}
    profile_path = Path(f"{out}.refit.json")
    profile = refit(f"{stem}.samples.json", profile_path, model=report.get("model"))
    cost = ProfileCostModel(profile_path, check_range=False)
    try:
        config = SchedulerConfig(**validation["scheduler_config"])
    except ValidationError as e:
        raise TwinInputError(f"{stem}.report.json: validation.scheduler_config: {e.errors()[0]['msg']}") from None
    plan = SweepPlan(**samples_doc["plan"])
    num_blocks = int(validation.get("num_kv_blocks") or samples_doc["environment"]["num_kv_blocks"])
    rows = []
    for i, row in enumerate(validation["loads"]):
        asked = int(row.get("requests_asked", row["num_requests"]))
        specs = heldout_specs(plan, config, i, row["offered_rate_per_s"], asked)
        if len(specs) != row["num_requests"]:
            raise TwinInputError(f"{stem}.report.json: load {row['load']:g}: the regenerated workload has "
                                 f"{len(specs)} requests, the run served {row['num_requests']} (another plan?)")
        sim = predict(specs, config, num_blocks, cost, row["engine_time_s"] if row["stopped_early"] else None)
        cmp = compare_metrics(row["measured"], sim.metrics(), HEADLINE_METRICS)
        new = {"load": row["load"], "errors": {m: cmp.error(m) for m in HEADLINE_METRICS},
               "as_run_errors": row["errors"]}
        measured_steps = steps.get(f"{row['load']:g}")
        if measured_steps:
            new["step_time"] = step_time_residuals(
                [s["wall_s"] for s in measured_steps],
                predicted_step_times_s(cost, ((s["n"], s["c"]) for s in measured_steps)))
            new["as_run_step_time"] = row["step_time"]
        rows.append(new)
    result = {"profile": str(profile_path), "coefficients": profile["cost_model"]["coefficients"],
              "fit_test_mape_pct": profile["fit"]["metrics"]["test"].get("mape_pct"), "loads": rows}
    Path(f"{out}.refit.md").write_text(render(report, result), encoding="utf-8")
    return result


def render(report: dict[str, Any], result: dict[str, Any]) -> str:
    fit = report.get("fit") or {}
    lines = [f"# {report['model']} on {report['device']}: the run's held-out loads, as run and refitted", "",
             f"Refitted profile `{Path(result['profile']).name}` (today's cost model, the run's own samples); "
             f"fit's held-out step MAPE {(fit.get('test') or {}).get('mape_pct', float('nan')):.1f}% as run, "
             f"{result['fit_test_mape_pct']:.1f}% refitted. Errors are (twin - engine) / engine.", "",
             "| load | profile | " + " | ".join(SHOWN) + " | step MAPE |",
             "|---:|---|" + "---:|" * (len(SHOWN) + 1)]
    for r in result["loads"]:
        for name, errors, steps in (("as run", r["as_run_errors"], r.get("as_run_step_time")),
                                    ("refitted", r["errors"], r.get("step_time"))):
            lines.append(f"| {r['load']:.0%} | {name} | " + " | ".join(pct(errors.get(m)) for m in SHOWN)
                         + f" | {pct((steps or {}).get('mape'), signed=False)} |")
    lines += ["", "Coefficients (refitted): " + ", ".join(f"{k} {v:.4g}" for k, v in result["coefficients"].items()),
              ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stem", help="the run's files without their suffix, e.g. calibration/profiles/h200-sxm-8b")
    ap.add_argument("--out-dir", default=None,
                    help="where to write <name>.refit.json and .refit.md (default: a new temporary folder; "
                         "calibration/profiles refreshes the committed refit)")
    args = ap.parse_args(argv)
    out_dir = Path(args.out_dir) if args.out_dir else Path(tempfile.mkdtemp(prefix="revalidate-"))
    if not out_dir.is_dir():
        print(f"error: --out-dir {out_dir}: no such folder", file=sys.stderr)
        return 2
    try:
        result = revalidate(args.stem, out_dir)
    except TwinInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    md = out_dir / f"{Path(args.stem).name}.refit.md"
    print(md.read_text(encoding="utf-8"))
    print(f"wrote {result['profile']} and {md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
