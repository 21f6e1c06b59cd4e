"""What a workload hands the engine: one ``RequestSpec`` per request."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from twin.core.request import Request

Segment = tuple[Hashable, int]


@dataclass(slots=True, frozen=True)
class RequestSpec:
    """One request as the workload describes it (before the server sees it).

    ``prompt_segments`` are ``(segment_key, num_tokens)`` pieces (see ``twin.core.request``) covering exactly
    ``num_prompt_tokens``; keys are tuples of str/int, so they hash the same in every process.
    ``turn`` counts from 0; ``session_id`` is None for single-turn requests.
    ``output_tokens`` is the length the model would generate (its end-of-sequence, after ``min_tokens``;
    with ``ignore_eos`` it equals ``max_tokens``); ``max_tokens`` is the client's cap (None: no cap below
    ``output_tokens``), which reserve-at-max policies reserve by. ``timeout_s``: the client aborts the
    request this long after ``arrival_s`` unless it has finished (None: never).
    """

    request_id: int
    arrival_s: float
    num_prompt_tokens: int
    output_tokens: int
    prompt_segments: tuple[Segment, ...]
    task_class: str = "default"
    priority: int = 0
    session_id: int | None = None
    turn: int = 0
    max_tokens: int | None = None
    timeout_s: float | None = None

    def make_request(self, **kwargs):
        """A fresh ``twin.core.request.Request`` for this spec (extra keyword arguments are passed on)."""
        return Request(
            self.request_id, self.arrival_s, self.num_prompt_tokens, self.output_tokens,
            prompt_segments=self.prompt_segments, task_class=self.task_class, priority=self.priority,
            max_tokens=self.max_tokens, **kwargs,
        )
