"""Engine mode of the protocol: each step's candidate served for real beside its prediction.

With ``engine="cpu"`` (a tiny model and a calibrated profile, e.g. ``scenarios/validate_tiny_cpu.yaml``) the
baseline and every step's candidate without speculative decoding (the calibration engine runs no drafter) are
served on the calibration engine (``calibration.validation_run``, imported only here and only when asked, since it
needs torch); each step gets the measured metrics of the baseline and the candidate and their measured change, on
``ENGINE_KEYS``, for the report to show beside the predicted change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twin.analysis.protocol_evaluation import Evaluation, Runner
from twin.analysis.protocol_walk import Step
from twin.errors import TwinInputError
from twin.results.report import finite_number

ENGINE_KEYS = ("request_throughput", "output_throughput", "mean_ttft_ms", "p99_ttft_ms", "median_tpot_ms",
               "p99_tpot_ms", "p99_e2el_ms", "prefix_cache_hit_rate")


def measure_on_engine(report_steps: list[Step], runner: Runner, device: str,
                       progress: Callable[[str], None] | None) -> None:
    """Serve the baseline and each step's candidate for real; attach measured metrics and deltas."""
    try:
        from calibration.validation_run import validate_body
    except ImportError as exc:  # torch missing
        raise TwinInputError(f"--engine needs torch ({exc.name} is not installed): "
                             f"pip install -e '.[calibration]'") from None
    measured: dict[str, dict[str, Any]] = {}

    def measure(ev: Evaluation) -> dict[str, Any]:
        if ev.label not in measured:
            if progress:
                progress(f"serving {ev.label} for real on the {device} engine")
            run = validate_body(ev.body, runner.scenario.base_dir, device=device)
            measured[ev.label] = {"measured": {k: run.measured_metrics.get(k) for k in ENGINE_KEYS},
                                  "predicted_same_seed": {k: run.predicted_metrics.get(k) for k in ENGINE_KEYS}}
            ev.measured = measured[ev.label]
        return measured[ev.label]

    base = runner.evaluations["baseline"]
    if base.body.cost_model.kind != "profile":
        raise TwinInputError("--engine: the scenario's cost_model must be a calibrated profile (kind: profile), "
                             "e.g. scenarios/validate_tiny_cpu.yaml")
    b = measure(base)
    for step in report_steps:
        if step.key == "baseline":
            step.measured = {"baseline": b["measured"]}
            continue
        if not step.candidate:
            continue
        ev = runner.evaluations[step.candidate]
        if ev.body.speculative_decoding is not None or base.body.speculative_decoding is not None:
            step.notes.append("not measured on the engine: the calibration engine runs no drafter")
            continue
        c = measure(ev)
        deltas = {}
        for k in ENGINE_KEYS:
            x, y = finite_number(c["measured"].get(k)), finite_number(b["measured"].get(k))
            if x is not None and y is not None:
                deltas[k] = {"delta": x - y, "rel": (x / y - 1.0) if y else None}
        step.measured = {"baseline": b["measured"], "candidate": c["measured"], "deltas": deltas}


__all__ = ["ENGINE_KEYS", "measure_on_engine"]
