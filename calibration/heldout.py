"""Held-out validation at several loads: the engine serves a workload it was not calibrated on, the twin with
the fitted profile predicts the same run, and the two are compared metric by metric.

The workload is the replay's kind (shared system prompts, log-uniform prompts, uniform outputs, Poisson
arrivals) with other seeds, at offered rates that are fractions (:data:`LOADS`) of a saturation rate estimated
from the profile itself: ``1 / (mean output x decode step at max_num_seqs / max_num_seqs + prefill of a mean
prompt)``. Both sides use the same scheduler configuration and KV pool; the engine serves through
:func:`calibration.serve_steps.serve` (its clock is the sum of measured step times, so arrivals are honoured on
the engine's own timeline), the twin through :func:`twin.sim.simulate.simulate`. Reported per load: TTFT, TPOT
and throughput errors (``(predicted - measured) / measured``) and the step-time error on the engine's own
held-out steps.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from calibration.gpu_report import pct
from calibration.replay import replay_specs
from calibration.sweep_plan import SweepPlan
from calibration.validate import compare_metrics, step_time_residuals

LOADS: tuple[float, ...] = (0.3, 0.6, 0.9)
HEADLINE_METRICS: tuple[str, ...] = ("request_throughput", "output_throughput", "mean_ttft_ms", "p90_ttft_ms",
                                     "mean_tpot_ms", "p90_tpot_ms")
HELDOUT_SEED = 1000          # added to the plan's seed: the held-out workloads never equal the replay's


class _Shape:
    __slots__ = ("num_new_tokens", "num_computed_before", "num_spec_tokens")

    def __init__(self, n: list[int], c: list[int]) -> None:
        self.num_new_tokens, self.num_computed_before, self.num_spec_tokens = n, c, [0] * len(n)


def scheduler_config(plan: SweepPlan, runner: Any) -> Any:
    """The replay's scheduler configuration (V1: chunked prefill and prefix caching on)."""
    from twin.core.scheduler_config import SchedulerConfig

    max_len = min(plan.max_seq_len, runner.shape.max_position_embeddings)
    return SchedulerConfig(max_num_seqs=plan.replay_max_num_seqs,
                           max_num_batched_tokens=max(plan.replay_max_batched_tokens, plan.replay_max_num_seqs),
                           max_model_len=max_len, block_size=runner.block_size,
                           enable_prefix_caching=True, enable_chunked_prefill=True)


def saturation_rate_per_s(cost: Any, plan: SweepPlan) -> float:
    """Requests per second the engine sustains at ``max_num_seqs``, estimated from the profile."""
    b = plan.replay_max_num_seqs
    mean_prompt = (plan.replay_prompt[0] + plan.replay_prompt[1]) / 2 + plan.replay_shared_prefix / 2
    mean_out = (plan.replay_output[0] + plan.replay_output[1]) / 2
    context = int(mean_prompt + mean_out / 2)
    decode_s = cost.step_time_s(_Shape([1] * b, [context] * b))
    prefill_s = cost.step_time_s(_Shape([max(1, int(mean_prompt))], [0]))
    return 1.0 / max(1e-9, mean_out * decode_s / b + prefill_s)


def heldout_specs(plan: SweepPlan, config: Any, index: int, rate_per_s: float, num_requests: int) -> list[Any]:
    """The held-out workload of load number ``index`` (seeded apart from the replay's)."""
    return replay_specs(dataclasses.replace(plan, replay_requests=num_requests), mean_interarrival_s=1.0 / rate_per_s,
                        seed=plan.seed + HELDOUT_SEED + index, max_model_len=config.max_model_len)


def predict(specs: list[Any], config: Any, num_blocks: int, cost: Any, max_time_s: float | None = None) -> Any:
    """The twin's run of ``specs`` on one replica with ``config``, ``num_blocks`` KV blocks and ``cost``."""
    from twin.core.schedulers import make_scheduler
    from twin.sim.simulate import simulate

    return simulate(specs, lambda _r: make_scheduler(config, num_blocks), lambda _r: cost, max_time_s=max_time_s)


def predicted_step_times_s(cost: Any, shapes: Any) -> list[float]:
    """The cost model's time of each step shape (``(num_new_tokens, num_computed_before)`` pairs)."""
    return [cost.step_time_s(_Shape(n, c)) for n, c in shapes]


def validate_loads(runner: Any, plan: SweepPlan, profile_path: str | Path, *, budget_s: float,
                   loads: tuple[float, ...] = LOADS, min_requests: int = 12, max_requests: int = 200,
                   keep_steps: bool = False, log=lambda *_: None) -> dict[str, Any]:
    """Serve a held-out workload at each load on ``runner`` and in the twin; ``budget_s`` seconds in all (each
    load gets an equal share and is cut, flagged ``stopped_early``, at its end). ``keep_steps`` adds each
    load's engine steps (shape, measured wall and device time, path, predicted time) as ``steps``."""
    from calibration.serve_steps import serve
    from twin.cost.profile import ProfileCostModel

    cost = ProfileCostModel(profile_path, check_range=False)
    config = scheduler_config(plan, runner)
    num_blocks = runner.kv_cache.num_blocks
    sat = saturation_rate_per_s(cost, plan)
    share = budget_s / max(1, len(loads))
    rows = []
    for i, load in enumerate(loads):
        t0 = time.perf_counter()
        rate = load * sat
        n = int(min(max_requests, max(min_requests, rate * share * 0.5)))
        specs = heldout_specs(plan, config, i, rate, n)
        res = serve(runner, specs, config, deadline_s=t0 + share)
        measured = res.to_sim_result()
        predicted = predict(specs, config, num_blocks, cost, res.end_s if res.stopped_early else None)
        mm, pm = measured.metrics(), predicted.metrics()
        cmp = compare_metrics(mm, pm, HEADLINE_METRICS)
        predicted_s = predicted_step_times_s(cost, ((s.num_new_tokens, s.num_computed_before) for s in res.samples))
        steps = step_time_residuals([s.median_s for s in res.samples], predicted_s)
        row = {"load": load, "offered_rate_per_s": rate, "requests_asked": n, "num_requests": len(specs),
               "completed": (mm.get("completed"), pm.get("completed")), "stopped_early": res.stopped_early,
               "engine_time_s": res.end_s, "wall_s": time.perf_counter() - t0,
               "preemptions": (res.num_preemptions, predicted.num_preemptions),
               "errors": {m: cmp.error(m) for m in HEADLINE_METRICS},
               "measured": {m: mm.get(m) for m in HEADLINE_METRICS},
               "predicted": {m: pm.get(m) for m in HEADLINE_METRICS},
               "step_time": steps}
        if keep_steps:
            row["steps"] = [{"n": s.num_new_tokens, "c": s.num_computed_before, "wall_s": s.times_s[0],
                             "device_s": s.device_times_s[0] if s.device_times_s else None,
                             "predicted_s": p, **s.meta} for s, p in zip(res.samples, predicted_s)]
        rows.append(row)
        log(f"held-out load {load:.0%} ({rate:.2f} req/s, {len(specs)} requests"
            f"{', cut by its time share' if res.stopped_early else ''}): " + ", ".join(
                f"{m} {pct(row['errors'][m])}" for m in ("request_throughput", "mean_ttft_ms", "mean_tpot_ms"))
            + f"; step MAPE {pct(steps.get('mape'), signed=False)}")
    return {"saturation_rate_per_s": sat, "scheduler_config": config.model_dump(), "num_kv_blocks": num_blocks,
            "loads": rows, "metrics": list(HEADLINE_METRICS)}
