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
        qa: {mean_acceptance_length: {1: 1.75, 2: 2.3, 3: 2.65, 4: 2.85}}  # measured AL at each k
        rag: {counters: {num_drafts: 1000, accepted_per_position: [700, 480, 330, 220]}}  # server counters
        bench: {dataset: random_tokens}          # a named dataset class (twin.spec_decode.acceptance_input)
        default: 0.6                 # any class not listed
      # or, as vLLM's benchmark knobs fix it for every request (instead of acceptance):
      # rejection_sample_method: synthetic, synthetic_acceptance_length: 2.8 (or synthetic_acceptance_rates)
      # ngram only: proposal_rate in an acceptance entry = share of steps where a match is found (default 1)
      # eagle / eagle3 / mtp: draft_layers (decoder layers per proposal, default 1);
      # eagle3: draft_vocab_size (its LM head's vocabulary, as the checkpoint sets it; default 32000)
      sampling: random               # what requests ask for: greedy | random | top_k_top_p (sets the
                                     # rejection sampler's work, twin.spec_decode.step_cost)
      draft_pass_overhead_s: null    # host time per draft pass; null: the prior of twin.spec_decode.step_cost
      spec_step_overhead_s: null     # host time per step (spec metadata, rejection sampler, drafter inputs); null: prior
      spec_seq_overhead_s: null      # host time per sequence and step (spec bookkeeping); null: prior
      ngram_lookup_s_per_seq: 5.0e-6 # CPU n-gram matching per sequence and step

A variant turns speculation off with ``speculative_decoding: null``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from twin.spec_decode.acceptance import AcceptanceModel
from twin.spec_decode.acceptance_input import (dataset_class_rates, rates_from_acceptance_lengths,
                                               rates_from_counters, synthetic_rates)
from twin.spec_decode.drafters import DEFAULT_EAGLE3_DRAFT_VOCAB  # noqa: F401  (re-exported)
from twin.workload.strict_model import StrictModel as _Strict

METHODS = ("draft_model", "eagle", "eagle3", "mtp", "ngram")
HEAD_METHODS = ("eagle", "eagle3", "mtp")
FORMS = ("rate", "per_position", "accepted_length", "mean_acceptance_length", "counters", "dataset")
SAMPLING = ("greedy", "random", "top_k_top_p")
DEFAULT_KEY = "default"


class AcceptanceCounters(_Strict):
    """A server's per-position counters: ``vllm:spec_decode_num_drafts`` and
    ``vllm:spec_decode_num_accepted_tokens_per_pos``."""

    num_drafts: float = Field(gt=0, allow_inf_nan=False)
    accepted_per_position: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(min_length=1)


class AcceptanceConfig(_Strict):
    """One task class's acceptance: exactly one of ``rate``, ``per_position``, ``accepted_length``
    (a bare number means ``rate``)."""

    rate: float | None = Field(None, ge=0, le=1, allow_inf_nan=False)
    per_position: list[Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]] | None = Field(None, min_length=1)
    accepted_length: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = Field(None, min_length=1)
    mean_acceptance_length: dict[int, float] | None = Field(None, min_length=1)
    counters: AcceptanceCounters | None = None
    dataset: str | None = Field(None, min_length=1)
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
        self.measured_rates()          # one-line errors for AL(k) and counters at load time
        if self.dataset is not None:
            dataset_class_rates(self.dataset, "eagle", 1)
        if self.dataset is not None and "proposal_rate" in self.model_fields_set:
            raise ValueError(".proposal_rate: a dataset class sets its own proposal rate")
        return self

    def measured_rates(self) -> list[float] | None:
        """Per-position rates of the measured forms (AL per k, counters); None for the other forms."""
        if self.mean_acceptance_length is not None:
            return rates_from_acceptance_lengths(self.mean_acceptance_length)
        if self.counters is not None:
            return rates_from_counters(self.counters.num_drafts, self.counters.accepted_per_position)
        return None

    @property
    def form(self) -> str:
        return next(f for f in FORMS if getattr(self, f) is not None)

    def num_positions(self) -> int | None:
        """Positions the form gives (None: any number, as a rate or a dataset class)."""
        if self.per_position is not None:
            return len(self.per_position)
        if self.mean_acceptance_length is not None:
            return len(self.mean_acceptance_length)
        if self.counters is not None:
            return len(self.counters.accepted_per_position)
        return None

    def model(self, num_speculative_tokens: int, method: str = "eagle") -> AcceptanceModel:
        if self.rate is not None:
            return AcceptanceModel.iid(self.rate, num_speculative_tokens, self.proposal_rate)
        if self.per_position is not None:
            return AcceptanceModel.per_position(self.per_position, self.proposal_rate)
        if self.dataset is not None:
            rates, proposal = dataset_class_rates(self.dataset, method, num_speculative_tokens)
            model = AcceptanceModel(rates, proposal)
            model.label = f"dataset {self.dataset}"
            return model
        measured = self.measured_rates()
        if measured is not None:
            model = AcceptanceModel(measured, self.proposal_rate)
            model.label = ("AL(k) " if self.counters is None else "counters ") + ", ".join(f"{r:g}" for r in measured)
            return model
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
    acceptance: dict[str, AcceptanceConfig] | None = None
    rejection_sample_method: Literal["standard", "synthetic"] = "standard"
    synthetic_acceptance_rates: list[float] | None = Field(None, min_length=1)
    synthetic_acceptance_length: float | None = Field(None, allow_inf_nan=False)
    sampling: Literal["greedy", "random", "top_k_top_p"] = "random"
    draft_pass_overhead_s: float | None = Field(None, ge=0, allow_inf_nan=False)
    spec_step_overhead_s: float | None = Field(None, ge=0, allow_inf_nan=False)
    spec_seq_overhead_s: float | None = Field(None, ge=0, allow_inf_nan=False)
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
        synthetic = (self.synthetic_acceptance_rates, self.synthetic_acceptance_length)
        if self.rejection_sample_method == "synthetic":
            if self.acceptance is not None:
                raise ValueError(".acceptance: rejection_sample_method synthetic fixes the acceptance of every "
                                 "request; leave acceptance out (or use rejection_sample_method: standard)")
            try:
                synthetic_rates(k, *synthetic)
            except ValueError as exc:
                raise ValueError(str(exc)) from None
            return self
        if any(v is not None for v in synthetic):
            raise ValueError(".synthetic_acceptance_rates/.synthetic_acceptance_length: only with "
                             "rejection_sample_method: synthetic")
        if self.acceptance is None:
            raise ValueError(".acceptance: is required: what the drafter accepts on your traffic, measured (for all "
                             "classes, e.g. acceptance: {per_position: [0.8, 0.62, 0.48]}, vLLM's logged per-position "
                             "acceptance rate; per task class, and the other forms: docs/speculative_decoding.md), "
                             "unless rejection_sample_method is synthetic")
        for name, acc in self.acceptance.items():
            given = acc.num_positions()
            if given is not None and given < k:
                raise ValueError(f".acceptance.{name}.{acc.form}: gives {given} positions, "
                                 f"num_speculative_tokens is {k}; give at least {k}")
            if acc.proposal_rate < 1.0 and m != "ngram":
                raise ValueError(f".acceptance.{name}.proposal_rate: only for method ngram (a model-based "
                                 f"drafter proposes at every step)")
        return self

    def acceptance_models(self) -> dict[str, AcceptanceModel]:
        k = self.num_speculative_tokens
        if self.rejection_sample_method == "synthetic":
            rates = synthetic_rates(k, self.synthetic_acceptance_rates, self.synthetic_acceptance_length)
            model = AcceptanceModel(rates)
            model.label = "synthetic " + ", ".join(f"{r:g}" for r in rates)
            return {DEFAULT_KEY: model}
        return {name: acc.model(k, self.method) for name, acc in (self.acceptance or {}).items()}

    @property
    def uses_lookahead_slots(self) -> bool:
        """Model-based drafters write their drafts' KV, so vLLM reserves k lookahead slots per request."""
        return self.method != "ngram"


def check_task_classes(spec: SpeculativeDecodingConfig, class_names: list[str]) -> None:
    """Every task class of the workload must have an acceptance, its own or ``default``. Entries for classes
    the workload does not have are allowed (one acceptance table can serve variants with different traffic).
    Raises ValueError with a path starting ``.speculative_decoding.acceptance``."""
    if spec.acceptance is None or DEFAULT_KEY in spec.acceptance:
        return
    missing = [c for c in class_names if c not in spec.acceptance]
    if missing:
        raise ValueError(f".speculative_decoding.acceptance: task class {missing[0]!r} has no acceptance "
                         f"(given: {', '.join(spec.acceptance)}); give acceptance.{missing[0]} or acceptance.default")
