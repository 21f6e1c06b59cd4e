"""Run one scenario body twice, for real on the calibration engine and in the twin with a calibrated profile,
and compare: metric errors, step-time residuals, and whether the two scheduled alike."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from calibration.engine import ModelRunner
from calibration.environment import device_name, torch_dtype
from calibration.model import ModelShape
from calibration.serve import StepShapeRecord, serve
from calibration.validate import Comparison, compare_metrics, step_time_residuals
from twin.sim.run import metrics_of, run_body
from twin.sim.deployment import require_single_deployment, resolve_deployment
from twin.cost.profile import measured_on, warn_if_foreign
from twin.errors import TwinInputError
from twin.results.sim_result import SimResult
from twin.scenario import ScenarioBody
from twin.core.schedulers import make_scheduler
from twin.workload.generate import build_workload

DEFAULT_MAX_KV_BLOCKS = 4096
# a relative error past this on a headline metric, with a profile from another machine, is put down to that
LARGE_ERROR = 0.25
HEADLINE = ("request_throughput", "mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")


@dataclass
class ValidationRun:
    body: ScenarioBody
    measured: SimResult
    predicted: SimResult
    measured_metrics: dict[str, Any]
    predicted_metrics: dict[str, Any]
    comparison: Comparison
    residuals: dict[str, float]
    scheduling: dict[str, Any]
    machines: dict[str, str | None]      # device names: where the profile was measured, where the engine ran

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.body.name, "comparison": self.comparison.as_dict(), "step_time_residuals":
                self.residuals, "scheduling": self.scheduling, "machines": self.machines}


def _cap_kv_blocks(body: ScenarioBody, base_dir: Path | None, max_kv_blocks: int) -> ScenarioBody:
    """The engine allocates its KV pool for real: keep it at most ``max_kv_blocks``, and give the twin the
    very same pool. The engine schedules synchronously (no async scheduling), so the twin does too here."""
    dep = resolve_deployment(body, base_dir)
    blocks = min(dep.num_gpu_blocks, max_kv_blocks)
    server = body.server.model_copy(update={"num_gpu_blocks_override": blocks, "async_scheduling": False})
    return body.model_copy(update={"server": server})


def validate_body(body: ScenarioBody, base_dir: Path | None = None, *, device: str = "cpu",
                  dtype: str | None = None, max_kv_blocks: int = DEFAULT_MAX_KV_BLOCKS,
                  progress: Callable[[str, float], None] | None = None) -> ValidationRun:
    if body.cost_model.kind != "profile":
        raise TwinInputError("cost_model.kind: validation needs a calibrated profile (kind: profile, profile: FILE)")
    require_single_deployment(body, "validation (the calibration engine serves one replica)")
    if body.deployment.replicas != 1 or body.deployment.tensor_parallel_size != 1:
        raise TwinInputError("deployment: the calibration engine serves one replica at tensor_parallel_size 1")
    if body.speculative_decoding is not None:
        raise TwinInputError("speculative_decoding: the calibration engine runs no drafter; validate without it")
    body = _cap_kv_blocks(body, base_dir, max_kv_blocks)
    dep = resolve_deployment(body, base_dir)
    cost = dep.cost_model_factory()
    _match_threads(cost)

    # ground truth: the engine, in real time
    runner = ModelRunner(ModelShape.from_any(dep.model), device=device, dtype=torch_dtype(dtype, device),
                         num_blocks=dep.num_gpu_blocks, block_size=dep.scheduler_config.block_size, seed=body.seed)
    _warm_up(runner)
    scheduler = make_scheduler(dep.scheduler_config, dep.num_gpu_blocks)
    shapes: list[StepShapeRecord] = []
    traffic = build_workload(body.workload, body.seed, base_dir=base_dir)
    measured = serve(traffic, scheduler, runner, step_shapes=shapes, max_time_s=body.max_sim_time_s,
                     progress=(lambda f: progress("engine", f)) if progress else None)

    # prediction: the twin with the calibrated profile, same workload and seed
    predicted = run_body(body, base_dir, deployment=dep,
                         progress=(lambda f: progress("twin", f)) if progress else None)
    mm, pm = metrics_of(measured, body), metrics_of(predicted, body)
    residuals = step_time_residuals([s.measured_s for s in shapes], [cost.step_time_s(s) for s in shapes])
    scheduling = {
        "steps": (len(measured.steps), len(predicted.steps)),
        "mean_running_batch": (mm.get("mean_running_batch"), pm.get("mean_running_batch")),
        "preemptions": (measured.num_preemptions, predicted.num_preemptions),
        "prefix_cache_hit_rate": (mm.get("prefix_cache_hit_rate"), pm.get("prefix_cache_hit_rate")),
        "completed": (mm.get("completed"), pm.get("completed")),
    }
    cmp = compare_metrics(mm, pm)
    if measured.num_preemptions != predicted.num_preemptions:
        cmp.notes.append("the engine and the twin preempted differently: their timelines diverged")
    machines = {"profile": measured_on(cost.profile), "engine": device_name(runner.device)}
    foreign = warn_if_foreign(cost.profile, machines["engine"], cost.source)
    note = foreign_note(cmp, machines) if foreign else None
    if note:
        cmp.notes.append(note)
    return ValidationRun(body, measured, predicted, mm, pm, cmp, residuals, scheduling, machines)


def foreign_note(cmp: Comparison, machines: dict[str, str | None]) -> str | None:
    """The note for a comparison whose profile came from another machine, when a headline error is large (or
    None): the errors are put down to the machines, not the twin."""
    errors = {m: e for m, _, _, e in cmp.rows}
    large = {m: e for m in HEADLINE if (e := errors.get(m)) is not None and abs(e) > LARGE_ERROR}
    if not large:
        return None
    worst = max(large, key=lambda m: abs(large[m]))
    return (f"errors up to {large[worst]:+.0%} ({worst}) are expected here: the profile was measured on "
            f"{machines['profile']!r} and the engine ran on {machines['engine']!r}; calibrate on this machine "
            f"(twin calibrate --quick -o here.json) and validate with --profile here.json")


def _match_threads(cost) -> None:
    """Run the engine with the thread count the profile was measured with (CPU timings depend on it)."""
    import torch

    threads = (getattr(cost, "profile", None) or {}).get("environment", {}).get("threads")
    if isinstance(threads, int) and threads > 0:
        torch.set_num_threads(threads)


def _warm_up(runner: ModelRunner) -> None:
    """First calls pay one-off costs (allocator, kernels); keep them out of the measured run."""
    from calibration.engine import SeqInput

    for n in (1, 64, 1):
        runner.execute_batch([SeqInput(list(range(1, n + 1)), 0, [1, 2, 3, 4, 5], 1)])
