"""The SimPy twin: arrivals, a router, and one process per replica that drives the serving core step by step.

SimPy is the clock, not the logic: each replica loops ``schedule() -> cost_model.step_time_s() -> timeout ->
update_from_output()`` on the very objects the real engine drives. Tokens emitted by a step are stamped at
the step's end; a request arriving mid-step is seen by the next ``schedule()``.

The fast path (``fast_path``; off with a drafter, offload tiers, blocks held past ``schedule()`` or another
scheduler class) replaces that loop, while every running request is a plain decode, by pieces that each do the
same arithmetic on less state, so results are the same to the bit (tests/test_engine.py):

* ``twin.sim.cohort_steps``: the steps themselves, in place of ``schedule()`` / ``update_from_output()`` walking
  every running request; admissions still go through the scheduler's own ``admit_waiting``;
* ``twin.sim.decode_cohort.DecodeCohort``: the running decodes' counters as one step counter plus each member's
  state at joining, touched only at block boundaries and finishes, written back when a member leaves;
* the cost model's ``step_time_from_sums`` (the step's integer sums instead of per-request lists) and
  ``decode_step_times_s`` (a run of decode steps costed in one call, the step-invariant terms once);
* ``twin.sim.clock.delay_landing_on``: one SimPy timeout landing exactly where one timeout per step would;
* ``twin.sim.simulate``'s one-event open-loop arrivals and the step log's ``append_decode_run`` (rows in bulk).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Protocol

import simpy

from twin.cost.base import CostModel
from twin.results.records import ABORTED, REJECTED, RequestRecord, StepRecords
from twin.results.request_log import close_record, close_unfinished, stamp_emissions
from twin.core.engine_core import EngineCore
from twin.core.request import Request
from twin.core.scheduler import Scheduler
from twin.core.scheduler_base import SchedulerBase
from twin.core.scheduler_output import SchedulerOutput
from twin.sim.decode_cohort import DecodeCohort
from twin.sim.kv_load_clock import KvLoadClock
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
        self.core = EngineCore(scheduler, speculator)
        take_load_s = getattr(scheduler.kv_cache_manager, "take_load_s", None)
        if take_load_s is not None:     # KV offload tiers: their loads are charged to the step that admits
            cost_model = KvLoadClock(cost_model, take_load_s)
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
        self.fast_path = (fast_path and speculator is None and type(scheduler) is Scheduler and take_load_s is None
                          and scheduler.free_after_schedule is None)
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
        if not self.core.add(request):
            if counted:
                self.num_outstanding -= 1
            close_record(request, self.env.now, REJECTED)
            if self.on_finish is not None:
                self.on_finish(request)
            return
        if not counted:
            self.num_outstanding += 1
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def wake(self) -> None:
        """Something the engine waits for outside its queue has happened (P/D: a remote KV load finished)."""
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
            self.core.abort(request)
        close_record(request, self.env.now, ABORTED)
        self.num_outstanding -= 1
        if self.on_finish is not None:
            self.on_finish(request)

    def admit_deferred(self) -> bool:
        """Admit the requests that arrived during the last step (async scheduling); True (some were there)."""
        deferred, self.deferred = self.deferred, []
        # every caller is past a schedule or idle (vLLM's next schedule empty): no finished slot is held then
        self.scheduler.held_slots = 0      # (twin.core.async_slot_hold)
        for request in deferred:
            self._admit(request, counted=True)
        return True

    def sleep_until_work(self):
        self.scheduler.held_slots = 0      # idle: vLLM's next schedule is empty, the slots free (async_slot_hold)
        self._wake = self.env.event()
        wakeup = getattr(self.scheduler, "next_wakeup_s", None)
        if wakeup is not None and wakeup > self.env.now:
            return self._wake | self.env.timeout(wakeup - self.env.now)
        return self._wake

    def _run(self):
        env, core = self.env, self.core
        while True:
            if not core.has_work():
                if self.deferred:          # the engine went idle: nothing to overlap with
                    self.admit_deferred()
                else:
                    yield self.sleep_until_work()
                continue
            now = env.now
            out = core.schedule(now)
            admitted = self.admit_deferred() if self.deferred else False   # seen by the next schedule
            if not out.requests:
                if not admitted:
                    yield self._idle_after_empty_step()
                continue
            dt, draft_s = self._clock(out)
            yield from self._in_step_for(dt)
            self._record_step(out, core.update(out), now, dt, draft_s)
            if self.fast_path and self._cohort_can_run():
                yield from cohort_steps(self)

    def _clock(self, out: SchedulerOutput) -> tuple[float, float]:
        """The step's duration (the cost model's step time plus the drafter's) and the drafter's part."""
        draft_s = self.speculator.draft_time_s(out) if self.speculator is not None else 0.0
        return self.cost_model.step_time_s(out) + draft_s, draft_s

    def _idle_after_empty_step(self):
        """The scheduler scheduled nothing: only possible with nothing running (else a bug)."""
        if self.scheduler.running:
            raise RuntimeError(f"replica {self.index}: scheduler produced an empty step with "
                               f"{len(self.scheduler.running)} running requests")
        return self.sleep_until_work()

    def _in_step_for(self, dt: float):
        self.in_step = True
        yield self.env.timeout(dt)
        self.in_step = False

    def _record_step(self, out: SchedulerOutput, result, start: float, dt: float, draft_s: float) -> None:
        """What a step did, stamped at its end: emissions, finished requests, speculation counters, the row."""
        end = self.env.now
        if self.speculator is not None:
            self._record_spec(out, result.num_accepted_spec)
        stamp_emissions(out.requests, result.num_emitted, end)
        for req in result.finished:
            self._finish(req, end)
        self.steps.append_step(start, dt, out, self.index, draft_s)

    def _cohort_can_run(self) -> bool:
        """Whether the fast path can take over after this step: no lookahead or drafts, and every running
        request a plain decode (``DecodeCohort.can_join``)."""
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
        close_record(req, now)
        self.num_outstanding -= 1
        if self.on_finish is not None:
            self.on_finish(req)

    def close(self) -> None:
        """Mark requests still in flight when the run stopped."""
        if self.cohort is not None:
            self.cohort.settle_all(self.in_step)
        close_unfinished(list(self.scheduler.running) + list(self.scheduler.waiting) + self.deferred
                         + list(self.scheduler.loading))


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
