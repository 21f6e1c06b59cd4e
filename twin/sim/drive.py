"""Running a simulation's clock: how many closed-loop users to start, and running until the arrivals are over and
every request is done (or the time cap)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import simpy

from twin.sim.gc_pacing import paced_gc


def closed_loop_users(traffic: Any) -> int:
    """Users to start: one that can never get a request is not started (a cap of 10**6 slots over 100 requests)."""
    return min(traffic.concurrency, getattr(traffic, "max_users", None) or traffic.concurrency)


def run_until_drained(env: simpy.Environment, drivers: Sequence[simpy.Process], on_arrivals_over: Callable[[], None],
                      drained: simpy.Event, max_time_s: float | None) -> None:
    """Run until ``drained`` fires (or ``max_time_s``); ``on_arrivals_over`` is called once every driver is done."""

    def arrivals_end():
        yield env.all_of(drivers)
        on_arrivals_over()

    env.process(arrivals_end())
    with paced_gc():
        env.run(until=drained if max_time_s is None else env.any_of([drained, env.timeout(max_time_s)]))
