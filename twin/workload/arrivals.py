"""Open-loop arrival times.

Every process is a unit-rate renewal process in "operational time" u (gaps with mean 1 and coefficient of
variation cv: cv=1 exponential = Poisson, cv=0 constant, otherwise gamma with shape 1/cv^2), mapped to wall
time through the inverse of the cumulative rate: t = u / rate for a fixed rate, and the piecewise-linear
inverse for a ``piecewise`` schedule (exact non-homogeneous Poisson when cv = 1).

As ``vllm bench serve`` does, the first request arrives at t = 0 (for a schedule: when the rate first
becomes positive). ``rate_per_s: .inf`` puts every request at t = 0. A ``ramp_up`` process sets each gap's rate
by the request's index among ``num_requests`` (``ramp_up_times``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from twin.workload.arrival_config import (
    ConstantArrivals,
    GammaArrivals,
    PiecewiseArrivals,
    PoissonArrivals,
    RampUpArrivals,
)

CHUNK = 4096


def unit_gaps(rng: np.random.Generator, cv: float, n: int) -> np.ndarray:
    """``n`` renewal gaps with mean 1 and coefficient of variation ``cv``."""
    if cv == 0:
        return np.ones(n)
    if cv == 1:
        return rng.standard_exponential(n)
    shape = 1.0 / (cv * cv)
    return rng.gamma(shape, 1.0 / shape, n)


class _Schedule:
    """Inverse cumulative rate of a piecewise-constant schedule."""

    def __init__(self, cfg: PiecewiseArrivals) -> None:
        starts, rates, ends = [], [], []
        t = 0.0
        for piece in cfg.schedule:
            end = math.inf if piece.until_s is None else piece.until_s
            if piece.rate_per_s > 0:
                starts.append(t)
                rates.append(piece.rate_per_s)
                ends.append(end)
            t = end
        self.t_start = np.array(starts)
        self.rate = np.array(rates)
        mass = self.rate * (np.array(ends) - self.t_start)  # inf for an open-ended last piece
        self.u_start = np.concatenate([[0.0], np.cumsum(mass)[:-1]])
        self.u_total = float(np.sum(mass))

    def wall_time(self, u: np.ndarray) -> np.ndarray:
        """Wall times of operational times ``u`` (all < ``u_total``)."""
        i = np.searchsorted(self.u_start, u, side="right") - 1
        return self.t_start[i] + (u - self.u_start[i]) / self.rate[i]


def ramp_up_times(cfg: RampUpArrivals, rng: np.random.Generator, num_requests: int) -> np.ndarray:
    """The ``num_requests`` arrival times of a ramp: gap k (before request k) at request k's rate."""
    n = int(num_requests)
    progress = np.arange(1, n) / max(n - 1, 1)
    if cfg.strategy == "linear":
        rates = cfg.start_rps + (cfg.end_rps - cfg.start_rps) * progress
    else:
        rates = cfg.start_rps * (cfg.end_rps / cfg.start_rps) ** progress
    shape = cfg.burstiness
    gaps = rng.gamma(shape, 1.0 / shape, n - 1) / rates
    return np.concatenate([[0.0], np.cumsum(gaps)])


def scaled_poisson_times(rate_per_s: float, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """inference-perf's ``constant`` load (its ``ConstantLoadTimer``): int(rate x duration) exponential gaps
    scaled to sum to ``duration_s``, the k-th request sent after the first k gaps. As every process here, the
    first request is at t = 0, so the others keep their offsets from it and the last is at ``duration_s``
    less the first gap."""
    return scaled_exponential_sends(int(rate_per_s * duration_s), duration_s, rng)


def scaled_exponential_sends(n: int, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` send times from ``n`` exponential gaps scaled to sum to ``duration_s`` (``scaled_poisson_times``
    with the count given: the harness's replay of an inference-perf stage, whose file gives the count)."""
    if n < 1:
        return np.zeros(0)
    gaps = rng.standard_exponential(n)
    gaps *= duration_s / gaps.sum()
    times = np.cumsum(gaps)
    return times - times[0]


def iter_arrival_chunks(cfg, rng: np.random.Generator, chunk: int = CHUNK, *,
                        num_requests: int | None = None, duration_s: float | None = None) -> Iterator[np.ndarray]:
    """Successive non-decreasing chunks of arrival times (endless unless a schedule ends; a ramp is one
    chunk of ``num_requests``, Poisson arrivals scaled to ``duration_s`` one chunk of all their sends)."""
    if isinstance(cfg, RampUpArrivals):
        if num_requests is None:
            raise ValueError("a ramp_up arrival process needs num_requests")
        yield ramp_up_times(cfg, rng, num_requests)
        return
    if isinstance(cfg, PoissonArrivals) and cfg.scale_to_duration:
        if duration_s is None:
            raise ValueError("Poisson arrivals scaled to the duration need duration_s")
        yield scaled_poisson_times(cfg.rate_per_s, duration_s, rng)
        return
    if isinstance(cfg, (PoissonArrivals, ConstantArrivals, GammaArrivals)):
        rate = cfg.rate_per_s
        if math.isinf(rate):
            while True:
                yield np.zeros(chunk)
        cv = {PoissonArrivals: 1.0, ConstantArrivals: 0.0}.get(type(cfg))
        if cv is None:
            cv = cfg.effective_cv
        schedule = None
    elif isinstance(cfg, PiecewiseArrivals):
        cv, schedule = cfg.cv, _Schedule(cfg)
    else:
        raise TypeError(f"not an open-loop arrival process: {cfg!r}")
    u0 = 0.0
    first = True
    while True:
        gaps = unit_gaps(rng, cv, chunk)
        if first:  # the first request at u = 0
            gaps = np.concatenate([[0.0], gaps[:-1]])
            first = False
        u = u0 + np.cumsum(gaps)
        u0 = float(u[-1])
        if schedule is None:
            yield u / rate
            continue
        inside = u < schedule.u_total
        if inside.all():
            yield schedule.wall_time(u)
            continue
        yield schedule.wall_time(u[inside])
        return


def arrival_times(cfg, rng: np.random.Generator, *, duration_s: float | None = None,
                  num_requests: int | None = None) -> np.ndarray:
    """Arrival times until ``duration_s`` (exclusive) and/or ``num_requests``, whichever comes first."""
    if duration_s is None and num_requests is None and not isinstance(cfg, PiecewiseArrivals):
        raise ValueError("arrival_times needs duration_s or num_requests")
    parts: list[np.ndarray] = []
    count = 0
    for times in iter_arrival_chunks(cfg, rng, num_requests=num_requests, duration_s=duration_s):
        if duration_s is not None:
            times = times[times < duration_s]
        parts.append(times)
        count += len(times)
        if num_requests is not None and count >= num_requests:
            break
        if duration_s is not None and len(times) < CHUNK:
            break
    out = np.concatenate(parts) if parts else np.zeros(0)
    return out[:num_requests] if num_requests is not None else out
