"""The ``workload:`` section of a scenario: validated with pydantic v2, errors formatted as one line
(``twin.workload.validation_errors``). This module holds the section itself, its task classes and its trace;
the distributions are in ``twin.workload.distribution_config``, the arrival processes in
``twin.workload.arrival_config``.

Shape (every field is optional unless marked)::

    workload:
      arrivals:                     # open loop: poisson | gamma | constant | piecewise | ramp_up; closed_loop
        process: poisson
        rate_per_s: 8               # .inf = every request at t=0 (vllm bench serve --request-rate inf)
        max_concurrency: null       # at most this many in flight (vllm bench serve --max-concurrency)
      duration_s: 600               # stop rule: duration_s and/or num_requests (whichever comes first)
      num_requests: null
      timeout_s: null               # the client aborts a request this long after sending it (failed)
      prefix_header: none           # none | timestamp | shuffled_sections
      header_tokens: 24             # size of the unique timestamp header
      classes:                      # synthetic traffic ...
        - name: agent
          share: 1.0
          priority: 0
          prompt:
            shared_prefix_tokens: 3000
            num_prefix_groups: 1
            group_zipf_s: null      # null: groups equally likely; s > 0: Zipf(s) popularity
            few_shot: {num_templates: 4, tokens: 1500}
            sections: 4             # the shared prefix's sections, reordered per request by shuffled_sections
            suffix_tokens: {lognormal: {median: 200, sigma: 0.8}}
            pool: null              # {prompts_per_group, shuffle, multi_turn}: a finite pool, cycled
          output_tokens: {lognormal: {median: 150, sigma: 0.6}}   # where the model would stop
          max_tokens: null          # the client's cap (a length distribution); min_tokens: 0; ignore_eos: false
          timeout_s: null           # overrides workload.timeout_s
          multi_turn: {turns: {uniform: [2, 6]}, gap_s: {exponential: {mean: 20}}, message_tokens: null}
      dataset: null                 # ... or a benchmark dataset, expanded into one class (twin.workload.datasets)
      trace:                        # ... or a trace (exactly one of classes / dataset / trace)
        path: "{traces}/azure_llm_2023_conv.csv"
        format: auto                # auto | azure | mooncake | burstgpt | lengths
        time_scale: 1.0             # 2.0 = replay twice as fast
        start_s: 0                  # rows from this trace offset on (re-based to t=0) ...
        window_s: null              # ... for this long (trace seconds)
        max_requests: null
        zero_output: error          # rows with 0 output tokens: error | one | skip

With a trace, ``arrivals`` is optional: left out, the trace's own timestamps are replayed; given, its process
sets the times of the trace's rows taken in order (a length-only trace needs it), and ``closed_loop`` hands
the rows out in order to the users. ``duration_s`` / ``num_requests`` cut any workload.

Length distributions (tokens): ``N`` or ``{fixed: N}``, ``{uniform: [lo, hi]}`` (inclusive),
``{lognormal: {median, sigma, min, max}}``, ``{normal: {mean, std, min, max}}`` (continuous draws are rounded
and clipped to [min, max]; min defaults to 1), ``{empirical: {path, column}}`` (resampled from a trace column).
Time distributions (seconds): ``x`` or ``{fixed: x}``, ``{uniform: [lo, hi]}``, ``{exponential: {mean}}``,
``{lognormal: {median, sigma, min, max}}``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from twin.errors import TwinInputError
from twin.yaml_input import deep_merge
from twin.workload.arrival_config import ArrivalsConfig, ClosedLoopArrivals, PiecewiseArrivals, RampUpArrivals
from twin.workload.datasets import DatasetConfig, dataset_class
from twin.workload.distribution_config import LengthDist, TimeDist
from twin.workload.limits import MAX_REQUESTS, expected_requests
from twin.workload.strict_model import StrictModel
from twin.workload.validation_errors import format_validation_error

SHARE_TOLERANCE = 1e-6
TRACE_FORMATS = ("auto", "azure", "mooncake", "burstgpt", "lengths")


# ---- request classes -------------------------------------------------------------------------------------
class FewShotConfig(StrictModel):
    num_templates: int = Field(ge=1, le=MAX_REQUESTS)
    tokens: int = Field(ge=1)


class PromptPoolConfig(StrictModel):
    """A finite prompt pool, built once and cycled (inference-perf's shared_prefix generator): entry
    (group g, question q) for every group and ``prompts_per_group`` questions, suffix lengths drawn once per
    entry, the order shuffled once (``shuffle``); the class's k-th request sends entry k mod pool size.
    ``multi_turn``: each entry is a user whose prompt grows by its last answer and the question each round."""

    prompts_per_group: int = Field(ge=1, le=MAX_REQUESTS)
    shuffle: bool = True
    multi_turn: bool = False


class PromptConfig(StrictModel):
    """Prompt = [timestamp header] + shared system prompt of its group (or its shuffled sections)
    + one few-shot template + a unique suffix (or, with ``pool``, its pool entry's question)."""

    shared_prefix_tokens: int = Field(0, ge=0)
    num_prefix_groups: int = Field(1, ge=1, le=MAX_REQUESTS)   # at most one group per request
    group_zipf_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    few_shot: FewShotConfig | None = None
    sections: int = Field(4, ge=1)
    suffix_tokens: LengthDist
    pool: PromptPoolConfig | None = None

    @model_validator(mode="after")
    def _not_empty(self):
        if self.pool is not None and self.group_zipf_s is not None:
            raise ValueError(".group_zipf_s: means nothing with a pool (its entries are cycled in order)")
        if self.pool is not None and self.few_shot is not None:
            raise ValueError(".few_shot: cannot be combined with a pool (an entry is system prompt + question)")
        lb = self.suffix_tokens.lower_bound()
        if self.shared_prefix_tokens == 0 and self.few_shot is None and lb == 0:
            raise ValueError(".suffix_tokens: can be 0 while there is no shared prefix or few-shot block, so "
                             "a prompt could be empty; make its minimum >= 1")
        return self


class MultiTurnConfig(StrictModel):
    """Sessions: turn k+1's prompt = turn k's prompt + turn k's output + a new user message.

    ``gap_s`` is the user's pause before the next turn: after the previous turn's *arrival* in open loop,
    after its *completion* in closed loop. ``message_tokens`` (default: the class's ``suffix_tokens``) sizes
    the new user message."""

    turns: LengthDist
    gap_s: TimeDist
    message_tokens: LengthDist | None = None

    @model_validator(mode="after")
    def _turns(self):
        lb = self.turns.lower_bound()
        if lb is not None and lb < 1:
            raise ValueError(f".turns: must be >= 1 (its minimum is {lb})")
        return self


class ClassConfig(StrictModel):
    """A task class. ``share`` is its fraction of new arrivals (of new sessions, for a multi-turn class).

    Requests as clients send them: ``output_tokens`` is the length the model would generate (where it emits
    end-of-sequence); ``max_tokens`` the client's cap (a distribution, drawn per request; reserve-at-max
    policies reserve by it); ``min_tokens`` suppresses end-of-sequence before that many tokens; ``ignore_eos``
    runs every request to ``max_tokens`` (then ``output_tokens`` is left out). ``timeout_s`` overrides the
    workload's client timeout for this class."""

    name: str = Field(min_length=1)
    share: float = Field(gt=0, le=1, allow_inf_nan=False)
    prompt: PromptConfig
    output_tokens: LengthDist | None = None
    max_tokens: LengthDist | None = None
    min_tokens: int = Field(0, ge=0)
    ignore_eos: bool = False
    timeout_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    priority: int = 0
    multi_turn: MultiTurnConfig | None = None

    @model_validator(mode="after")
    def _output(self):
        if self.ignore_eos:
            if self.max_tokens is None:
                raise ValueError(".max_tokens: is required with ignore_eos: true (every request runs to it)")
            if self.output_tokens is not None:
                raise ValueError(".output_tokens: means nothing with ignore_eos: true; leave it out")
        elif self.output_tokens is None:
            raise ValueError(".output_tokens: is required (the length the model would generate) unless "
                             "ignore_eos: true")
        for field in ("output_tokens", "max_tokens"):
            dist = getattr(self, field)
            lb = dist.lower_bound() if dist is not None else None
            if lb is not None and lb < 1:
                raise ValueError(f".{field}: must be >= 1 token (its minimum is {lb})")
        lb = self.max_tokens.lower_bound() if self.max_tokens is not None else None
        if self.min_tokens and lb is not None and lb < self.min_tokens:
            raise ValueError(f".min_tokens: must be <= max_tokens (as vLLM requires; max_tokens can be {lb}, "
                             f"min_tokens is {self.min_tokens})")
        if self.multi_turn is not None and self.prompt.pool is not None:
            raise ValueError(".multi_turn: cannot be combined with prompt.pool (use prompt.pool.multi_turn)")
        return self


# ---- traces ----------------------------------------------------------------------------------------------
class TraceConfig(StrictModel):
    """Replay a trace file. ``start_s`` and ``window_s`` select rows in trace time (before scaling);
    arrivals are re-based so the first kept row's offset ``start_s`` is t=0, then divided by ``time_scale``
    (2.0 = twice as fast). ``max_requests`` keeps the first N selected rows.

    ``zero_output``: what a row with 0 output tokens means. ``error`` (default) refuses the file;
    ``one`` serves it as a 1-token output; ``skip`` leaves the row out. Both ``one`` and ``skip`` warn with
    the count. ``block_size`` is the Mooncake hash-id block (512 in the published traces)."""

    path: str = Field(min_length=1)
    format: Literal["auto", "azure", "mooncake", "burstgpt", "lengths"] = "auto"
    time_scale: float = Field(1.0, gt=0, allow_inf_nan=False)
    start_s: float = Field(0.0, ge=0, allow_inf_nan=False)
    window_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    max_requests: int | None = Field(None, ge=1)
    zero_output: Literal["error", "one", "skip"] = "error"
    block_size: int = Field(512, ge=1)
    prompt_column: str | None = None
    output_column: str | None = None
    task_class: str = Field("trace", min_length=1)
    priority: int = 0


# ---- the workload ----------------------------------------------------------------------------------------
class _DatasetHolder(StrictModel):
    dataset: DatasetConfig


class WorkloadConfig(StrictModel):
    arrivals: ArrivalsConfig | None = None
    duration_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    num_requests: int | None = Field(None, ge=1, le=MAX_REQUESTS)
    timeout_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    prefix_header: Literal["none", "timestamp", "shuffled_sections"] = "none"
    header_tokens: int = Field(24, ge=1)
    classes: list[ClassConfig] = Field(default_factory=list)
    dataset: Any = Field(None, exclude=True)   # expanded into ``classes`` on validation
    trace: TraceConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _expand_dataset(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("dataset") is None:
            return data
        # {index: fields} under classes: an override (--set workload.classes.0.timeout_s=5) of the expansion
        edits = data.get("classes") if isinstance(data.get("classes"), dict) else None
        if (data.get("classes") and edits is None) or data.get("trace") is not None:
            raise ValueError("give exactly one of classes, dataset (synthetic traffic) or trace")
        try:
            dataset = _DatasetHolder.model_validate({"dataset": data["dataset"]}).dataset
        except ValidationError as exc:
            raise ValueError("." + format_validation_error(exc)) from None
        data = {k: v for k, v in data.items() if k != "dataset"}
        expanded = {"classes": [dataset_class(dataset)]}
        data["classes"] = deep_merge(expanded, {"classes": edits} if edits else {})["classes"]
        return data

    @model_validator(mode="after")
    def _consistent(self):
        if bool(self.classes) == (self.trace is not None):
            raise ValueError("give exactly one of classes, dataset (synthetic traffic) or trace")
        arr = self.arrivals
        if self.classes:
            self._check_classes()
            if arr is None:
                raise ValueError(".arrivals: is required for synthetic classes")
            if self.duration_s is None and self.num_requests is None:
                raise ValueError("give a stop rule: duration_s and/or num_requests")
        else:
            if self.prefix_header == "shuffled_sections":
                raise ValueError(".prefix_header: shuffled_sections needs synthetic classes, not a trace")
            if self.trace.format == "lengths" and arr is None:
                raise ValueError(".arrivals: is required for a length-only trace (it has no timestamps)")
        if arr is not None and getattr(arr, "rate_per_s", None) == math.inf:
            if self.num_requests is None:
                raise ValueError(".num_requests: is required when rate_per_s is .inf (all requests at t=0)")
            if self.duration_s is not None:
                raise ValueError(".duration_s: means nothing when rate_per_s is .inf; use num_requests only")
        n = expected_requests(self)
        if n is not None and n > MAX_REQUESTS:
            raise ValueError(f"about {n:,} requests (rate x duration_s); one run simulates at most "
                             f"{MAX_REQUESTS:,} (set num_requests, or lower duration_s or the rate)")
        if getattr(arr, "scale_to_duration", False) and self.duration_s is None:
            raise ValueError(".arrivals.scale_to_duration: needs duration_s (the span the sends are scaled to)")
        if isinstance(arr, RampUpArrivals) and self.num_requests is None:
            raise ValueError(".num_requests: is required by a ramp_up arrival process (the ramp runs by "
                             "request index)")
        if isinstance(arr, PiecewiseArrivals) and self.duration_s is None and not arr.open_ended:
            raise ValueError(".arrivals.schedule: with only num_requests as the stop rule the last piece "
                             "must leave out until_s and have rate_per_s > 0")
        return self

    def _check_classes(self) -> None:
        names = [c.name for c in self.classes]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f".classes: names must be unique (repeated: {', '.join(dup)})")
        total = math.fsum(c.share for c in self.classes)
        if abs(total - 1.0) > SHARE_TOLERANCE:
            raise ValueError(f".classes: shares must sum to 1 (got {total:g})")
        if self.prefix_header == "shuffled_sections":
            for i, c in enumerate(self.classes):
                p = c.prompt
                if 0 < p.shared_prefix_tokens < p.sections:
                    raise ValueError(f".classes[{i}].prompt.sections: each section needs >= 1 token: "
                                     f"{p.sections} sections of {p.shared_prefix_tokens} shared tokens")

    @property
    def closed_loop(self) -> bool:
        return isinstance(self.arrivals, ClosedLoopArrivals)

    def bench_header(self) -> dict[str, Any]:
        """The load as a ``vllm bench serve`` result describes it (``request_rate``, ``burstiness``,
        ``max_concurrency``), for the processes that command can send; empty for the others."""
        arr = self.arrivals
        if isinstance(arr, ClosedLoopArrivals):
            return {"request_rate": math.inf, "max_concurrency": arr.concurrency}
        rate = getattr(arr, "rate_per_s", None)
        if rate is None or arr.process == "constant":
            return {}
        cv = getattr(arr, "effective_cv", 1.0)
        return {"request_rate": rate, "burstiness": 1.0 / (cv * cv), "max_concurrency": self.max_concurrency}

    @property
    def max_concurrency(self) -> int | None:
        """The open loop's in-flight cap (``arrivals.max_concurrency``), or None."""
        return getattr(self.arrivals, "max_concurrency", None)


def load_workload_config(data: Any, root: str | None = "workload") -> WorkloadConfig:
    """Validate a ``workload:`` mapping; bad input raises ``TwinInputError`` with a one-line message."""
    if isinstance(data, WorkloadConfig):
        return data
    try:
        return WorkloadConfig.model_validate(data)
    except ValidationError as exc:
        raise TwinInputError(format_validation_error(exc, root)) from None
