"""Run one simulation: traffic in (open-loop request specs or closed-loop users), a SimResult out."""

from __future__ import annotations

import heapq
import operator
import time
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Protocol

import simpy

from twin.cost.base import CostModel
from twin.sim.clock import delay_landing_on
from twin.sim.drive import closed_loop_user, closed_loop_users, run_until_drained
from twin.sim.kv_load_clock import offload_summary
from twin.sim.request_path import PathDraws
from twin.sim.replica import Replica, Router, RoundRobinRouter, Speculator
from twin.results.token_summary import record_factory
from twin.results.step_summary import new_step_log
from twin.results.sim_result import SimResult
from twin.results.records import ABORTED
from twin.results.request_log import close_unfinished
from twin.core.request import Request
from twin.core.scheduler_base import SchedulerBase
from twin.workload.spec import RequestSpec
from twin.workload.sharing import SegmentSharing


class ClosedLoop(Protocol):
    concurrency: int

    def next_request(self, user_index: int, now_s: float) -> RequestSpec | None: ...


ProgressFn = Callable[[float], None]


def simulate(
    traffic: Sequence[RequestSpec] | ClosedLoop,
    make_scheduler: Callable[[int], SchedulerBase],
    make_cost_model: Callable[[int], CostModel],
    *,
    num_replicas: int = 1,
    router: Router | None = None,
    make_speculator: Callable[[int], Speculator] | None = None,
    max_time_s: float | None = None,
    progress: ProgressFn | None = None,
    config_summary: dict | None = None,
    fast_path: bool = True,
    seed: int = 0,
    token_times: str = "full",
    steps_mode: str = "full",
    private_blocks: bool = True,
    one_event_arrivals: bool = True,
) -> SimResult:
    """Replay ``traffic`` through ``num_replicas`` replicas until every request is done (or ``max_time_s``).

    ``progress`` is called with the fraction of requests finished, now and then. ``seed`` drives the request
    path's random part (``twin.sim.request_path``), drawn only when a cost model has one.
    ``token_times`` ``"summary"`` keeps each request's first and last token times and one run-wide ITL summary
    instead of every token's time (``twin.results.token_summary``; ``records.token_times`` of a scenario).
    ``steps_mode`` ``"aggregate"`` keeps per-replica, per-second sums instead of one row per step
    (``twin.results.step_summary``; ``records.steps``).
    ``private_blocks`` lets the prefix cache skip hashing blocks no other request of an open-loop ``traffic``
    can name (``twin.workload.sharing``); results are the same either way.
    ``one_event_arrivals`` lets open-loop requests that nothing but the request path awaits at their arrival
    (``open_loop_at_hand_over``) cost one SimPy event instead of two; results are the same either way.
    """
    new_record = record_factory(token_times)
    wall_start = time.perf_counter()
    env = simpy.Environment()
    steps = new_step_log(steps_mode)
    records = []
    router = router or RoundRobinRouter()
    closed = not isinstance(traffic, Sequence)
    total = None if closed else len(traffic)
    done = [0]
    waiters: dict[int, simpy.Event] = {}

    drained = env.event()
    arrivals_over = [False]
    on_request_path = [0]         # requests past their arrival, not yet at a replica's scheduler

    def check_drained() -> None:
        if (arrivals_over[0] and not drained.triggered and not on_request_path[0]
                and not any(r.num_outstanding for r in replicas)):
            drained.succeed()

    def on_finish(request: Request) -> None:
        done[0] += 1
        if progress is not None and total and done[0] % 500 == 0:
            progress(done[0] / total)
        event = waiters.pop(id(request), None)
        if event is not None:
            event.succeed()
        elif arrivals_over[0]:
            check_drained()

    replicas = [
        Replica(env, i, make_scheduler(i), make_cost_model(i), steps,
                make_speculator(i) if make_speculator else None, on_finish, fast_path=fast_path,
                finish_wakes_anyone=lambda: closed or arrivals_over[0])
        for i in range(num_replicas)
    ]

    def route_and_draw_path(request: Request) -> tuple[Replica, float]:
        """The request's replica and its time down the server's request path (HTTP, tokenisation, hand-off to
        the engine core: the cost model's ``request_path_s`` and its random part), drawn in dispatch order."""
        replica = replicas[router.route(request, replicas)]
        delay = replica.request_path_s
        if jitter_draws is not None:
            delay += replica.request_path_jitter_s * jitter_draws.next()
        return replica, delay

    def submit_after_request_path(request: Request) -> None:
        """Hand a request to its replica once it has crossed the request path; its arrival time stays the
        client's."""
        replica, delay = route_and_draw_path(request)
        if delay <= 0:
            replica.submit(request)
            return
        on_request_path[0] += 1
        en_route[id(request)] = request

        def arrive(_event) -> None:
            on_request_path[0] -= 1
            if en_route.pop(id(request), None) is None:
                check_drained()  # the client gave up while the request was on its way
                return
            replica.submit(request)

        env.timeout(delay).callbacks.append(arrive)

    jitter_draws = PathDraws(seed) if any(r.request_path_jitter_s > 0 for r in replicas) else None

    en_route: dict[int, Request] = {}   # on the request path, by id

    def start_timeout(request: Request, timeout_s: float | None) -> None:
        """The client aborts the request ``timeout_s`` after sending it unless it finished by then."""
        if timeout_s is None:
            return

        def expire(_event) -> None:
            record = request.client_data
            if record.finish_s is not None:
                return
            if en_route.pop(id(request), None) is not None:
                record.status, record.finish_s, record.num_cached_tokens = ABORTED, env.now, -1
                on_finish(request)
                return
            replicas[record.replica].abort(request)

        env.timeout(timeout_s).callbacks.append(expire)

    sharing = SegmentSharing(traffic) if private_blocks and not closed else None

    def make_request(spec: RequestSpec) -> Request:
        """The request of an open-loop spec, with its record."""
        request = spec.make_request(private_from_token=sharing.private_from_token(spec) if sharing else None)
        records.append(new_record(request))
        return request

    def dispatch(spec: RequestSpec) -> Request:
        request = make_request(spec)
        start_timeout(request, spec.timeout_s)
        submit_after_request_path(request)
        return request

    def open_loop(specs: Sequence[RequestSpec]):
        for spec in specs:
            delay = spec.arrival_s - env.now
            if delay > 0:
                yield env.timeout(delay)
            dispatch(spec)

    def open_loop_at_hand_over(specs: Sequence[RequestSpec]):
        """``open_loop`` with one event per request instead of two, where nothing happens at an arrival but
        the start of the request's trip down the request path (a router that reads no replica state, no client
        timeout, no time cut). Requests are made, routed and drawn their path delay in arrival order, at the
        times ``open_loop`` would have woken (followed here without waking), and handed over at exactly
        the times its path timeouts would end, so every result is the same; each event less is a replica's run
        of decode steps that need not end."""
        pending: list[tuple[float, int, Request, Replica]] = []   # by hand-over time, then arrival order
        arrived_s = env.now       # where open_loop's clock would stand
        i, n = 0, len(specs)
        while i < n or pending:
            # every request arrived by the earliest hand-over pending could be handed over before it
            while i < n and (not pending or specs[i].arrival_s <= pending[0][0]):
                spec = specs[i]
                delay = spec.arrival_s - arrived_s
                if delay > 0:
                    arrived_s = arrived_s + delay
                request = make_request(spec)
                replica, path_s = route_and_draw_path(request)
                heapq.heappush(pending, (arrived_s + path_s if path_s > 0 else arrived_s, i, request, replica))
                i += 1
            hand_over_s, _, request, replica = heapq.heappop(pending)
            if hand_over_s > env.now:
                landing = delay_landing_on(env.now, hand_over_s)
                yield env.timeout(hand_over_s - env.now if landing is None else landing)
            replica.submit(request)

    if closed:
        drivers = [env.process(closed_loop_user(env, traffic, u, dispatch, waiters))
                   for u in range(closed_loop_users(traffic))]
    elif (one_event_arrivals and max_time_s is None
          and (num_replicas == 1 or not getattr(router, "reads_replica_state", True))
          and all(spec.timeout_s is None for spec in traffic)):
        drivers = [env.process(open_loop_at_hand_over(traffic))]
    else:
        drivers = [env.process(open_loop(traffic))]

    def arrivals_over_now() -> None:
        arrivals_over[0] = True
        check_drained()

    run_until_drained(env, drivers, arrivals_over_now, drained, max_time_s)
    for replica in replicas:
        replica.close()
    close_unfinished(en_route.values())     # still on their request path when the run stopped
    kv = [r.scheduler.kv_cache_manager for r in replicas]
    sort_by_arrival(records)
    if any(hasattr(m, "offload_stats") for m in kv):
        config_summary = {**(config_summary or {}), "kv_offload": offload_summary(kv)}
    return SimResult(
        requests=records, steps=steps, config=config_summary or {}, sim_start_s=0.0, sim_end_s=env.now,
        prefix_cache_hit_tokens=sum(m.num_hit_tokens for m in kv),
        prefix_cache_query_tokens=sum(m.num_query_tokens for m in kv),
        num_preemptions=sum(r.scheduler.num_preemptions for r in replicas),
        num_replicas=num_replicas, wall_time_s=time.perf_counter() - wall_start,
    )


def sort_by_arrival(records: list) -> None:
    """Sort records by arrival time, ties by request id as text. Open-loop records are made in arrival order:
    when no two share an arrival time they are sorted already, and the keyed sort (a tuple and a string per
    record) is skipped."""
    arrivals = [r.arrival_s for r in records]
    if not all(map(operator.lt, arrivals, islice(arrivals, 1, None))):
        records.sort(key=lambda r: (r.arrival_s, str(r.request_id)))
