"""The ``workload:`` section of a scenario: validated with pydantic v2, errors formatted as one line.

Shape (every field is optional unless marked)::

    workload:
      arrivals:                     # open loop: poisson | gamma | constant | piecewise; closed_loop
        process: poisson
        rate_per_s: 8               # .inf = every request at t=0 (vllm bench serve --request-rate inf)
      duration_s: 600               # stop rule: duration_s and/or num_requests (whichever comes first)
      num_requests: null
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
          output_tokens: {lognormal: {median: 150, sigma: 0.6}}
          multi_turn: {turns: {uniform: [2, 6]}, gap_s: {exponential: {mean: 20}}, message_tokens: null}
      trace:                        # ... or a trace (exactly one of classes / trace)
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
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from twin.errors import TwinInputError

SHARE_TOLERANCE = 1e-6
TRACE_FORMATS = ("auto", "azure", "mooncake", "burstgpt", "lengths")


class _Strict(BaseModel):
    """Base: unknown keys are an error that lists the allowed ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            allowed = set(cls.model_fields)
            unknown = [k for k in data if k not in allowed]
            if unknown:
                raise ValueError(f"unknown field {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
        return data


StrictModel = _Strict  # public name for other config sections (frozen, unknown keys listed in the error)


def _one_of(model: BaseModel, names: tuple[str, ...], what: str) -> str:
    given = [n for n in names if getattr(model, n) is not None]
    if len(given) != 1:
        got = ", ".join(given) if given else "none"
        raise ValueError(f"give exactly one of {', '.join(names)} for {what} (got {got})")
    return given[0]


def _one_distribution(model: BaseModel, kinds: tuple[str, ...], what: str) -> BaseModel:
    """Exactly one kind is set, and a uniform range is ordered."""
    _one_of(model, kinds, what)
    uniform = getattr(model, "uniform", None)
    if uniform is not None and uniform[0] > uniform[1]:
        raise ValueError(f".uniform: must be [lo, hi] with lo <= hi (got {list(uniform)})")
    return model


def _check_min_max(lo: float | None, hi: float | None) -> None:
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"min must be <= max (got min {lo}, max {hi})")


# ---- length distributions (integer token counts) -------------------------------------------------------
class LognormalLength(_Strict):
    median: float = Field(gt=0, allow_inf_nan=False)
    sigma: float = Field(ge=0, allow_inf_nan=False)
    min: int = Field(1, ge=0)
    max: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _bounds(self):
        _check_min_max(self.min, self.max)
        return self


class NormalLength(_Strict):
    mean: float = Field(allow_inf_nan=False)
    std: float = Field(ge=0, allow_inf_nan=False)
    min: int = Field(1, ge=0)
    max: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _bounds(self):
        _check_min_max(self.min, self.max)
        return self


class EmpiricalLength(_Strict):
    path: str = Field(min_length=1)
    column: str = Field(min_length=1)


LENGTH_KINDS = ("fixed", "uniform", "lognormal", "normal", "empirical")


class LengthDist(_Strict):
    """A token-count distribution; exactly one of the kinds is set (a bare integer means ``fixed``)."""

    fixed: int | None = Field(None, ge=0)
    uniform: tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]] | None = None
    lognormal: LognormalLength | None = None
    normal: NormalLength | None = None
    empirical: EmpiricalLength | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, bool):
            raise ValueError(f"must be a token count or one of {', '.join(LENGTH_KINDS)} (got {data!r})")
        if isinstance(data, int):
            return {"fixed": data}
        if not isinstance(data, dict):
            raise ValueError(f"must be a token count or one of {', '.join(LENGTH_KINDS)} (got {data!r})")
        return data

    @model_validator(mode="after")
    def _exactly_one(self):
        return _one_distribution(self, LENGTH_KINDS, "a length distribution")

    @property
    def kind(self) -> str:
        return next(n for n in LENGTH_KINDS if getattr(self, n) is not None)

    def lower_bound(self) -> int | None:
        """The smallest value a draw can take (None for empirical: known only once the file is read)."""
        if self.fixed is not None:
            return self.fixed
        if self.uniform is not None:
            return self.uniform[0]
        if self.lognormal is not None:
            return self.lognormal.min
        if self.normal is not None:
            return self.normal.min
        return None


# ---- time distributions (seconds) ----------------------------------------------------------------------
class ExponentialTime(_Strict):
    mean: float = Field(gt=0, allow_inf_nan=False)


class LognormalTime(_Strict):
    median: float = Field(gt=0, allow_inf_nan=False)
    sigma: float = Field(ge=0, allow_inf_nan=False)
    min: float = Field(0.0, ge=0, allow_inf_nan=False)
    max: float | None = Field(None, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _bounds(self):
        _check_min_max(self.min, self.max)
        return self


TIME_KINDS = ("fixed", "uniform", "exponential", "lognormal")


class TimeDist(_Strict):
    """A non-negative duration distribution in seconds (a bare number means ``fixed``)."""

    fixed: float | None = Field(None, ge=0, allow_inf_nan=False)
    uniform: tuple[Annotated[float, Field(ge=0, allow_inf_nan=False)],
                   Annotated[float, Field(ge=0, allow_inf_nan=False)]] | None = None
    exponential: ExponentialTime | None = None
    lognormal: LognormalTime | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, (int, float, dict)):
            raise ValueError(f"must be seconds or one of {', '.join(TIME_KINDS)} (got {data!r})")
        if isinstance(data, (int, float)):
            return {"fixed": data}
        return data

    @model_validator(mode="after")
    def _exactly_one(self):
        return _one_distribution(self, TIME_KINDS, "a time distribution")

    @property
    def kind(self) -> str:
        return next(n for n in TIME_KINDS if getattr(self, n) is not None)


# ---- arrivals --------------------------------------------------------------------------------------------
_Rate = Annotated[float, Field(gt=0)]  # .inf allowed: all requests at t=0


class PoissonArrivals(_Strict):
    process: Literal["poisson"]
    rate_per_s: _Rate

    @property
    def cv(self) -> float:
        return 1.0


class GammaArrivals(_Strict):
    """Gamma-renewal arrivals. Give ``cv`` (coefficient of variation of the gaps; 1 = Poisson, > 1 burstier)
    or ``burstiness`` as ``vllm bench serve`` means it (the gamma shape; cv = 1 / sqrt(burstiness))."""

    process: Literal["gamma"]
    rate_per_s: _Rate
    cv: float | None = Field(None, gt=0, allow_inf_nan=False)
    burstiness: float | None = Field(None, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _one(self):
        _one_of(self, ("cv", "burstiness"), "gamma arrivals")
        return self

    @property
    def effective_cv(self) -> float:
        return self.cv if self.cv is not None else 1.0 / math.sqrt(self.burstiness)


class ConstantArrivals(_Strict):
    process: Literal["constant"]
    rate_per_s: _Rate


class RatePiece(_Strict):
    until_s: float | None = Field(None, gt=0, allow_inf_nan=False)  # None: open-ended (last piece only)
    rate_per_s: float = Field(ge=0, allow_inf_nan=False)


class PiecewiseArrivals(_Strict):
    """A time-varying rate: ``rate_per_s`` holds until ``until_s`` (from the previous piece's end). Arrivals
    are a unit-rate renewal process (gaps with coefficient of variation ``cv``; 1 = non-homogeneous Poisson)
    mapped through the inverse cumulative rate. After the last ``until_s`` no more requests arrive unless
    the last piece leaves ``until_s`` out."""

    process: Literal["piecewise"]
    schedule: list[RatePiece] = Field(min_length=1)
    cv: float = Field(1.0, ge=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self):
        prev = 0.0
        for i, piece in enumerate(self.schedule):
            last = i == len(self.schedule) - 1
            if piece.until_s is None and not last:
                raise ValueError(f".schedule[{i}].until_s: is required except on the last piece")
            if piece.until_s is not None and piece.until_s <= prev:
                raise ValueError(f".schedule[{i}].until_s: must be > the previous piece's until_s "
                                 f"{prev:g} (got {piece.until_s:g})")
            if piece.until_s is not None:
                prev = piece.until_s
        if all(p.rate_per_s == 0 for p in self.schedule):
            raise ValueError(".schedule: at least one piece must have rate_per_s > 0")
        return self

    @property
    def open_ended(self) -> bool:
        return self.schedule[-1].until_s is None and self.schedule[-1].rate_per_s > 0


class ClosedLoopArrivals(_Strict):
    """``concurrency`` users; each sends a request when its previous one finishes (after ``think_time_s``)."""

    process: Literal["closed_loop"]
    concurrency: int = Field(ge=1)
    think_time_s: TimeDist = TimeDist(fixed=0.0)


ArrivalsConfig = Annotated[
    Union[PoissonArrivals, GammaArrivals, ConstantArrivals, PiecewiseArrivals, ClosedLoopArrivals],
    Field(discriminator="process"),
]
ARRIVAL_PROCESSES = ("poisson", "gamma", "constant", "piecewise", "closed_loop")


# ---- request classes -------------------------------------------------------------------------------------
class FewShotConfig(_Strict):
    num_templates: int = Field(ge=1)
    tokens: int = Field(ge=1)


class PromptConfig(_Strict):
    """Prompt = [timestamp header] + shared system prompt of its group (or its shuffled sections)
    + one few-shot template + a unique suffix."""

    shared_prefix_tokens: int = Field(0, ge=0)
    num_prefix_groups: int = Field(1, ge=1)
    group_zipf_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    few_shot: FewShotConfig | None = None
    sections: int = Field(4, ge=1)
    suffix_tokens: LengthDist

    @model_validator(mode="after")
    def _not_empty(self):
        lb = self.suffix_tokens.lower_bound()
        if self.shared_prefix_tokens == 0 and self.few_shot is None and lb == 0:
            raise ValueError(".suffix_tokens: can be 0 while there is no shared prefix or few-shot block, so "
                             "a prompt could be empty; make its minimum >= 1")
        return self


class MultiTurnConfig(_Strict):
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


class ClassConfig(_Strict):
    """A task class. ``share`` is its fraction of new arrivals (of new sessions, for a multi-turn class)."""

    name: str = Field(min_length=1)
    share: float = Field(gt=0, le=1, allow_inf_nan=False)
    prompt: PromptConfig
    output_tokens: LengthDist
    priority: int = 0
    multi_turn: MultiTurnConfig | None = None

    @model_validator(mode="after")
    def _output(self):
        lb = self.output_tokens.lower_bound()
        if lb is not None and lb < 1:
            raise ValueError(f".output_tokens: must be >= 1 token (its minimum is {lb})")
        return self


# ---- traces ----------------------------------------------------------------------------------------------
class TraceConfig(_Strict):
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
class WorkloadConfig(_Strict):
    arrivals: ArrivalsConfig | None = None
    duration_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    num_requests: int | None = Field(None, ge=1)
    prefix_header: Literal["none", "timestamp", "shuffled_sections"] = "none"
    header_tokens: int = Field(24, ge=1)
    classes: list[ClassConfig] = Field(default_factory=list)
    trace: TraceConfig | None = None

    @model_validator(mode="after")
    def _consistent(self):
        if bool(self.classes) == (self.trace is not None):
            raise ValueError("give exactly one of classes (synthetic traffic) or trace")
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


# ---- error formatting ------------------------------------------------------------------------------------
_TEMPLATES = {
    "greater_than": "must be > {gt}",
    "greater_than_equal": "must be >= {ge}",
    "less_than": "must be < {lt}",
    "less_than_equal": "must be <= {le}",
    "missing": "is required",
    "extra_forbidden": "unknown field",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "too_short": "must have at least {min_length} item(s)",
    "too_long": "must have at most {max_length} item(s)",
    "string_too_short": "must not be empty",
}


def _loc_text(parts: list[Any]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


def _clean_loc(loc: tuple) -> list[Any]:
    parts: list[Any] = []
    for i, p in enumerate(loc):
        # a discriminated union puts the tag into the path: arrivals.poisson.rate_per_s -> arrivals.rate_per_s
        if i > 0 and loc[i - 1] == "arrivals" and p in ARRIVAL_PROCESSES:
            continue
        parts.append(p)
    return parts


def _plain(v: Any) -> Any:
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _got(value: Any) -> str:
    if isinstance(value, (dict, list, tuple)):
        return ""
    return f" (got {value!r})"


def describe_error(err: dict, root: str | None = None) -> str:
    """One pydantic error (an entry of ``ValidationError.errors()``) as ``path: message (got value)``."""
    parts = ([root] if root else []) + _clean_loc(tuple(err.get("loc", ())))
    etype = err.get("type", "")
    ctx = err.get("ctx") or {}
    value = err.get("input")
    if etype == "value_error":
        msg = str(ctx.get("error", err.get("msg", "")))
        if msg.startswith(".") and ": " in msg:  # ".field.sub: message" -> extend the path
            sub, msg = msg.split(": ", 1)
            for piece in sub[1:].replace("]", "").replace("[", ".").split("."):
                if piece:
                    parts.append(int(piece) if piece.isdigit() else piece)
        text = msg if "(got" in msg else msg + _got(value)
        return f"{_loc_text(parts) or '<root>'}: {text}"
    if etype == "union_tag_invalid":
        tags = ", ".join(ARRIVAL_PROCESSES)
        parts.append(str(ctx.get("discriminator", "process")).strip("'"))
        return f"{_loc_text(parts)}: must be one of {tags} (got {ctx.get('tag')!r})"
    if etype == "union_tag_not_found":
        parts.append(str(ctx.get("discriminator", "process")).strip("'"))
        return f"{_loc_text(parts)}: is required (one of {', '.join(ARRIVAL_PROCESSES)})"
    if etype == "literal_error":
        return f"{_loc_text(parts)}: must be one of {ctx.get('expected', '')}{_got(value)}"
    template = _TEMPLATES.get(etype)
    if template is not None:
        try:
            msg = template.format(**{k: _plain(v) for k, v in ctx.items()})
        except (KeyError, IndexError):
            msg = template
    else:
        msg = str(err.get("msg", "invalid")).replace("Input should be", "must be")
    got = "" if etype == "missing" else _got(value)
    return f"{_loc_text(parts) or '<root>'}: {msg}{got}"


def format_validation_error(exc: ValidationError, root: str | None = None) -> str:
    """A pydantic ``ValidationError`` as ONE line, e.g. ``workload.arrivals.rate_per_s: must be > 0 (got -3)``.

    ``root`` is prefixed to every path (``"workload"`` when validating the section on its own).
    Only the first problem is spelled out; the count of the others is appended."""
    errors = exc.errors(include_url=False)
    if not errors:
        return str(exc).splitlines()[0]
    line = describe_error(errors[0], root)
    if len(errors) > 1:
        more = len(errors) - 1
        line += f" [and {more} more problem{'s' if more > 1 else ''}]"
    return line


def load_workload_config(data: Any, root: str | None = "workload") -> WorkloadConfig:
    """Validate a ``workload:`` mapping; bad input raises ``TwinInputError`` with a one-line message."""
    if isinstance(data, WorkloadConfig):
        return data
    try:
        return WorkloadConfig.model_validate(data)
    except ValidationError as exc:
        raise TwinInputError(format_validation_error(exc, root)) from None
