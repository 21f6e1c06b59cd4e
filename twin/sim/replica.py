"""The SimPy twin: arrivals, a router, and one process per replica that drives the serving core step by step.

SimPy is the clock, not the logic: each replica loops ``schedule() -> cost_model.step_time_s() -> timeout ->
update_from_output()`` on the very objects the real engine drives. Tokens emitted by a step are stamped at
the step's end; a request arriving mid-step is seen by the next ``schedule()``.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Protocol

import simpy

from twin.cost.base import CostModel
from twin.results.records import ABORTED, FINISHED, INCOMPLETE, REJECTED, RequestRecord, StepRecords
from twin.core.request import Request, RequestStatus
from twin.core.scheduler import Scheduler
from twin.core.scheduler_base import SchedulerBase
from twin.core.scheduler_output import SchedulerOutput
from twin.sim.decode_cohort import DecodeCohort
from twin.sim.cohort_steps import cohort_steps


class Speculator(Protocol):
    """Speculative decoding as the engine sees it (the spec-decode module implements it)."""

    def num_draft_tokens(self, request: Request) -> int:
        """Draft tokens to propose for a request that is about to decode (0: none)."""

    def num_generated(self, out: SchedulerOutput) -> list[int]:
        """Tokens each scheduled request produces in this step (1 + accepted drafts; 0 mid-prefill)."""

    def draft_time_s(self, out: SchedulerOutput) -> float:
        """Time the drafter spends proposing for this step's batch."""


class Replica:
    """One server: a scheduler and a cost model, advanced by a SimPy process."""

    def __init__(self, env: simpy.Environment, index: int, scheduler: SchedulerBase, cost_model: CostModel,
                 steps: StepRecords, speculator: Speculator | None = None,
                 on_finish: Callable[[Request], None] | None = None, fast_path: bool = True,
                 finish_wakes_anyone: Callable[[], bool] | None = None) -> None:
        self.env = env
        self.index = index
        self.scheduler = scheduler
        self.cost_model = cost_model
        self.request_path_s = float(getattr(cost_model, "request_path_s", 0.0))
        self.request_path_jitter_s = float(getattr(cost_model, "request_path_jitter_s", 0.0))
        self.steps = steps
        self.speculator = speculator
        self.on_finish = on_finish
        # whether a request finishing now could make something happen at that time (a closed-loop client sends
        # its next request, the run drains); unknown: assume it could
        self.finish_wakes_anyone = finish_wakes_anyone or (lambda: True)
        self.num_outstanding = 0
        self.num_submitted = 0          # requests handed to this replica so far (the DP front end's count)
        # async scheduling: requests that arrived while a step ran wait for the schedule after the next one
        self.async_scheduling = bool(getattr(scheduler.config, "async_scheduling", False))
        self.in_step = False              # a step is running (public: the fast path sets it too)
        self.deferred: list[Request] = []  # async scheduling: arrived during a step, admitted after it
        # runs of decode-only steps between events skip schedule()/update_from_output(); same results
        self.fast_path = fast_path and speculator is None and type(scheduler) is Scheduler
        self._wake: simpy.Event | None = None
        self.cohort: DecodeCohort | None = None     # the running decodes while the fast path has them
        self.process = env.process(self._run())

    def submit(self, request: Request) -> None:
        record = request.client_data
        record.replica = self.index
        self.num_submitted += 1
        if self.async_scheduling and self.in_step:
            self.deferred.append(request)
            self.num_outstanding += 1
            return
        self._admit(request)

    def _admit(self, request: Request, counted: bool = False) -> None:
        record = request.client_data
        if not self.scheduler.add_request(request):
            if counted:
                self.num_outstanding -= 1
            record.status = REJECTED
            record.reject_reason = request.reject_reason
            record.finish_s = self.env.now
            if self.on_finish is not None:
                self.on_finish(request)
            return
        if not counted:
            self.num_outstanding += 1
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def abort(self, request: Request) -> None:
        """The client gave up on a request submitted here and not yet finished: the server drops it and frees
        its KV blocks (vLLM's abort); the record is counted as failed."""
        if request in self.deferred:
            self.deferred.remove(request)
        else:
            if self.cohort is not None:
                self.cohort.release(request, self.in_step)
            self.scheduler.finish_requests([request], RequestStatus.FINISHED_ABORTED)
        record: RequestRecord = request.client_data
        record.finish_s = self.env.now
        record.status = ABORTED
        self._copy_counters(request, record)
        if request.num_cached_tokens < 0:
            record.num_cached_tokens = -1   # never admitted: no prefix-cache query to count
        self.num_outstanding -= 1
        if self.on_finish is not None:
            self.on_finish(request)

    def admit_deferred(self) -> None:
        deferred, self.deferred = self.deferred, []
        for request in deferred:
            self._admit(request, counted=True)

    @property
    def kv_usage(self) -> float:
        return self.scheduler.kv_cache_manager.usage

    def sleep_until_work(self):
        self._wake = self.env.event()
        wakeup = getattr(self.scheduler, "next_wakeup_s", None)
        if wakeup is not None and wakeup > self.env.now:
            return self._wake | self.env.timeout(wakeup - self.env.now)
        return self._wake

    def _run(self):
        env = self.env
        sched = self.scheduler
        cost = self.cost_model
        append_step = self.steps.append_step
        spec = self.speculator
        replica = self.index
        while True:
            if not sched.has_unfinished_requests():
                if self.deferred:          # the engine went idle: nothing to overlap with
                    self.admit_deferred()
                    continue
                yield self.sleep_until_work()
                continue
            now = env.now
            out = sched.schedule(now)
            if self.deferred:
                self.admit_deferred()     # seen by the next schedule, as under async scheduling
                if not out.requests:
                    continue
            if not out.requests:
                if sched.running:
                    raise RuntimeError(f"replica {replica}: scheduler produced an empty step with "
                                       f"{len(sched.running)} running requests")
                yield self.sleep_until_work()
                continue
            draft_s = spec.draft_time_s(out) if spec is not None else 0.0
            dt = cost.step_time_s(out) + draft_s
            self.in_step = True
            yield env.timeout(dt)
            self.in_step = False
            end = env.now
            num_generated = spec.num_generated(out) if spec is not None else None
            result = sched.update_from_output(out, num_generated)
            if spec is not None:
                self._record_spec(out, result.num_accepted_spec)

            for i, k in enumerate(result.num_emitted):
                if k:
                    out.requests[i].client_data.add_emission(end, k)
            for req in result.finished:
                self._finish(req, end)
            if spec is not None:
                release = getattr(spec, "release", None)
                if release is not None:
                    for req in result.finished:
                        release(req)
                for req in sched.running:
                    if req.num_computed_tokens == req.num_prompt_tokens + req.num_output_tokens - 1:
                        req.num_spec_tokens = spec.num_draft_tokens(req)
            append_step(now, dt, out, replica, draft_s)
            if self.fast_path and self._cohort_can_run():
                yield from cohort_steps(self)

    def _cohort_can_run(self) -> bool:
        sched = self.scheduler
        cfg = sched.config
        if cfg.num_lookahead_tokens or cfg.num_speculative_tokens or not sched.running:
            return False
        cohort = DecodeCohort(sched.kv_cache_manager, sched.max_model_len)
        return all(cohort.can_join(req) for req in sched.running)
    @staticmethod
    def _record_spec(out: SchedulerOutput, accepted: Sequence[int]) -> None:
        """Per-request speculative-decoding counters as vLLM counts them: a draft is a verification of
        k > 0 draft tokens; accepted tokens (before any truncation at the request's end) also count at
        each accepted position."""
        requests, spec_tokens = out.requests, out.num_spec_tokens
        for i in range(len(requests) - out.num_padding):
            k = spec_tokens[i]
            if not k or i in out.spec_placeholders:
                continue
            a = accepted[i] if accepted else 0
            record = requests[i].client_data
            record.num_spec_drafts += 1
            record.num_spec_draft_tokens += k
            record.num_spec_accepted_tokens += a
            pos = record.spec_accepted_per_position
            if pos is None:
                pos = record.spec_accepted_per_position = array("i", [0]) * k
            elif len(pos) < k:
                pos.extend(array("i", [0]) * (k - len(pos)))
            for j in range(a):
                pos[j] += 1

    def finish(self, req: Request, now: float) -> None:
        """Public seam for the fast path: the request finished at ``now`` (its tokens all emitted): close its
        record and tell the client. (Calls go through ``_finish``, which tests patch to count finishes.)"""
        self._finish(req, now)

    def _finish(self, req: Request, now: float) -> None:
        record: RequestRecord = req.client_data
        record.finish_s = now
        record.status = FINISHED
        self._copy_counters(req, record)
        self.num_outstanding -= 1
        if self.on_finish is not None:
            self.on_finish(req)

    @staticmethod
    def _copy_counters(req: Request, record: RequestRecord) -> None:
        record.num_output_tokens = req.num_output_tokens
        record.num_cached_tokens = max(req.num_cached_tokens, 0)
        record.num_preemptions = req.num_preemptions

    def close(self) -> None:
        """Mark requests still in flight when the run stopped."""
        if self.cohort is not None:
            self.cohort.settle_all(self.in_step)
        for req in list(self.scheduler.running) + list(self.scheduler.waiting):
            record = req.client_data
            if record.status == FINISHED and record.finish_s is None:
                record.status = INCOMPLETE
                self._copy_counters(req, record)


class Router(Protocol):
    def route(self, request: Request, replicas: Sequence[Replica]) -> int: ...


class RoundRobinRouter:
    reads_replica_state = False   # routes the same whenever it is asked (see simulate's one-event arrivals)

    def __init__(self) -> None:
        self._next = 0

    def route(self, request: Request, replicas: Sequence[Replica]) -> int:
        i = self._next % len(replicas)
        self._next += 1
        return i


class LeastOutstandingRouter:
    def route(self, request: Request, replicas: Sequence[Replica]) -> int:
        return min(range(len(replicas)), key=lambda i: (replicas[i].num_outstanding, i))


def new_record(request: Request) -> RequestRecord:
    record = RequestRecord(request.request_id, request.task_class, request.arrival_time_s,
                           num_prompt_tokens=request.num_prompt_tokens)
    request.client_data = record
    return record
