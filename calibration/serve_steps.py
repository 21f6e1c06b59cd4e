"""Serve requests on the real engine, step by step, with the serving core's own scheduler and block pool.

The same loop as the twin's replica (``twin.sim.replica.Replica``), with the cost model replaced by a measurement::

    out = scheduler.schedule(now)
    step = runner.execute(out, kv_cache_manager=scheduler.kv_cache_manager)     # real forward pass, timed
    now += step.elapsed_s
    scheduler.update_from_output(out, sampled_token_ids=step.sampled_token_ids)

Because the scheduler, the KV cache manager and the block pool are the very objects the twin drives, the
batches (which requests, how many tokens, which blocks, preemptions, prefix hits) are the twin's for the same
requests; only time differs. Stopping at a request's target output length is the scheduler's business
(``update_from_output``). The clock is the engine's own: the sum of measured step times, jumping over idle
gaps to the next arrival, so arrivals are honoured on the real engine's timeline.

Each step yields a per-step row in the twin's ``StepRecords`` schema, a ``RequestRecord`` per request (the
inputs of ``vllm bench serve`` metrics), and a :class:`~calibration.samples.StepSample` with the step's full
shape (every sequence's ``n`` and ``c``) for fitting.

Not reproduced: speculative decoding (no drafter runs here) and the compute of a static batch's padding rows
(finished requests a static batch carries are skipped; their ``StepRecords`` row still counts them).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from calibration.samples import StepSample
from twin.sim.replica import new_record
from twin.results.records import FINISHED, INCOMPLETE, REJECTED, RequestRecord, StepRecords
from twin.results.sim_result import SimResult
from twin.core.request import Request
from twin.core.scheduler_base import SchedulerBase
from twin.core.scheduler_config import SchedulerConfig
from twin.core.scheduler_output import SchedulerOutput
from twin.core.schedulers import make_scheduler


@dataclass
class ServeResult:
    steps: StepRecords
    requests: list[RequestRecord]
    samples: list[StepSample]
    batches: list[list[tuple[Any, int, int]]]          # per step: (request_id, n, c) in batch order
    end_s: float = 0.0
    wall_s: float = 0.0
    stopped_early: bool = False
    num_preemptions: int = 0
    prefix_cache_hit_tokens: int = 0
    prefix_cache_query_tokens: int = 0
    config: dict = field(default_factory=dict)

    def to_sim_result(self) -> SimResult:
        """The run as a ``twin.results.records.SimResult`` (metrics in ``vllm bench serve`` definitions)."""
        return SimResult(requests=sorted(self.requests, key=lambda r: (r.arrival_s, str(r.request_id))),
                         steps=self.steps, config=self.config, sim_start_s=0.0, sim_end_s=self.end_s,
                         prefix_cache_hit_tokens=self.prefix_cache_hit_tokens,
                         prefix_cache_query_tokens=self.prefix_cache_query_tokens,
                         num_preemptions=self.num_preemptions, num_replicas=1, wall_time_s=self.wall_s)


def _as_request(item: Any) -> Request:
    return item if isinstance(item, Request) else item.make_request()


def serve(runner: Any, requests: Sequence[Any], config: SchedulerConfig | None = None, *,
          scheduler: SchedulerBase | None = None, honor_arrivals: bool = True, repeats: int = 1,
          max_steps: int | None = None, deadline_s: float | None = None,
          on_step: Callable[[int, ServeResult], None] | None = None, kind: str = "replay") -> ServeResult:
    """Serve ``requests`` (``twin.workload.spec.RequestSpec`` or fresh ``twin.core.request.Request`` objects) on
    ``runner`` (a ``calibration.engine.ModelRunner``).

    The scheduler is ``scheduler`` or ``make_scheduler(config, runner's KV blocks)``: its block ids index the
    runner's paged cache, so the pool sizes must agree. ``honor_arrivals=False`` queues every request at
    time 0. ``repeats > 1`` runs each step that many times (the K/V writes are idempotent, sampling greedy or
    reseeded) and keeps the median time, for a less noisy sample; the serving timeline uses that median.
    ``max_steps`` / ``deadline_s`` (a ``time.perf_counter()`` value) stop early, leaving requests incomplete.
    """
    if scheduler is None:
        if config is None:
            raise ValueError("give a SchedulerConfig or a scheduler")
        scheduler = make_scheduler(config, runner.kv_cache.num_blocks)
    if scheduler.block_size != runner.block_size:
        raise ValueError(f"block_size: the scheduler uses {scheduler.block_size}, the runner's cache "
                         f"{runner.block_size}")
    if scheduler.kv_cache_manager.block_pool.num_gpu_blocks > runner.kv_cache.num_blocks:
        raise ValueError(f"the scheduler's pool has {scheduler.kv_cache_manager.block_pool.num_gpu_blocks} "
                         f"blocks, the runner's cache only {runner.kv_cache.num_blocks}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    wall0 = time.perf_counter()
    reqs = sorted((_as_request(r) for r in requests), key=lambda r: r.arrival_time_s)
    records: list[RequestRecord] = []
    res = ServeResult(StepRecords(), records, [], [], config=dict(config.model_dump() if config else {}))
    kv = scheduler.kv_cache_manager
    now = 0.0
    pending = 0
    outstanding = 0

    def admit_until(t: float) -> None:
        nonlocal pending, outstanding
        while pending < len(reqs) and (not honor_arrivals or reqs[pending].arrival_time_s <= t):
            req = reqs[pending]
            pending += 1
            record = new_record(req)
            records.append(record)
            if scheduler.add_request(req):
                outstanding += 1
            else:
                record.status = REJECTED
                record.reject_reason = req.reject_reason
                record.finish_s = max(t, req.arrival_time_s if honor_arrivals else 0.0)

    while True:
        admit_until(now)
        if not scheduler.has_unfinished_requests():
            if pending >= len(reqs):
                break
            now = max(now, reqs[pending].arrival_time_s)   # idle: jump to the next arrival
            continue
        if (max_steps is not None and len(res.samples) >= max_steps) or \
                (deadline_s is not None and time.perf_counter() >= deadline_s):
            res.stopped_early = True
            break
        out = scheduler.schedule(now)
        n_real = len(out.requests) - out.num_padding
        if n_real <= 0:
            wake = getattr(scheduler, "next_wakeup_s", None)
            if wake is not None and wake > now:
                now = wake
                continue
            if pending < len(reqs):
                now = max(now, reqs[pending].arrival_time_s)
                continue
            raise RuntimeError(f"the scheduler produced an empty step with {len(scheduler.running)} running "
                               f"and {len(scheduler.waiting)} waiting requests")
        real = _RealPart(out, n_real)
        times, dev_times = [], []
        for _ in range(repeats):
            step = runner.execute(real, kv_cache_manager=kv)
            times.append(step.elapsed_s)
            if step.device_s is not None:
                dev_times.append(step.device_s)
        dt = statistics.median(times)
        start = now
        now += dt
        sampled = list(step.sampled_token_ids) + [[] for _ in range(out.num_padding)]
        result = scheduler.update_from_output(out, sampled_token_ids=sampled)
        for i in range(n_real):
            k = result.num_emitted[i]
            if k:
                out.requests[i].client_data.add_emission(now, k)
        for req in result.finished:
            record = req.client_data
            record.finish_s = now
            record.status = FINISHED
            _copy_counters(req, record)
            outstanding -= 1
        res.steps.append_step(start, dt, out)
        res.samples.append(StepSample(kind, list(real.num_new_tokens), list(real.num_computed_before), times,
                                      dev_times or None, {"step_index": out.step_index, "graph": step.graph,
                                                          "attention_calls": step.num_attention_calls}))
        res.batches.append([(out.requests[i].request_id, out.num_new_tokens[i], out.num_computed_before[i])
                            for i in range(len(out.requests))])
        if on_step is not None:
            on_step(len(res.samples), res)

    for req in list(scheduler.running) + list(scheduler.waiting):
        record = req.client_data
        if record.status == FINISHED and record.finish_s is None:
            record.status = INCOMPLETE
            _copy_counters(req, record)
    res.end_s = now
    res.wall_s = time.perf_counter() - wall0
    res.num_preemptions = scheduler.num_preemptions
    res.prefix_cache_hit_tokens = kv.num_hit_tokens
    res.prefix_cache_query_tokens = kv.num_query_tokens
    return res


class _RealPart:
    """The scheduled requests of a step without a static batch's trailing padding rows (the engine runs
    only real sequences)."""

    __slots__ = ("requests", "num_new_tokens", "num_computed_before", "num_spec_tokens")

    def __init__(self, out: SchedulerOutput, n_real: int) -> None:
        if n_real == len(out.requests):
            self.requests, self.num_new_tokens = out.requests, out.num_new_tokens
            self.num_computed_before, self.num_spec_tokens = out.num_computed_before, out.num_spec_tokens
        else:
            self.requests = out.requests[:n_real]
            self.num_new_tokens = out.num_new_tokens[:n_real]
            self.num_computed_before = out.num_computed_before[:n_real]
            self.num_spec_tokens = out.num_spec_tokens[:n_real]


def _copy_counters(req: Request, record: RequestRecord) -> None:
    record.num_output_tokens = req.num_output_tokens
    record.num_cached_tokens = max(req.num_cached_tokens, 0)
    record.num_preemptions = req.num_preemptions
