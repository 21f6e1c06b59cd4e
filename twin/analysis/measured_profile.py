"""What measured per-request results say on their own, before any twin is fitted to them.

From arrival, first-token and finish times alone: the TTFT floor (a prefill with no queue), the service time, how
many requests are in flight and how many decode (between first token and finish) over time, how long requests
queue and whether the decoding count sits at a ceiling meanwhile (the signature of a concurrency cap), the TTFT
"staircase" (waits at 1, 2, 3 ... times the service time, a cap's worth of requests per step, when a burst meets a
cap), the opening burst, and mid-stream stalls in the inter-token latencies (a preempted request waits and
recomputes). The thresholds below say when a share counts; ``diagnose`` reads the resulting ``Profile``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from twin.analysis.measured import Measured

QUEUED_SHARE = 0.2        # requests queue for at least this share of the measured span
PINNED_SHARE = 0.6        # ... while the decoding count sits at its ceiling this share of that time
WAVE_TOLERANCE = 0.15     # a TTFT within this many service times of a multiple of it is "on a step"
STALL_FACTOR = 10.0       # an inter-token gap this many times the median ITL is a stall


def _counts(starts: np.ndarray, ends: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """How many intervals [start, end) hold at each grid time (an end at t does not count at t)."""
    s = np.sort(starts)
    e = np.sort(ends)
    return np.searchsorted(s, grid, side="right") - np.searchsorted(e, grid, side="right")


@dataclass
class Profile:
    """What the measurements say on their own."""

    span_s: float
    ttft_floor_s: float            # the fastest TTFT: prefill with no queue
    service_s: float               # a request's time on the server: floor + median decode time
    max_in_flight: int
    max_decoding: int
    queued_share: float            # share of the span with at least one request queued
    pinned_share: float            # share of the queued time with max_decoding requests decoding
    mean_decoding_when_queued: float
    mean_queued: float
    waves: dict[int, int]          # TTFT level (multiples of the service time) -> requests on it
    on_step_share: float           # share of requests whose TTFT is on a level
    burst_size: int                # requests in the opening burst
    burst_fast: int                # ... of which were served at once
    stall_requests: int            # requests with a mid-stream stall
    max_stall_s: float
    median_itl_s: float | None
    median_tpot_s: float | None
    grid: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0))
    in_flight: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0))
    decoding: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0))

    @property
    def staircase(self) -> bool:
        return self.on_step_share >= 0.8 and any(k >= 1 for k in self.waves) and self.queued_share >= QUEUED_SHARE

    @property
    def cap_evidence(self) -> bool:
        return (self.queued_share >= QUEUED_SHARE and self.pinned_share >= PINNED_SHARE
                and self.max_decoding < self.max_in_flight)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in ("grid", "in_flight", "decoding")} | {
            "staircase": self.staircase, "cap_evidence": self.cap_evidence}


def profile(m: Measured) -> Profile:
    arrival, first, finish = m.arrival_s, m.first_token_s, m.finish_s
    floor = float(m.ttft_s.min())
    decode = m.e2el_s - m.ttft_s
    service = floor + float(np.median(decode))
    # queued: waiting beyond the fastest TTFT (the prefill itself is not queueing)
    waited = m.ttft_s > 2 * floor + 0.05 * service
    q_start, q_end = arrival[waited] + floor, first[waited]
    grid = np.unique(np.concatenate([arrival, first, finish, q_start]))
    in_flight = _counts(arrival, finish, grid)
    decoding = _counts(first, finish, grid)
    queued = _counts(q_start, q_end, grid) if waited.any() else np.zeros(grid.size, np.int64)
    dt = np.diff(grid)
    span = float(grid[-1] - grid[0]) if grid.size > 1 else 0.0
    qmask = queued[:-1] > 0
    q_time = float(dt[qmask].sum())
    max_dec = int(decoding.max()) if decoding.size else 0
    pinned = float(dt[qmask & (decoding[:-1] >= max_dec)].sum()) / q_time if q_time > 0 else 0.0
    mean_dec_q = float((decoding[:-1] * dt)[qmask].sum() / q_time) if q_time > 0 else 0.0
    mean_q = float((queued[:-1] * dt).sum() / span) if span > 0 else 0.0
    k = (m.ttft_s - floor) / service if service > 0 else np.zeros(len(m))
    near = np.abs(k - np.round(k)) <= WAVE_TOLERANCE
    waves = dict(sorted(Counter(int(x) for x in np.round(k[near])).items()))
    burst = arrival <= arrival.min() + 0.1 * service
    burst_fast = int(((k < 0.5) & burst).sum())
    stall_req, max_stall, med_itl = 0, 0.0, None
    if m.itls:
        flat = np.concatenate([x for x in m.itls if x.size] or [np.empty(0)])
        flat = flat[flat > 0]
        if flat.size:
            med_itl = float(np.median(flat))
            limit = max(STALL_FACTOR * med_itl, 2 * floor)
            stalls = [float(x.max()) for x in m.itls if x.size and x.max() > limit]
            stall_req = len(stalls)
            max_stall = max(stalls, default=0.0)
    tpot = m.tpot_s
    return Profile(span, floor, service, int(in_flight.max()), max_dec, q_time / span if span > 0 else 0.0, pinned,
                   mean_dec_q, mean_q, waves, float(near.mean()), int(burst.sum()), burst_fast, stall_req,
                   max_stall, med_itl, float(np.median(tpot)) if tpot.size else None, grid, in_flight, decoding)


__all__ = ["PINNED_SHARE", "QUEUED_SHARE", "STALL_FACTOR", "WAVE_TOLERANCE", "Profile", "profile"]
