"""A candidate's capacity: ``bisect_scale`` brackets the largest passing arrival-rate scale of one replication
(doubling or halving, then geometric bisection) into a ``Bracket``; ``Capacity`` gathers the brackets of every
replication with a status (measured, pruned, unbounded, never, error)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from twin.plan.executor import Search

MAX_DOUBLINGS = 12   # a rate 4096x the start passing: 'unbounded'
MAX_HALVINGS = 8     # 1/256 of the start still failing: 'never' (the SLO is out of reach even unloaded)


@dataclass
class Bracket:
    """``lo`` passes, ``hi`` fails (scales); ``lo`` None: fails even at the smallest scale tried; ``hi``
    None: passes at the largest. ``trail`` lists every (scale, passed) evaluated, in order."""

    lo: float | None
    hi: float | None
    lo_result: dict[str, Any] | None = None
    hi_result: dict[str, Any] | None = None
    trail: list[tuple[float, bool]] = field(default_factory=list)
    error: str | None = None


def bisect_scale(job_at, *, start: float = 1.0, rel_tol: float = 0.05, lo: float | None = None,
                 hi: float | None = None, lo_result=None, hi_result=None) -> Search:
    """Find ``lo < hi`` with ``job_at(lo)`` passing, ``job_at(hi)`` failing and ``hi / lo <= 1 + rel_tol``:
    doubling (or halving) from ``start`` until the rate is bracketed, then geometric bisection. ``job_at``
    maps a scale to a ``SimJob`` whose result carries ``passed``."""
    trail: list[tuple[float, bool]] = []
    if lo is not None:
        trail.append((lo, True))
    if hi is not None:
        trail.append((hi, False))

    def probe(scale: float):
        (res,) = yield [job_at(scale)]
        if not res.get("ok"):
            return None, res
        ok = bool(res.get("passed"))
        trail.append((scale, ok))
        return ok, res

    if lo is None and hi is None:
        ok, res = yield from probe(start)
        if ok is None:
            return Bracket(None, None, trail=trail, error=res.get("error"))
        if ok:
            lo, lo_result = start, res
        else:
            hi, hi_result = start, res
    for _ in range(MAX_DOUBLINGS):
        if hi is not None:
            break
        ok, res = yield from probe(lo * 2)
        if ok is None:
            return Bracket(lo, None, lo_result, trail=trail, error=res.get("error"))
        if ok:
            lo, lo_result = lo * 2, res
        else:
            hi, hi_result = lo * 2, res
    else:
        return Bracket(lo, None, lo_result, trail=trail)
    for _ in range(MAX_HALVINGS):
        if lo is not None:
            break
        ok, res = yield from probe(hi / 2)
        if ok is None:
            return Bracket(None, hi, None, hi_result, trail=trail, error=res.get("error"))
        if ok:
            lo, lo_result = hi / 2, res
        else:
            hi, hi_result = hi / 2, res
    else:
        return Bracket(None, hi, None, hi_result, trail=trail)
    while hi / lo > 1 + rel_tol:
        mid = math.sqrt(lo * hi)
        ok, res = yield from probe(mid)
        if ok is None:
            return Bracket(lo, hi, lo_result, hi_result, trail=trail, error=res.get("error"))
        if ok:
            lo, lo_result = mid, res
        else:
            hi, hi_result = mid, res
    return Bracket(lo, hi, lo_result, hi_result, trail=trail)


@dataclass
class Capacity:
    brackets: list[Bracket]
    status: str                      # measured | pruned | unbounded | never | error
    note: str = ""

    def scales(self) -> list[float]:
        return [b.lo for b in self.brackets if b.lo is not None]
