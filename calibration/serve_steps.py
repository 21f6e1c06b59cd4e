"""Serve requests on the real engine, step by step, with the serving core's own scheduler and block pool.

The same step as the twin's replica (``twin.sim.replica.Replica``), with the cost model replaced by a
measurement, in the one loop of ``calibration.engine_loop`` on the engine's clock::

    out = core.schedule(now)
    step = runner.execute(out, kv_cache_manager=scheduler.kv_cache_manager)     # real forward pass, timed
    now += step.elapsed_s
    core.update(out, sampled_token_ids=step.sampled_token_ids)

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
from calibration.engine_loop import EngineClock, serve_loop
from twin.core.engine_core import EngineCore
from twin.sim.replica import new_record
from twin.results.records import REJECTED, RequestRecord, StepRecords
from twin.results.request_log import close_record
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
    res = ServeResult(StepRecords(), [], [], [], config=dict(config.model_dump() if config else {}))
    kv = scheduler.kv_cache_manager
    measured: dict[str, Any] = {}

    def execute(out: SchedulerOutput):
        real = _RealPart(out, len(out.requests) - out.num_padding)
        times, dev_times = [], []
        for _ in range(repeats):
            step = runner.execute(real, kv_cache_manager=kv)
            times.append(step.elapsed_s)
            if step.device_s is not None:
                dev_times.append(step.device_s)
        measured.update(real=real, times=times, dev_times=dev_times, step=step)
        return list(step.sampled_token_ids) + [[] for _ in range(out.num_padding)], statistics.median(times)

    def record_sample(out: SchedulerOutput, start: float, dt: float) -> None:
        real, step = measured["real"], measured["step"]
        res.samples.append(StepSample(kind, list(real.num_new_tokens), list(real.num_computed_before),
                                      measured["times"], measured["dev_times"] or None,
                                      {"step_index": out.step_index, "graph": step.graph,
                                       "attention_calls": step.num_attention_calls}))
        res.batches.append([(out.requests[i].request_id, out.num_new_tokens[i], out.num_computed_before[i])
                            for i in range(len(out.requests))])
        if on_step is not None:
            on_step(len(res.samples), res)

    feed = _ListFeed(reqs, res, honor_arrivals, max_steps, deadline_s)
    res.end_s = serve_loop(EngineCore(scheduler), feed, EngineClock(), execute, res.steps, record_sample)
    res.wall_s = time.perf_counter() - wall0
    res.num_preemptions = scheduler.num_preemptions
    res.prefix_cache_hit_tokens = kv.num_hit_tokens
    res.prefix_cache_query_tokens = kv.num_query_tokens
    return res


class _ListFeed:
    """Requests sorted by arrival (all at time 0 without ``honor_arrivals``); stops early after ``max_steps``
    steps or at the ``time.perf_counter()`` value ``deadline_s`` (asked only while there is work)."""

    def __init__(self, reqs: list[Request], res: ServeResult, honor_arrivals: bool, max_steps: int | None,
                 deadline_s: float | None) -> None:
        self.reqs, self.res, self.honor_arrivals = reqs, res, honor_arrivals
        self.max_steps, self.deadline_s = max_steps, deadline_s
        self.pending = 0

    def admit(self, core: EngineCore, t: float) -> None:
        reqs = self.reqs
        while self.pending < len(reqs) and (not self.honor_arrivals or reqs[self.pending].arrival_time_s <= t):
            req = reqs[self.pending]
            self.pending += 1
            self.res.requests.append(new_record(req))
            if not core.add(req):
                close_record(req, max(t, req.arrival_time_s if self.honor_arrivals else 0.0), REJECTED)

    def stop(self, t: float, has_work: bool) -> bool:
        if has_work and ((self.max_steps is not None and len(self.res.samples) >= self.max_steps)
                         or (self.deadline_s is not None and time.perf_counter() >= self.deadline_s)):
            self.res.stopped_early = True
        return self.res.stopped_early

    def next_s(self) -> float | None:
        return self.reqs[self.pending].arrival_time_s if self.pending < len(self.reqs) else None

    def finished(self, req: Request, t: float) -> None:
        pass


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
