"""Serve traffic for real: wall-clock arrivals into the serving core, each scheduled step executed by the torch
engine and timed, per-request and per-step records in the schema the twin writes.

This is the ground truth the twin is validated against: same scheduler, same block pool, same workload; the
only thing that differs is that time is measured instead of predicted.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from calibration.engine_loop import WallClock, serve_loop
from twin.core.engine_core import EngineCore
from twin.core.request import Request
from twin.core.scheduler_base import SchedulerBase
from twin.results.records import ABORTED, REJECTED, RequestRecord, StepRecords
from twin.results.request_log import close_record
from twin.results.sim_result import SimResult
from twin.workload.spec import RequestSpec


def serve(
    traffic: Sequence[RequestSpec] | Any,
    scheduler: SchedulerBase,
    runner: Any,
    *,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
    max_time_s: float | None = None,
    progress: Callable[[float], None] | None = None,
    config_summary: dict | None = None,
    step_shapes: list | None = None,
) -> SimResult:
    """Replay ``traffic`` (open-loop specs sorted by arrival, or a closed-loop workload with ``concurrency``
    and ``next_request(user, now_s)``) through ``scheduler`` with ``runner`` (a
    ``calibration.engine.ModelRunner``) in real time. Arrival times are seconds after the call starts.
    ``step_shapes``, when given, collects each step's shape for step-time residuals. A spec's ``timeout_s`` is
    the client's: an unfinished request is aborted (``finish_requests``) at the first step boundary after it."""
    feed = _TrafficFeed(traffic, max_time_s, progress)
    steps = StepRecords()
    kv = scheduler.kv_cache_manager

    def execute(out):
        return runner.execute(out, kv_cache_manager=kv).sampled_token_ids, None

    def on_step(out, start: float, dt: float) -> None:
        step_shapes.append(StepShapeRecord(tuple(out.num_new_tokens), tuple(out.num_computed_before),
                                           tuple(out.num_spec_tokens), dt))

    end = serve_loop(EngineCore(scheduler), feed, WallClock(clock, sleep), execute, steps,
                     on_step if step_shapes is not None else None)
    records = feed.records
    records.sort(key=lambda r: (r.arrival_s, str(r.request_id)))
    return SimResult(requests=records, steps=steps, config=config_summary or {}, sim_start_s=0.0, sim_end_s=end,
                     prefix_cache_hit_tokens=kv.num_hit_tokens, prefix_cache_query_tokens=kv.num_query_tokens,
                     num_preemptions=scheduler.num_preemptions, num_replicas=1, wall_time_s=end)


class _TrafficFeed:
    """Requests from open-loop specs or a closed-loop workload (each user's next request when its last one
    finishes), with the clients' deadlines: a request past its ``timeout_s`` is aborted."""

    def __init__(self, traffic: Sequence[RequestSpec] | Any, max_time_s: float | None,
                 progress: Callable[[float], None] | None) -> None:
        self.traffic, self.max_time_s, self.progress = traffic, max_time_s, progress
        self.closed = not isinstance(traffic, Sequence)
        self.pending: list[tuple[float, int, RequestSpec, int]] = []  # (arrival, tie, spec, user or -1)
        self.tie = 0
        if self.closed:
            for user in range(traffic.concurrency):
                spec = traffic.next_request(user, 0.0)
                if spec is not None:
                    self.pending.append((spec.arrival_s, self.tie, spec, user))
                    self.tie += 1
        else:
            self.pending = [(s.arrival_s, i, s, -1) for i, s in enumerate(traffic)]
            self.tie = len(self.pending)
        heapq.heapify(self.pending)
        self.total = None if self.closed else len(self.pending)
        self.records: list[RequestRecord] = []
        self.user_of: dict[int, int] = {}
        self.deadlines: list[tuple[float, int, Request]] = []   # (abort time, tie, request)
        self.done = 0

    def stop(self, t: float, has_work: bool) -> bool:
        return self.max_time_s is not None and t >= self.max_time_s

    def admit(self, core: EngineCore, t: float) -> None:
        if self.stop(t, True):
            return
        pending, deadlines = self.pending, self.deadlines
        while pending and pending[0][0] <= t:
            _, _, spec, user = heapq.heappop(pending)
            req = spec.make_request()
            record = RequestRecord(req.request_id, req.task_class, spec.arrival_s,
                                   num_prompt_tokens=req.num_prompt_tokens)
            req.client_data = record
            self.records.append(record)
            if user >= 0:
                self.user_of[id(req)] = user
            if spec.timeout_s is not None:
                heapq.heappush(deadlines, (spec.arrival_s + spec.timeout_s, self.tie, req))
                self.tie += 1
            if not core.add(req):
                close_record(req, t, REJECTED)
                self.finished(req, t)
        while deadlines and deadlines[0][0] <= t:
            req = heapq.heappop(deadlines)[2]
            if not req.is_finished:
                core.abort(req)
                close_record(req, t, ABORTED)
                self.finished(req, t)

    def next_s(self) -> float | None:
        """The next arrival or client deadline; None when no arrival is left."""
        if not self.pending:
            return None
        return min(self.pending[0][0], self.deadlines[0][0]) if self.deadlines else self.pending[0][0]

    def finished(self, req: Request, t: float) -> None:
        self.done += 1
        if self.progress is not None and self.total:
            self.progress(self.done / self.total)
        user = self.user_of.pop(id(req), -1)
        if user >= 0:
            spec = self.traffic.next_request(user, t)
            if spec is not None:
                heapq.heappush(self.pending, (spec.arrival_s, self.tie, spec, user))
                self.tie += 1


class StepShapeRecord(NamedTuple):
    """A measured step's shape (what a cost model reads) and its measured duration."""

    num_new_tokens: tuple[int, ...]
    num_computed_before: tuple[int, ...]
    num_spec_tokens: tuple[int, ...]
    measured_s: float
