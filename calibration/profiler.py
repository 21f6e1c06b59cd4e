"""Profile the engine within a time budget: the sweeps, the replay, more runs with what is left, and a
canary step that watches the machine's speed.

Sweeps (each point is one step shape, run ``warmup`` times untimed and ``repeats`` times timed; every timed
run is kept and the median is what the fit uses):

* ``prefill``: one chunk of ``n`` tokens after ``c`` tokens already in the cache (``c = 0``: a whole prompt);
* ``decode``: ``B`` sequences of one new token, each after ``c`` cached tokens;
* ``mixed``: a decode batch with one prefill chunk riding along (what chunked prefill schedules);
* ``random``: seeded heterogeneous batches (decodes at different contexts plus chunks), as serving makes them;
* ``replay``: the steps a small workload produces when served through the serving core's scheduler on the real
  engine (:mod:`calibration.replay`).

The plan and its ordering are :mod:`calibration.sweep_plan`'s, the timing of points
:mod:`calibration.measure`'s. The whole run respects a time budget: the replay gets a share of the budget and
whatever the sweeps leave. The first ``min_points`` points are measured whatever the budget (a fit needs a few
samples per feature). Budget left once the plan and the replay are done goes to further passes over the sweep
points, adding timed runs spread over the whole run (robust medians on a busy machine).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from calibration.engine import ModelRunner
from calibration.environment import environment
from calibration.measure import measure_point, measure_points, point_inputs, warm_up
from calibration.replay import run_replay
from calibration.samples import StepSample
from calibration.sweep_plan import Point, SweepPlan, plan_points

Progress = Callable[[float, str], None]


@dataclass
class ProfileRun:
    samples: list[StepSample]
    environment: dict[str, Any]
    plan: dict[str, Any]
    replay: dict[str, Any] | None = None
    wall_s: float = 0.0
    points_planned: int = 0
    points_measured: int = 0
    notes: list[str] = field(default_factory=list)
    canary: list[list[float]] = field(default_factory=list)   # [seconds into the run, canary step median]
    drift_pct: float | None = None
    extra_passes: int = 0                                     # passes of more runs after the plan was done


# a small fixed step timed throughout the run to watch the machine's speed
CANARY = Point("decode", [1] * 4, [128] * 4)


def speed_drift_pct(canary: Sequence[Sequence[float]]) -> float | None:
    """Spread of the canary step's time over the run: (p90 - p10) / median, in percent."""
    if len(canary) < 3:
        return None
    t = np.array([c[1] for c in canary])
    return float((np.percentile(t, 90) - np.percentile(t, 10)) / np.median(t) * 100.0)


def profile_engine(runner: ModelRunner, plan: SweepPlan, budget_s: float, *, replay: bool = True,
                   progress: Progress | None = None) -> ProfileRun:
    """Run the sweeps and the replay on ``runner`` within ``budget_s`` seconds (warm-up included)."""
    t0 = time.perf_counter()
    end = t0 + budget_s
    sweep_end = t0 + budget_s * (1.0 - (plan.replay_share if replay else 0.0))
    prog = progress or (lambda f, label: None)
    points = plan_points(plan)
    warm_up(runner)
    samples: list[StepSample] = []
    notes: list[str] = []
    group = max(1, plan.interleave)
    canary_inputs = point_inputs(runner, CANARY, -1)
    canary: list[list[float]] = []

    def check_speed(force: bool = False) -> None:
        """Time the canary step (at most about once a second): the machine's speed over the run (a busy shared
        machine drifts)."""
        now = time.perf_counter() - t0
        if not force and canary and now - canary[-1][0] < 1.0:
            return
        times = [runner.execute_batch(canary_inputs).elapsed_s for _ in range(3)]
        canary.append([round(now, 3), round(statistics.median(times), 7)])

    by_point: dict[int, StepSample] = {}
    for i in range(0, len(points), group):
        enough = len(by_point) >= plan.min_points
        if enough and time.perf_counter() >= sweep_end:
            break
        check_speed()
        prog(min(1.0, (time.perf_counter() - t0) / budget_s), f"sweep points {i + 1}-{min(i + group, len(points))}"
             f" of {len(points)}")
        try:
            got = measure_points(runner, points[i:i + group], warmup=plan.warmup, repeats=plan.repeats,
                                 first_index=i, deadline=sweep_end if enough else None)
        except torch.OutOfMemoryError:
            got = _one_by_one(runner, points[i:i + group], plan, i, sweep_end if enough else None, notes)
        by_point.update((i + j, s) for j, s in enumerate(got) if s is not None)
    samples.extend(by_point[k] for k in sorted(by_point))
    check_speed(force=True)
    run = ProfileRun(samples, environment(runner), plan.to_dict(), points_planned=len(points),
                     points_measured=len(samples), canary=canary)
    run.notes.extend(notes)
    if len(samples) < len(points):
        run.notes.append(f"measured {len(samples)} of {len(points)} sweep points (time budget or memory)")
    if replay and time.perf_counter() < end:
        decode = [s.median_s for s in samples
                  if s.kind == "decode" and len(s.num_new_tokens) <= plan.replay_max_num_seqs]
        est = statistics.median(decode) if decode else 0.0
        res = run_replay(runner, plan, deadline=end, mean_decode_step_s=est,
                         progress=lambda k: prog(min(1.0, (time.perf_counter() - t0) / budget_s),
                                                 f"replay step {k}"))
        samples.extend(res.samples)
        run.replay = {
            "num_steps": len(res.samples), "stopped_early": res.stopped_early, "engine_time_s": res.end_s,
            "num_requests": len(res.requests),
            "num_finished": sum(1 for r in res.requests if r.status == "finished"),
            "num_preemptions": res.num_preemptions, "prefix_cache_hit_tokens": res.prefix_cache_hit_tokens,
            "prefix_cache_query_tokens": res.prefix_cache_query_tokens, "scheduler_config": res.config,
            "step_records": {name: res.steps.column(name).tolist() for name in _STEP_COLUMNS},
        }
        if res.stopped_early:
            run.notes.append(f"time budget: the replay stopped after {len(res.samples)} steps")
    if plan.fill_budget and len(by_point) == len(points) and time.perf_counter() < end - 0.5:
        # the sweep points and the replay's step shapes (a step's time depends on its shape, not on which
        # blocks hold its context), each getting more runs
        targets = [(points[k], by_point[k]) for k in sorted(by_point)]
        replayed = [(Point("replay", list(x.num_new_tokens), list(x.num_computed_before)), x)
                    for x in samples if x.kind == "replay"]
        # shared prefix blocks counted once in serving may not fit the pool as private copies: leave those
        targets += [(p, x) for p, x in replayed if p.blocks(runner.block_size) < runner.kv_cache.num_blocks]
        passes = _more_runs(runner, targets, plan, end, check_speed,
                            lambda label: prog(min(1.0, (time.perf_counter() - t0) / budget_s), label))
        run.extra_passes = passes
    check_speed(force=True)
    run.environment["load_average_end"] = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") \
        else None
    run.drift_pct = speed_drift_pct(canary)
    if run.drift_pct is not None and run.drift_pct > 15:
        run.notes.append(f"the machine's speed drifted by {run.drift_pct:.0f}% during the run (canary step "
                         f"{CANARY.kind} x{len(CANARY.n)} at context {CANARY.c[0]}): a busy machine; expect a "
                         f"poorer fit")
    run.wall_s = time.perf_counter() - t0
    prog(1.0, "done")
    return run


def _more_runs(runner: ModelRunner, targets: Sequence[tuple[Point, StepSample]], plan: SweepPlan, end: float,
               check_speed: Callable[[], None], prog: Callable[[str], None]) -> int:
    """Spend what is left of the budget on more timed runs of measured steps, pass after pass (each pass
    interleaved as the first): medians over runs spread across the whole run resist a busy machine's bursts
    and drift. Returns the number of passes begun."""
    group = max(1, plan.interleave)
    repeats = max(1, plan.repeats // 2)
    passes = 0
    while time.perf_counter() < end:
        passes += 1
        for i in range(0, len(targets), group):
            if time.perf_counter() >= end:
                break
            check_speed()
            prog(f"extra pass {passes}: steps {i + 1}-{min(i + group, len(targets))} of {len(targets)}")
            chunk = targets[i:i + group]
            try:
                got = measure_points(runner, [p for p, _ in chunk], warmup=1, repeats=repeats, first_index=i,
                                     deadline=end)
            except torch.OutOfMemoryError:
                _free_cached_memory(runner)
                continue
            for (_, sample), new in zip(chunk, got):
                if new is None:
                    continue
                sample.times_s.extend(new.times_s)
                if new.device_times_s and sample.device_times_s is not None:
                    sample.device_times_s.extend(new.device_times_s)
    return passes


def _one_by_one(runner: ModelRunner, points: Sequence[Point], plan: SweepPlan, first: int,
                deadline: float | None, notes: list[str]) -> list[StepSample | None]:
    """A group ran out of device memory: measure its points one at a time, leaving out those that still do."""
    out: list[StepSample | None] = []
    for j, p in enumerate(points):
        _free_cached_memory(runner)
        try:
            out.append(measure_point(runner, p, warmup=plan.warmup, repeats=plan.repeats, index=first + j,
                                     deadline=deadline))
        except torch.OutOfMemoryError:
            notes.append(f"out of device memory: left out {p.kind} x{len(p.n)} ({sum(p.n)} tokens, longest "
                         f"{p.max_len})")
            out.append(None)
    _free_cached_memory(runner)
    return out


def _free_cached_memory(runner: ModelRunner) -> None:
    if runner.device.type == "cuda":
        torch.cuda.empty_cache()


def _step_columns() -> tuple[str, ...]:
    from twin.results.records import STEP_COLUMN_NAMES

    return STEP_COLUMN_NAMES


_STEP_COLUMNS = _step_columns()
