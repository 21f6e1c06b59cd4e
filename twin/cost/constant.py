"""A linear step-time model for tests and teaching: step_s + per_token_s x new tokens + per_seq_s x sequences."""

from __future__ import annotations

import math

from twin.cost.base import StepShape
from twin.errors import TwinInputError


class ConstantCostModel:
    name = "constant"

    def __init__(self, step_s: float, per_token_s: float = 0.0, per_seq_s: float = 0.0) -> None:
        for field, v in (("step_s", step_s), ("per_token_s", per_token_s), ("per_seq_s", per_seq_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise TwinInputError(f"{field} = {v!r}: must be a finite number >= 0 (seconds)")
        self.step_s = float(step_s)
        self.per_token_s = float(per_token_s)
        self.per_seq_s = float(per_seq_s)

    def step_time_s(self, step: StepShape) -> float:
        return self.step_s + self.per_token_s * sum(step.num_new_tokens) + self.per_seq_s * len(step.num_new_tokens)

    def step_time_from_sums(self, n_seqs: int, tokens: int, context: int, new_x_context: int, new_squared: int,
                            spec_tokens: int) -> float:
        """``step_time_s`` from the step's sums (see ``RooflineCostModel.step_time_from_sums``)."""
        return self.step_s + self.per_token_s * tokens + self.per_seq_s * n_seqs

    def decode_step_times_s(self, n_seqs: int, context: int, num_steps: int) -> list[float]:
        """``step_time_from_sums`` of ``num_steps`` consecutive pure-decode steps of ``n_seqs`` sequences."""
        return [self.step_time_from_sums(n_seqs, n_seqs, context, 0, n_seqs, 0)] * num_steps

    def explain(self, step: StepShape) -> dict[str, float]:
        return {
            "step_s": self.step_s,
            "tokens_s": self.per_token_s * sum(step.num_new_tokens),
            "seqs_s": self.per_seq_s * len(step.num_new_tokens),
            "total_s": self.step_time_s(step),
        }

    def parameters(self) -> dict[str, object]:
        return {"kind": self.name, "step_s": self.step_s, "per_token_s": self.per_token_s, "per_seq_s": self.per_seq_s}

    def __repr__(self) -> str:
        return f"ConstantCostModel(step_s={self.step_s}, per_token_s={self.per_token_s}, per_seq_s={self.per_seq_s})"
