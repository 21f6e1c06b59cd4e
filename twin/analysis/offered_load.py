"""Offered load against served load: whether a run asked more of the server than it sustains.

A server that completes requests more slowly than they arrive is overloaded before any memory or scheduler
limit is to blame: its queue grows for as long as the run lasts, and whatever fills (the running batch, the KV
pool) fills *because* of it. The dashboard's "Binding limit" line and `twin run`'s "What limits" lines say it
in the same sentence, from ``load_doc``.

Overloaded: served below ``OVERLOAD_RATIO`` of offered while the diagnosis sees a saturated server (requests
queued for a meaningful share of the busy time, `twin.analysis.causes.QUEUED_SHARE`).

Offered load, one definition for `twin run`, `twin compare`, the dashboard and the planner (``offered_rate``):
requests the clients send whatever the server does. Single requests (synthetic classes or a trace's rows) under
an arrival process of one rate offer its ``rate_per_s``; any other open loop (a trace replayed at its own
timestamps, piecewise or ramping rates, multi-turn sessions, whose turns are due at drawn gaps) offers its
requests over the span they arrive in (``arrival_rate``). A closed loop offers none: its users wait for
answers, so its rate is the server's. A run's arrivals are its request records' (``request_arrivals``); under a
``max_concurrency`` cap they are when a slot freed, the server's pace, so such a run offers its nominal rate or
none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from twin.results import numbers

OVERLOAD_RATIO = 0.95      # served below 95 % of offered (with a queue): the offered load is the binding limit


def offered_rate(body: Any, arrivals_s: Sequence[float] | None = None) -> float | None:
    """Requests per second asked of the server (see the module's words): the nominal ``rate_per_s`` of single
    requests under one arrival rate, else ``arrival_rate`` of the arrival times given (the run's, or the
    planner's drawn requests); ``None`` for a closed loop, without arrival times where they are needed, or where
    they tell no rate."""
    wl = getattr(body, "workload", None)
    if wl is None or wl.closed_loop:
        return None
    arr = wl.arrivals
    if arr is not None and not any(c.multi_turn for c in wl.classes):
        rate = getattr(arr, "rate_per_s", None)
        if rate is not None and math.isfinite(float(rate)):
            return float(rate)
    return None if arrivals_s is None else arrival_rate(wl, arrivals_s)


def arrival_rate(wl: Any, arrivals_s: Sequence[float]) -> float | None:
    """Requests over the span they arrive in: ``duration_s`` for synthetic classes under one arrival process
    (not piecewise), a trace's ``window_s / time_scale`` where the window alone cuts its replay, else first to
    last arrival ((n - 1) gaps); ``None`` for fewer than 2 requests or all at once."""
    n = len(arrivals_s)
    if n < 2:
        return None
    arr, trace = wl.arrivals, wl.trace
    if wl.classes and wl.duration_s is not None and arr is not None and getattr(arr, "process", "") != "piecewise":
        return n / wl.duration_s
    if trace is not None and arr is None and trace.window_s is not None and wl.num_requests is None \
            and wl.duration_s is None and trace.max_requests is None:
        return n / (trace.window_s / trace.time_scale)
    first, last = min(arrivals_s), max(arrivals_s)
    return (n - 1) / (last - first) if last > first else None


def request_arrivals(body: Any, result: Any) -> list[float] | None:
    """A run's arrival times as its clients offered them (its request records'); ``None`` under a
    ``max_concurrency`` cap, where a record's arrival is when a slot freed."""
    arr = getattr(getattr(body, "workload", None), "arrivals", None)
    if getattr(arr, "max_concurrency", None) is not None:
        return None
    return [r.arrival_s for r in result.requests]


def overloaded(offered: float | None, served: float | None, saturated: bool) -> bool:
    """Served below `OVERLOAD_RATIO` of a known offered rate while requests queue."""
    return bool(offered and served is not None and served < OVERLOAD_RATIO * offered and saturated)


def overload_sentence(offered: float, served: float, diagnosis: Any = None) -> str:
    """``offered load (12 req/s) above what this server sustains (8.1 req/s); under it, KV-cache capacity``:
    the offered load first, then the limit the diagnosis names (where one binds; with the pool it is in, for
    prefill/decode pools)."""
    tail = ""
    if diagnosis is not None and diagnosis.binding:
        pool = diagnosis.stats.get("pool")
        tail = f"; under it, {diagnosis.limit_name}" + (f" ({pool} pool)" if pool else "")
    return (f"offered load ({numbers.with_unit(offered, 'req/s')}) above what this server sustains "
            f"({numbers.with_unit(served, 'req/s')}){tail}")


def load_doc(offered: float | None, metrics: Mapping[str, Any], diagnosis: Any) -> dict[str, Any]:
    """``twin.limits.load``: ``offered_rate_per_s`` (``None`` without an open-loop rate),
    ``served_rate_per_s`` (completed requests per second), ``overloaded`` and, when overloaded, ``sentence``
    (else ``None``)."""
    served = metrics.get("request_throughput")
    over = overloaded(offered, served, bool(diagnosis is not None and diagnosis.saturated))
    return {"offered_rate_per_s": offered, "served_rate_per_s": served, "overloaded": over,
            "sentence": overload_sentence(offered, served, diagnosis) if over else None}


__all__ = ["OVERLOAD_RATIO", "arrival_rate", "load_doc", "offered_rate", "overload_sentence", "overloaded",
           "request_arrivals"]
