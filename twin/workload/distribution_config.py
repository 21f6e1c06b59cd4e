"""Length and time distributions of the ``workload:`` section: ``LengthDist`` (integer token counts) and
``TimeDist`` (seconds), each exactly one kind; a bare number is shorthand for ``fixed``.

Lengths: ``N`` or ``{fixed: N}``, ``{uniform: [lo, hi]}`` (inclusive), ``{lognormal: {median, sigma, min, max}}``,
``{normal: {mean, std, min, max}}`` (continuous draws are rounded and clipped to [min, max]; min defaults to 1),
``{empirical: {path, column}}`` (resampled from a trace column). Times: ``x`` or ``{fixed: x}``,
``{uniform: [lo, hi]}``, ``{exponential: {mean}}``, ``{lognormal: {median, sigma, min, max}}``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from twin.workload.strict_model import StrictModel, check_min_max, one_distribution

# tokens in one prompt or output, as twin.workload.trace_rows.MAX_TOKEN_COUNT (vLLM counts positions in int32)
_MAX_TOKENS = 2**31 - 1
_Tokens = Annotated[int, Field(ge=0, le=_MAX_TOKENS)]


# ---- length distributions (integer token counts) -------------------------------------------------------
class LognormalLength(StrictModel):
    median: float = Field(gt=0, allow_inf_nan=False)
    sigma: float = Field(ge=0, allow_inf_nan=False)
    min: int = Field(1, ge=0, le=_MAX_TOKENS)
    max: int | None = Field(None, ge=1, le=_MAX_TOKENS)

    @model_validator(mode="after")
    def _bounds(self):
        check_min_max(self.min, self.max)
        return self


class NormalLength(StrictModel):
    mean: float = Field(allow_inf_nan=False)
    std: float = Field(ge=0, allow_inf_nan=False)
    min: int = Field(1, ge=0, le=_MAX_TOKENS)
    max: int | None = Field(None, ge=1, le=_MAX_TOKENS)

    @model_validator(mode="after")
    def _bounds(self):
        check_min_max(self.min, self.max)
        return self


class EmpiricalLength(StrictModel):
    path: str = Field(min_length=1)
    column: str = Field(min_length=1)


LENGTH_KINDS = ("fixed", "uniform", "lognormal", "normal", "empirical")


class LengthDist(StrictModel):
    """A token-count distribution; exactly one of the kinds is set (a bare integer means ``fixed``)."""

    fixed: int | None = Field(None, ge=0, le=_MAX_TOKENS)
    uniform: tuple[_Tokens, _Tokens] | None = None
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
        return one_distribution(self, LENGTH_KINDS, "a length distribution")

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
class ExponentialTime(StrictModel):
    mean: float = Field(gt=0, allow_inf_nan=False)


class LognormalTime(StrictModel):
    median: float = Field(gt=0, allow_inf_nan=False)
    sigma: float = Field(ge=0, allow_inf_nan=False)
    min: float = Field(0.0, ge=0, allow_inf_nan=False)
    max: float | None = Field(None, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _bounds(self):
        check_min_max(self.min, self.max)
        return self


TIME_KINDS = ("fixed", "uniform", "exponential", "lognormal")


class TimeDist(StrictModel):
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
        return one_distribution(self, TIME_KINDS, "a time distribution")

    @property
    def kind(self) -> str:
        return next(n for n in TIME_KINDS if getattr(self, n) is not None)
