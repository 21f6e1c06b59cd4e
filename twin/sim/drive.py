"""Running a simulation's clock: the closed loop's users (how many, and each one's loop), and running until the arrivals are over and
every request is done (or the time cap)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import simpy

from twin.sim.gc_pacing import paced_gc


def closed_loop_users(traffic: Any) -> int:
    """Users to start: one that can never get a request is not started (a cap of 10**6 slots over 100 requests)."""
    return min(traffic.concurrency, getattr(traffic, "max_users", None) or traffic.concurrency)


def closed_loop_user(env: simpy.Environment, traffic: Any, index: int, dispatch: Callable[[Any], Any],
                     waiters: dict[int, simpy.Event]):
    """User ``index`` of a closed loop: sends its next request (``dispatch(spec)`` returns the request), waits
    for it to finish (the event ``waiters`` holds under the request's id), until the traffic has none left."""
    while True:
        spec = traffic.next_request(index, env.now)
        if spec is None:
            return
        if spec.arrival_s > env.now:
            yield env.timeout(spec.arrival_s - env.now)
        event = env.event()
        waiters[id(dispatch(spec))] = event
        yield event


def run_until_drained(env: simpy.Environment, drivers: Sequence[simpy.Process], on_arrivals_over: Callable[[], None],
                      drained: simpy.Event, max_time_s: float | None) -> None:
    """Run until ``drained`` fires (or ``max_time_s``); ``on_arrivals_over`` is called once every driver is done."""

    def arrivals_end():
        yield env.all_of(drivers)
        on_arrivals_over()

    env.process(arrivals_end())
    with paced_gc():
        env.run(until=drained if max_time_s is None else env.any_of([drained, env.timeout(max_time_s)]))
