"""The size limits of one run, stated once: a workload may ask for at most ``MAX_REQUESTS`` requests (its
rate times its duration, its ``num_requests``, or a trace's rows), so no input can exhaust memory or time
without an error that names the limit. ``expected_requests`` estimates a workload's size before it runs."""

from __future__ import annotations

import math
from typing import Any

from twin.errors import TwinInputError

MAX_REQUESTS = 1_000_000          # requests in one run (the Azure conversation hour is 19,366)


def expected_requests(wl: Any) -> int | None:
    """About how many requests workload ``wl`` (a ``WorkloadConfig``) asks for before any multi-turn
    follow-ups (``None``: a trace, or no way to tell before running)."""
    if wl.trace is not None:
        return wl.trace.max_requests
    if wl.num_requests is not None and wl.duration_s is None:
        return wl.num_requests
    arr = wl.arrivals
    rate = getattr(arr, "rate_per_s", None)
    schedule = getattr(arr, "schedule", None)
    if schedule:
        rate = max(float(p.rate_per_s) for p in schedule)
    if rate is None or wl.duration_s is None or not math.isfinite(float(rate)):
        return wl.num_requests
    n = int(min(float(rate) * float(wl.duration_s), 1e18))
    return min(n, wl.num_requests) if wl.num_requests is not None else n


def too_many_requests(n: int, limit: int = MAX_REQUESTS, where: str = "workload") -> TwinInputError:
    return TwinInputError(f"{where}: more than {limit:,} requests in one run (lower num_requests, duration_s or "
                          f"the rate; for a trace, max_requests or window_s); at most {limit:,}")


def check_request_count(n: int, limit: int = MAX_REQUESTS, where: str = "workload") -> None:
    """Raised while a workload is generated, for what cannot be told up front (multi-turn sessions, closed
    loops, traces)."""
    if n > limit:
        raise too_many_requests(n, limit, where)
