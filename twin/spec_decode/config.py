"""The ``speculative_decoding:`` section of a scenario (pydantic, unknown keys refused, one-line errors).

::

    speculative_decoding:
      method: draft_model            # draft_model | eagle | eagle3 | mtp | ngram   (vLLM's method names)
      num_speculative_tokens: 4      # k: drafts proposed per step
      draft_model: llama-3.2-1b      # method draft_model only: a catalog name or a config.json path
      acceptance:                    # per task class, or one form for all (``acceptance: 0.7``)
        code: {rate: 0.85}                       # i.i.d. per-token acceptance
        chat: {per_position: [0.8, 0.6, 0.45, 0.3]}   # P(at least i accepted), as vLLM reports it
        creative: {accepted_length: [50, 25, 12, 8, 5]}  # frequencies of accepting exactly 0..m drafts
        default: 0.6                 # any class not listed
      # ngram only: proposal_rate in an acceptance entry = share of steps where a match is found (default 1)
      # eagle / eagle3 / mtp: draft_layers (decoder layers per proposal, default 1);
      # eagle3: draft_vocab_size (its LM head's vocabulary, default 32000)
      draft_pass_overhead_s: 1.0e-4  # launch + sampling per draft forward pass
      ngram_lookup_s_per_seq: 5.0e-6 # CPU n-gram matching per sequence and step

A variant turns speculation off with ``speculative_decoding: null``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from twin.spec_decode.acceptance import AcceptanceModel
from twin.workload.strict_model import StrictModel as _Strict

METHODS = ("draft_model", "eagle", "eagle3", "mtp", "ngram")
HEAD_METHODS = ("eagle", "eagle3", "mtp")
FORMS = ("rate", "per_position", "accepted_length")
DEFAULT_KEY = "default"
DEFAULT_EAGLE3_DRAFT_VOCAB = 32000


class AcceptanceConfig(_Strict):
    """One task class's acceptance: exactly one of ``rate``, ``per_position``, ``accepted_length``
    (a bare number means ``rate``)."""

    rate: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    per_position: list[Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]] | None = Field(None, min_length=1)
    accepted_length: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = Field(None, min_length=1)
    proposal_rate: float = Field(1.0, ge=0, le=1, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, bool):
            raise ValueError(f"must be a rate in [0, 1] or a mapping with one of {', '.join(FORMS)} (got {data!r})")
        if isinstance(data, (int, float)):
            return {"rate": data}
        return data

    @model_validator(mode="after")
    def _one_form(self) -> AcceptanceConfig:
        given = [f for f in FORMS if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(FORMS)} (got {', '.join(given) or 'none'})")
        if self.per_position is not None:
            for i in range(1, len(self.per_position)):
                if self.per_position[i] > self.per_position[i - 1]:
                    raise ValueError(f".per_position: rates must not increase with the position (position {i + 1}"
                                     f" is {self.per_position[i]:g} after {self.per_position[i - 1]:g})")
        if self.accepted_length is not None and not math.fsum(self.accepted_length) > 0:
            raise ValueError(".accepted_length: frequencies of accepting exactly 0, 1, ... drafts must not all be 0")
        return self

    @property
    def form(self) -> str:
        return next(f for f in FORMS if getattr(self, f) is not None)

    def model(self, num_speculative_tokens: int) -> AcceptanceModel:
        if self.rate is not None:
            return AcceptanceModel.iid(self.rate, num_speculative_tokens, self.proposal_rate)
        if self.per_position is not None:
            return AcceptanceModel.per_position(self.per_position, self.proposal_rate)
        return AcceptanceModel.accepted_length(self.accepted_length, self.proposal_rate)


def _looks_like_one_form(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) or (
        isinstance(value, dict) and bool(value) and set(value) <= {*FORMS, "proposal_rate"})


class SpeculativeDecodingConfig(_Strict):
    method: Literal["draft_model", "eagle", "eagle3", "mtp", "ngram"]
    num_speculative_tokens: int = Field(ge=1, le=32)
    draft_model: str | None = Field(None, min_length=1)
    draft_layers: int | None = Field(None, ge=1, le=64)
    draft_vocab_size: int | None = Field(None, ge=1)
    acceptance: dict[str, AcceptanceConfig]
    draft_pass_overhead_s: float = Field(1.0e-4, ge=0, allow_inf_nan=False)
    ngram_lookup_s_per_seq: float = Field(5.0e-6, ge=0, allow_inf_nan=False)

    @field_validator("acceptance", mode="before")
    @classmethod
    def _one_for_all(cls, value: Any) -> Any:
        if _looks_like_one_form(value):
            return {DEFAULT_KEY: value}
        if isinstance(value, dict) and not value:
            raise ValueError("give a form for at least one task class (or 'default')")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> SpeculativeDecodingConfig:
        m, k = self.method, self.num_speculative_tokens
        if m == "draft_model" and self.draft_model is None:
            raise ValueError(".draft_model: is required for method draft_model (a catalog model or config.json)")
        if m != "draft_model" and self.draft_model is not None:
            raise ValueError(f".draft_model: only for method draft_model (method is {m!r})")
        if self.draft_layers is not None and m not in HEAD_METHODS:
            raise ValueError(f".draft_layers: only for methods {', '.join(HEAD_METHODS)} (method is {m!r})")
        if self.draft_vocab_size is not None and m != "eagle3":
            raise ValueError(f".draft_vocab_size: only for method eagle3 (method is {m!r})")
        for name, acc in self.acceptance.items():
            if acc.per_position is not None and len(acc.per_position) < k:
                raise ValueError(f".acceptance.{name}.per_position: gives {len(acc.per_position)} positions, "
                                 f"num_speculative_tokens is {k}; give at least {k}")
            if acc.proposal_rate < 1.0 and m != "ngram":
                raise ValueError(f".acceptance.{name}.proposal_rate: only for method ngram (a model-based "
                                 f"drafter proposes at every step)")
        return self

    def acceptance_models(self) -> dict[str, AcceptanceModel]:
        return {name: acc.model(self.num_speculative_tokens) for name, acc in self.acceptance.items()}

    @property
    def uses_lookahead_slots(self) -> bool:
        """Model-based drafters write their drafts' KV, so vLLM reserves k lookahead slots per request."""
        return self.method != "ngram"


def check_task_classes(spec: SpeculativeDecodingConfig, class_names: list[str]) -> None:
    """Every task class of the workload must have an acceptance, its own or ``default``. Entries for classes
    the workload does not have are allowed (one acceptance table can serve variants with different traffic).
    Raises ValueError with a path starting ``.speculative_decoding.acceptance``."""
    if DEFAULT_KEY in spec.acceptance:
        return
    missing = [c for c in class_names if c not in spec.acceptance]
    if missing:
        raise ValueError(f".speculative_decoding.acceptance: task class {missing[0]!r} has no acceptance "
                         f"(given: {', '.join(spec.acceptance)}); give acceptance.{missing[0]} or acceptance.default")
