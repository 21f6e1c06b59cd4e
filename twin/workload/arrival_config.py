"""The arrival processes of the ``workload:`` section, one pydantic model each, told apart by ``process``:
``poisson``, ``gamma``, ``constant``, ``piecewise``, ``ramp_up`` (open loop) and ``closed_loop``
(``concurrency`` users).

Every open-loop process takes ``max_concurrency`` (``vllm bench serve --max-concurrency``, inference-perf's
worker limit): requests fall due at the process's times, at most that many are in flight, and a due request
waits for a free slot; its clock (TTFT, E2EL, timeout) starts when it is sent."""

from __future__ import annotations

import math
from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from twin.workload.distribution_config import TimeDist
from twin.workload.limits import MAX_REQUESTS
from twin.workload.strict_model import StrictModel, one_of

# ---- arrivals --------------------------------------------------------------------------------------------
_Rate = Annotated[float, Field(gt=0)]  # .inf allowed: all requests at t=0
# a run holds at most MAX_REQUESTS requests, so more users or slots than that never send one (and each costs a
# simulation process)
_MaxConcurrency = Annotated[int | None, Field(None, ge=1, le=MAX_REQUESTS)]


class PoissonArrivals(StrictModel):
    """Exponential gaps at ``rate_per_s``. ``scale_to_duration: true`` is inference-perf's ``constant`` load:
    int(rate_per_s x duration_s) exponential gaps scaled to sum to the workload's ``duration_s``, so the sends
    span the stage's duration (less the first gap, the twin's first request being at t = 0) and the achieved
    rate is the configured one, not a draw's (twin.workload.arrivals.scaled_poisson_times)."""

    process: Literal["poisson"]
    rate_per_s: _Rate
    max_concurrency: _MaxConcurrency
    scale_to_duration: bool = False

    @property
    def cv(self) -> float:
        return 1.0


class GammaArrivals(StrictModel):
    """Gamma-renewal arrivals. Give ``cv`` (coefficient of variation of the gaps; 1 = Poisson, > 1 burstier)
    or ``burstiness`` as ``vllm bench serve`` means it (the gamma shape; cv = 1 / sqrt(burstiness))."""

    process: Literal["gamma"]
    rate_per_s: _Rate
    cv: float | None = Field(None, gt=0, allow_inf_nan=False)
    burstiness: float | None = Field(None, gt=0, allow_inf_nan=False)
    max_concurrency: _MaxConcurrency

    @model_validator(mode="after")
    def _one(self):
        one_of(self, ("cv", "burstiness"), "gamma arrivals")
        return self

    @property
    def effective_cv(self) -> float:
        return self.cv if self.cv is not None else 1.0 / math.sqrt(self.burstiness)


class ConstantArrivals(StrictModel):
    process: Literal["constant"]
    rate_per_s: _Rate
    max_concurrency: _MaxConcurrency


class RatePiece(StrictModel):
    until_s: float | None = Field(None, gt=0, allow_inf_nan=False)  # None: open-ended (last piece only)
    rate_per_s: float = Field(ge=0, allow_inf_nan=False)


class PiecewiseArrivals(StrictModel):
    """A time-varying rate: ``rate_per_s`` holds until ``until_s`` (from the previous piece's end). Arrivals
    are a unit-rate renewal process (gaps with coefficient of variation ``cv``; 1 = non-homogeneous Poisson)
    mapped through the inverse cumulative rate. After the last ``until_s`` no more requests arrive unless
    the last piece leaves ``until_s`` out."""

    process: Literal["piecewise"]
    schedule: list[RatePiece] = Field(min_length=1)
    cv: float = Field(1.0, ge=0, allow_inf_nan=False)
    max_concurrency: _MaxConcurrency

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


class RampUpArrivals(StrictModel):
    """``vllm bench serve --ramp-up-strategy linear|exponential --ramp-up-start-rps S --ramp-up-end-rps E``:
    the rate moves from S to E over the run by request index, not by time. Request k of N (k >= 1) follows a
    gamma gap (shape ``burstiness``, 1 = exponential) at rate r_k = S + (E - S) k/(N-1) (linear) or
    S (E/S)^(k/(N-1)) (exponential); request 0 is at t = 0. Needs ``num_requests`` (N)."""

    process: Literal["ramp_up"]
    strategy: Literal["linear", "exponential"]
    start_rps: float = Field(ge=0, allow_inf_nan=False)
    end_rps: float = Field(gt=0, allow_inf_nan=False)
    burstiness: float = Field(1.0, gt=0, allow_inf_nan=False)
    max_concurrency: _MaxConcurrency

    @model_validator(mode="after")
    def _ordered(self):
        if self.start_rps > self.end_rps:
            raise ValueError(f".start_rps: must be <= end_rps {self.end_rps:g} (got {self.start_rps:g})")
        if self.strategy == "exponential" and self.start_rps == 0:
            raise ValueError(".start_rps: must be > 0 for the exponential strategy (got 0)")
        return self


class ClosedLoopArrivals(StrictModel):
    """``concurrency`` users; each sends a request when its previous one finishes (after ``think_time_s``)."""

    process: Literal["closed_loop"]
    concurrency: int = Field(ge=1, le=MAX_REQUESTS)
    think_time_s: TimeDist = TimeDist(fixed=0.0)


ArrivalsConfig = Annotated[
    Union[PoissonArrivals, GammaArrivals, ConstantArrivals, PiecewiseArrivals, RampUpArrivals, ClosedLoopArrivals],
    Field(discriminator="process"),
]
ARRIVAL_PROCESSES = ("poisson", "gamma", "constant", "piecewise", "ramp_up", "closed_loop")
