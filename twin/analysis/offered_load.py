"""Offered load against served load: whether a run asked more of the server than it sustains.

A server that completes requests more slowly than they arrive is overloaded before any memory or scheduler
limit is to blame: its queue grows for as long as the run lasts, and whatever fills (the running batch, the KV
pool) fills *because* of it. The dashboard's "Binding limit" line and `twin run`'s "What limits" lines say it
in the same sentence, from ``load_doc``.

Overloaded: served below ``OVERLOAD_RATIO`` of offered while the diagnosis sees a saturated server (requests
queued for a meaningful share of the busy time, `twin.analysis.causes.QUEUED_SHARE`). The offered rate is the
scenario's open-loop ``rate_per_s`` (``offered_rate``); a closed loop or a trace offers none, and then nothing
is said.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from twin.results import numbers

OVERLOAD_RATIO = 0.95      # served below 95 % of offered (with a queue): the offered load is the binding limit


def offered_rate(body: Any) -> float | None:
    """The open-loop arrival rate asked of the server (req/s; ``None`` for closed loop or a trace)."""
    arrivals = getattr(getattr(body, "workload", None), "arrivals", None)
    rate = getattr(arrivals, "rate_per_s", None)
    return float(rate) if rate is not None and math.isfinite(float(rate)) else None


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


__all__ = ["OVERLOAD_RATIO", "load_doc", "offered_rate", "overload_sentence", "overloaded"]
