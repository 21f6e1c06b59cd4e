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

from twin.results.records import ABORTED, FINISHED, INCOMPLETE, REJECTED, RequestRecord, StepRecords
from twin.results.sim_result import SimResult
from twin.core.request import Request
from twin.core.scheduler_base import SchedulerBase
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
    closed = not isinstance(traffic, Sequence)
    pending: list[tuple[float, int, RequestSpec, int]] = []  # (arrival, tie, spec, user or -1)
    tie = 0
    if closed:
        for user in range(traffic.concurrency):
            spec = traffic.next_request(user, 0.0)
            if spec is not None:
                pending.append((spec.arrival_s, tie, spec, user))
                tie += 1
        heapq.heapify(pending)
    else:
        pending = [(s.arrival_s, i, s, -1) for i, s in enumerate(traffic)]
        heapq.heapify(pending)
        tie = len(pending)
    total = None if closed else len(pending)
    records: list[RequestRecord] = []
    steps = StepRecords()
    user_of: dict[int, int] = {}
    deadlines: list[tuple[float, int, Request]] = []   # (abort time, tie, request)
    done = 0
    wall_start = clock()

    def now() -> float:
        return clock() - wall_start

    def finished(req: Request, t: float) -> None:
        nonlocal done, tie
        done += 1
        if progress is not None and total:
            progress(done / total)
        user = user_of.pop(id(req), -1)
        if user >= 0:
            spec = traffic.next_request(user, t)
            if spec is not None:
                heapq.heappush(pending, (spec.arrival_s, tie, spec, user))
                tie += 1

    while True:
        t = now()
        if max_time_s is not None and t >= max_time_s:
            break
        while pending and pending[0][0] <= t:
            _, _, spec, user = heapq.heappop(pending)
            req = spec.make_request()
            record = RequestRecord(req.request_id, req.task_class, spec.arrival_s,
                                   num_prompt_tokens=req.num_prompt_tokens)
            req.client_data = record
            records.append(record)
            if user >= 0:
                user_of[id(req)] = user
            if spec.timeout_s is not None:
                heapq.heappush(deadlines, (spec.arrival_s + spec.timeout_s, tie, req))
                tie += 1
            if not scheduler.add_request(req):
                record.status = REJECTED
                record.reject_reason = req.reject_reason
                record.finish_s = t
                finished(req, t)
        while deadlines and deadlines[0][0] <= t:
            req = heapq.heappop(deadlines)[2]
            if not req.is_finished:
                scheduler.finish_requests([req])
                _close_record(req, t, ABORTED)
                if req.num_cached_tokens < 0:
                    req.client_data.num_cached_tokens = -1   # never admitted: no prefix-cache query
                finished(req, t)
        if scheduler.has_unfinished_requests():
            out = scheduler.schedule(t)
            if out.requests:
                start = now()
                outputs = runner.execute(out, kv_cache_manager=scheduler.kv_cache_manager)
                result = scheduler.update_from_output(out, sampled_token_ids=outputs.sampled_token_ids)
                end = now()
                for i, k in enumerate(result.num_emitted):
                    if k:
                        out.requests[i].client_data.add_emission(end, k)
                for req in result.finished:
                    _close_record(req, end, FINISHED)
                    finished(req, end)
                if step_shapes is not None:
                    step_shapes.append(StepShapeRecord(tuple(out.num_new_tokens), tuple(out.num_computed_before),
                                                       tuple(out.num_spec_tokens), end - start))
                steps.append_step(start, end - start, out)
                continue
        if not pending:
            if not scheduler.has_unfinished_requests():
                break
            continue
        wake = min(pending[0][0], deadlines[0][0]) if deadlines else pending[0][0]
        wait = wake - now()
        if wait > 0:
            sleep(wait)

    end = now()
    for req in list(scheduler.running) + list(scheduler.waiting):
        _close_record(req, None, INCOMPLETE)
    kv = scheduler.kv_cache_manager
    records.sort(key=lambda r: (r.arrival_s, str(r.request_id)))
    return SimResult(requests=records, steps=steps, config=config_summary or {}, sim_start_s=0.0, sim_end_s=end,
                     prefix_cache_hit_tokens=kv.num_hit_tokens, prefix_cache_query_tokens=kv.num_query_tokens,
                     num_preemptions=scheduler.num_preemptions, num_replicas=1, wall_time_s=end)


class StepShapeRecord(NamedTuple):
    """A measured step's shape (what a cost model reads) and its measured duration."""

    num_new_tokens: tuple[int, ...]
    num_computed_before: tuple[int, ...]
    num_spec_tokens: tuple[int, ...]
    measured_s: float


def _close_record(req: Request, t: float | None, status: str) -> None:
    record: RequestRecord = req.client_data
    record.status = status
    record.finish_s = t
    record.num_output_tokens = req.num_output_tokens
    record.num_cached_tokens = max(req.num_cached_tokens, 0)
    record.num_preemptions = req.num_preemptions
