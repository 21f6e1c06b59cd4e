"""One engine step, shared by the twin's replicas and the calibration engine.

Whoever drives the serving core (a SimPy replica pricing each step with a cost model, or the torch engine
timing a real forward pass) runs the same loop::

    out = core.schedule(now)       # which requests, how many tokens each, which blocks (vLLM's schedule())
    dt = clock(out)                # the twin: the cost model's step time; the engine: the measured step
    result = core.update(out, ...) # what the step produced: tokens emitted, requests finished

Requests come in with ``add`` and leave early with ``abort``; they finish by one rule (``Request.
output_tokens_left`` reaching 0 in ``SchedulerBase.update_from_output``, which retires them through
``SchedulerBase.retire``: the fast path's decode cohort ends requests through the same routine). The clock is
the driver's: the core never reads one (``schedule(now)`` is told the time). A driver may keep more than one
step in flight (schedule the next before the last one's output is back, as vLLM's async scheduling does):
``update`` applies each step's output as vLLM's ``update_from_output`` does, to a request preempted meanwhile
too (its sampled tokens are kept; tests/test_scheduler_in_flight.py). The twin's replica keeps one.

Speculative decoding, when a speculator is given (``twin.spec_decode``; any object with ``num_generated``,
``num_draft_tokens`` and optionally ``release``), is part of the step: ``update`` takes the accepted drafts
from it, forgets finished requests' draft streams and asks it for the next drafts of the running decodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from twin.core.request import Request, RequestStatus
from twin.core.scheduler_base import SchedulerBase
from twin.core.scheduler_output import SchedulerOutput, StepResult


class EngineCore:
    """The serving core's step: a scheduler (with its KV cache manager and block pool) and, optionally, a
    speculator."""

    __slots__ = ("scheduler", "speculator", "_release")

    def __init__(self, scheduler: SchedulerBase, speculator: Any | None = None) -> None:
        self.scheduler = scheduler
        self.speculator = speculator
        self._release = getattr(speculator, "release", None)

    def add(self, request: Request) -> bool:
        """Hand a request to the scheduler; False when it is rejected (``request.reject_reason`` says why)."""
        return self.scheduler.add_request(request)

    def abort(self, request: Request) -> None:
        """The client gave up: the request leaves running or waiting and frees its KV blocks (vLLM's abort)."""
        self.scheduler.finish_requests([request], RequestStatus.FINISHED_ABORTED)

    def has_work(self) -> bool:
        """Whether any request is running or waiting."""
        return self.scheduler.has_unfinished_requests()

    def schedule(self, now: float) -> SchedulerOutput:
        """The next step's batch at time ``now`` (empty when nothing can be scheduled)."""
        return self.scheduler.schedule(now)

    def update(self, out: SchedulerOutput, sampled_token_ids: Sequence[Sequence[int]] | None = None) -> StepResult:
        """Apply what step ``out`` produced: real tokens (``sampled_token_ids``), else the speculator's accepted
        drafts, else one token per request whose prompt is done. Finished requests are retired."""
        spec = self.speculator
        if spec is None:
            return self.scheduler.update_from_output(out, None, sampled_token_ids)
        result = self.scheduler.update_from_output(out, spec.num_generated(out), sampled_token_ids)
        if self._release is not None:
            for req in result.finished:
                self._release(req)
        for req in self.scheduler.running:
            if req.num_computed_tokens == req.num_prompt_tokens + req.num_output_tokens - 1:
                req.num_spec_tokens = spec.num_draft_tokens(req)
        return result
