"""Landing the SimPy clock on a time computed elsewhere, to the last bit."""

from __future__ import annotations

import math


def delay_landing_on(now: float, end: float) -> float | None:
    """A delay ``d`` with ``now + d == end`` in floating point (SimPy schedules a timeout at ``now + delay``),
    or None should rounding make that impossible. ``end - now`` is off by an ulp now and then; a few nudges
    find one."""
    delay = end - now
    for _ in range(4):
        reached = now + delay
        if reached == end:
            return delay
        delay = math.nextafter(delay, math.inf if reached < end else -math.inf)
    return None
