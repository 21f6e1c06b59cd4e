"""How ``cap_fit`` judges a candidate configuration: the step-time scale it needs, and what it must reproduce.

A candidate (a ``max_num_seqs``, prefix caching on or off) is simulated on the measured requests with the cost
model's step times scaled by a factor, so that a server faster or slower than the cost model can still be told
apart by its queueing. The factor is searched until the simulated median TPOT lies within ``TPOT_TOLERANCE`` of
the measured one (``fit_speed_factor``). One proportional rescale is not enough where the TPOT is not
proportional to the step time: in an open-loop replay faster steps also shrink the batches and the prefill work
each decode shares its steps with, so TPOT falls faster than the factor (a server without prefix caching at
x0.46 decodes at 4.3 ms, not the 8.9 ms it was scaled to). Such a candidate has not shown it reproduces the
measurements, only that its TTFTs happen to match at a speed that misses the TPOT.

The score (``candidate_score``) is therefore the TTFT distance (``ttft_distance``: mean absolute percentile
difference, as a share of the mean measured latency) plus the TPOT miss beyond the tolerance, in the same unit:
a relative TPOT error ``e`` moves each request's decode time, and so the mean latency, by ``e`` times the decode
share of the latency (``1 - mean TTFT / mean latency``). Weight 1 on each: both are shares of the mean latency.
A candidate the search brings within the tolerance scores its TTFT distance alone, as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

TPOT_TOLERANCE = 0.01   # the rescale stops when measured / simulated median TPOT is within 1 % of 1
MAX_SIMULATIONS = 6     # per candidate, the first (unscaled) one included
FACTOR_RANGE = (1.0 / 64, 64.0)   # the search stays inside: a server 64x off the cost model is another server

Simulation = tuple[Any, np.ndarray, float | None]   # (result, simulated TTFTs in s, simulated median TPOT in s)


def tpot_miss(measured_tpot_s: float | None, simulated_tpot_s: float | None) -> float:
    """``|measured / simulated - 1|`` (the rescale's own test); 0 where either is missing."""
    if not measured_tpot_s or not simulated_tpot_s:
        return 0.0
    return abs(measured_tpot_s / simulated_tpot_s - 1.0)


def _converged(measured_tpot_s: float, tpot_s: float | None) -> bool:
    return tpot_s is None or tpot_miss(measured_tpot_s, tpot_s) <= TPOT_TOLERANCE


def _next_factor(points: list[tuple[float, float]], measured_tpot_s: float) -> float:
    """The next factor to try from ``points`` (factor, simulated median TPOT), assuming TPOT grows with the
    factor. One point: the proportional rescale. More: the secant through the last two in (1 / factor,
    1 / TPOT), where an open-loop queue makes 1 / TPOT about linear (TPOT = f d / (1 - f r P): decode time d,
    prefill work P at arrival rate r), kept inside the bracket the points give, else its geometric middle."""
    f1, t1 = points[-1]
    guess = f1 * measured_tpot_s / t1
    if len(points) > 1:
        f0, t0 = points[-2]
        x0, y0, x1, y1 = 1.0 / f0, 1.0 / t0, 1.0 / f1, 1.0 / t1
        if y1 != y0:
            x = x1 + (1.0 / measured_tpot_s - y1) * (x1 - x0) / (y1 - y0)
            guess = 1.0 / x if x > 0 else math.nan
    low = max((f for f, t in points if t < measured_tpot_s), default=FACTOR_RANGE[0])
    high = min((f for f, t in points if t > measured_tpot_s), default=FACTOR_RANGE[1])
    if not (low < guess < high) or not math.isfinite(guess):
        guess = math.sqrt(low * high)
    return guess


def fit_speed_factor(simulate_at: Callable[[float], Simulation], measured_tpot_s: float | None,
                     fit_speed: bool = True) -> tuple[float, Simulation]:
    """The factor (and its simulation) whose median TPOT matches ``measured_tpot_s`` within ``TPOT_TOLERANCE``,
    searched from 1 (the cost model as it is) in at most ``MAX_SIMULATIONS`` simulations; where none comes that
    close, the closest one tried. Without ``fit_speed`` (or a TPOT on either side), factor 1."""
    sim = simulate_at(1.0)
    if not fit_speed or not measured_tpot_s or _converged(measured_tpot_s, sim[2]):
        return 1.0, sim
    points = [(1.0, float(sim[2]))]
    best = (tpot_miss(measured_tpot_s, sim[2]), 1.0, sim)
    for _ in range(MAX_SIMULATIONS - 1):
        factor = _next_factor(points, measured_tpot_s)
        if any(math.isclose(factor, f, rel_tol=1e-9) for f, _ in points):
            break
        sim = simulate_at(factor)
        if sim[2] is None:
            break
        miss = tpot_miss(measured_tpot_s, sim[2])
        if miss < best[0]:
            best = (miss, factor, sim)
        if miss <= TPOT_TOLERANCE:
            break
        points.append((factor, float(sim[2])))
    return best[1], best[2]


def decode_share(ttft_s: np.ndarray, e2el_s: np.ndarray) -> float:
    """The share of the mean measured latency spent after the first token (0 where there is no latency)."""
    mean = float(np.mean(e2el_s))
    return max(0.0, 1.0 - float(np.mean(ttft_s)) / mean) if mean > 0 else 0.0


def tpot_term(measured_tpot_s: float | None, simulated_tpot_s: float | None, share: float) -> float:
    """The TPOT miss beyond the tolerance, as a share of the mean latency (``share``: ``decode_share``)."""
    return share * max(0.0, tpot_miss(measured_tpot_s, simulated_tpot_s) - TPOT_TOLERANCE)


__all__ = ["FACTOR_RANGE", "MAX_SIMULATIONS", "TPOT_TOLERANCE", "decode_share", "fit_speed_factor", "tpot_miss",
           "tpot_term"]
