"""The speculator the engine drives (``twin.sim.replica.Speculator``): how many drafts each decoding request gets,
how many of them the target accepts, and what drafting costs.

Token accounting stays in the serving core: the engine sets ``request.num_spec_tokens`` to
``num_draft_tokens(request)``, the scheduler verifies ``1 + drafts`` tokens per sequence inside the token
budget (cutting drafts the budget cannot hold) and allocates their KV slots, and ``update_from_output`` rolls
back the rejected ones from ``num_generated(out)`` = 1 + accepted.

Randomness: one stream per request, ``twin.workload.rng.stream(seed, "spec_decode", request_id)`` (a child of
``numpy.random.SeedSequence(seed)``), one uniform per draft decision and one per verification. A request's draws
therefore depend on neither the batch it lands in nor the replica serving it, and the same seed gives the same
run byte for byte.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np

from twin.errors import TwinInputError
from twin.core.request import Request, RequestStatus
from twin.core.scheduler_output import SchedulerOutput
from twin.spec_decode.acceptance import AcceptanceModel
from twin.spec_decode.config import DEFAULT_KEY
from twin.spec_decode.drafters import Drafter
from twin.workload.rng import stream

_BUFFER = 64


class _Draws:
    """A request's uniform draws, taken from its own stream in blocks."""

    __slots__ = ("gen", "buf", "pos")

    def __init__(self, gen: np.random.Generator) -> None:
        self.gen = gen
        self.buf: list[float] = []
        self.pos = 0

    def next(self) -> float:
        if self.pos == len(self.buf):
            self.buf = self.gen.random(_BUFFER).tolist()
            self.pos = 0
        u = self.buf[self.pos]
        self.pos += 1
        return u


def _stream_key(request_id: Hashable) -> int | str:
    if isinstance(request_id, int) and not isinstance(request_id, bool) and request_id >= 0:
        return request_id
    return str(request_id)


@dataclass
class SpecDecodeStats:
    """What one replica's speculator did: verifications, drafted and accepted tokens, drafting time."""

    num_steps: int = 0
    draft_time_s: float = 0.0
    num_verifications: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0

    def merge(self, other: SpecDecodeStats) -> SpecDecodeStats:
        return SpecDecodeStats(*(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__))


class Speculator:
    """Speculative decoding with ``num_speculative_tokens`` drafts per step, acceptance per task class and a
    drafter's cost. ``acceptance`` maps task classes (and optionally ``"default"``) to models."""

    def __init__(self, num_speculative_tokens: int, acceptance: Mapping[str, AcceptanceModel] | AcceptanceModel,
                 drafter: Drafter, seed: int = 0) -> None:
        if isinstance(num_speculative_tokens, bool) or not isinstance(num_speculative_tokens, int) \
                or num_speculative_tokens < 1:
            raise TwinInputError(f"num_speculative_tokens = {num_speculative_tokens!r}: must be an integer >= 1")
        if isinstance(acceptance, AcceptanceModel):
            acceptance = {DEFAULT_KEY: acceptance}
        if not acceptance:
            raise TwinInputError("speculative_decoding.acceptance: give a model for at least one task class")
        self.k = num_speculative_tokens
        self.acceptance = dict(acceptance)
        self.drafter = drafter
        self.seed = int(seed)
        self.stats = SpecDecodeStats()
        self.last_draft_time_s = 0.0
        self._draws: dict[Hashable, _Draws] = {}
        self._models: dict[str, AcceptanceModel] = {}

    @property
    def method(self) -> str:
        return self.drafter.method

    # ---- per request ----------------------------------------------------------------------------------
    def acceptance_for(self, task_class: str) -> AcceptanceModel:
        model = self._models.get(task_class)
        if model is None:
            model = self.acceptance.get(task_class) or self.acceptance.get(DEFAULT_KEY)
            if model is None:
                raise TwinInputError(f"speculative_decoding.acceptance: task class {task_class!r} has no acceptance "
                                     f"(have: {', '.join(self.acceptance)}); give it one or a 'default'")
            self._models[task_class] = model
        return model

    def _draws_of(self, request: Request) -> _Draws:
        d = self._draws.get(request.request_id)
        if d is None:
            d = self._draws[request.request_id] = _Draws(
                stream(self.seed, "spec_decode", _stream_key(request.request_id)))
        return d

    def release(self, request: Request) -> None:
        """Forget a finished request's stream."""
        self._draws.pop(request.request_id, None)

    # ---- the engine's protocol ------------------------------------------------------------------------
    def num_draft_tokens(self, request: Request) -> int:
        model = self.acceptance_for(request.task_class)
        if model.proposal_rate < 1.0 and self._draws_of(request).next() >= model.proposal_rate:
            return 0  # no n-gram match: nothing to propose this step
        return self.k

    def num_generated(self, out: SchedulerOutput) -> list[int]:
        requests = out.requests
        spec = out.num_spec_tokens
        placeholders = out.spec_placeholders
        n_real = len(requests) - out.num_padding
        gen = [0] * len(requests)
        stats = self.stats
        for i in range(n_real):
            req = requests[i]
            if req.status != RequestStatus.RUNNING:
                if req.status != RequestStatus.PREEMPTED:
                    continue  # finished while the step ran
                # preempted while the step ran (more than one batch in flight): its output still comes back
                computed = out.num_computed_before[i] + out.num_new_tokens[i]
            else:
                computed = req.num_computed_tokens
            if computed < req.num_prompt_tokens + req.num_output_tokens:
                continue  # mid-prefill chunk: no token sampled
            k = spec[i]
            if k and i in placeholders:
                gen[i] = 1  # padding drafts are never accepted, nor counted as drafts
            elif k:
                accepted = self.acceptance_for(req.task_class).accepted(self._draws_of(req).next(), k)
                stats.num_verifications += 1
                stats.num_draft_tokens += k
                stats.num_accepted_tokens += accepted
                gen[i] = 1 + accepted
            else:
                gen[i] = 1
        return gen

    def draft_time_s(self, out: SchedulerOutput) -> float:
        dt = self.drafter.draft_time_s(out, self.k) if out.requests else 0.0
        self.last_draft_time_s = dt
        self.stats.num_steps += 1
        self.stats.draft_time_s += dt
        return dt

    def explain(self, out: SchedulerOutput, target=None) -> dict[str, float]:
        """The step's speculative terms by name (``twin.spec_decode.step_cost``); with ``target``, the target's
        cost model, the verification's extra time and the step's total too."""
        explain = getattr(self.drafter, "explain", None)
        if explain is None:
            return {"spec_total_s": self.drafter.draft_time_s(out, self.k)}
        return explain(out, self.k, target)

    def __repr__(self) -> str:
        return f"Speculator(k={self.k}, {self.drafter!r}, acceptance={self.acceptance})"
