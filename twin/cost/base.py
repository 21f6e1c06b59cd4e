"""The interface every step-time model implements (roofline, constant, calibrated profile)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class StepShape(Protocol):
    """What a cost model reads of a step; `twin.core.scheduler_output.SchedulerOutput` satisfies it.

    Lists are parallel, one entry per scheduled sequence. A sequence with n new tokens and c tokens already
    computed attends, for its j-th new token (j = 1..n), over c + j positions.
    """

    num_new_tokens: Sequence[int]
    num_computed_before: Sequence[int]
    num_spec_tokens: Sequence[int]


@runtime_checkable
class CostModel(Protocol):
    name: str

    def step_time_s(self, step: StepShape) -> float:
        """Wall time of one engine step (the forward pass plus the fixed per-step overhead)."""

    def explain(self, step: StepShape) -> dict[str, float]:
        """The step's time by component, in seconds, with the total under 'total_s' (equal to step_time_s)."""
