"""Simulating prefill/decode disaggregation: two pools of engines (``twin.sim.replica.Replica``, each the shared
engine core with its own scheduler, KV pool and cost model) joined by a KV link.

A request's path, as vLLM's disaggregated serving runs it (a proxy in front of ``kv_producer`` and
``kv_consumer`` instances):

1. it arrives, crosses the prefill engine's request path (the cost model's ``request_path_s``) and queues at a
   prefill engine (the prefill pool's router) as a request with ``max_tokens = 1``: the prefill computes the
   prompt's KV (its prefix cache, chunking and batching as any engine's);
2. that step leaves its KV blocks held (vLLM's ``delay_free_blocks``) until the decode engine has read them, or
   until ``abort_request_timeout_s`` (vLLM's ``VLLM_NIXL_ABORT_REQUEST_TIMEOUT``); the decode pool's router picks a
   decode engine now and the request joins its queue with ``load_kv_async``;
3. the decode scheduler, when it reaches the request, allocates its blocks (no token budget, nothing computed;
   WAITING_FOR_REMOTE_KVS) and the transfer starts (``on_load_start``); no room: the request waits at the queue
   head, the transfer unstarted. The KV (``prompt tokens x kv_bytes_per_token``) holds the prefill engine's
   outbound link and the decode engine's inbound link, first come first served, for ``KvLink.exposed_s``;
4. at its end the prefill engine frees the blocks and the decode request counts ``prompt - 1`` tokens computed
   (the last prompt token is recomputed to produce logits) and is scheduled at the decode engine's next step,
   whose end emits the first token, so TTFT = request path + queueing + prefill + wait for the decode engine's
   schedule + link queueing + transfer + decode queueing + first decode step.

Not modelled (stated): the whole prompt's KV moves even where the decode engine's prefix cache holds part of it;
a read after the hold expired succeeds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

import simpy

from twin.core.request import Request, RequestStatus
from twin.core.schedulers import make_scheduler
from twin.deploy.pd_metrics import pd_metrics
from twin.deploy.pd_pools import PdDeployment
from twin.errors import TwinInputError
from twin.results.records import REJECTED, RequestRecord
from twin.results.request_log import close_record, close_unfinished
from twin.results.sim_result import SimResult
from twin.results.step_summary import new_step_log
from twin.results.token_summary import record_factory
from twin.scenario import ScenarioBody
from twin.sim.deployment import make_router
from twin.sim.drive import closed_loop_user, closed_loop_users, run_until_drained
from twin.sim.kv_load_clock import offload_summary
from twin.sim.replica import Replica
from twin.sim.request_path import PathDraws
from twin.sim.simulate import sort_by_arrival
from twin.workload.generate import build_workload
from twin.workload.sharing import SegmentSharing


class _LastStep:
    """A cost model that remembers its last step's duration (layer-wise transfer hides behind it)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.last_s = 0.0

    def step_time_s(self, out: Any) -> float:
        self.last_s = dt = self.inner.step_time_s(out)
        return dt

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class PdTransfers:
    """Per-request KV transfers: bytes, link queueing and transfer seconds, engines, the request's id (columns,
    in the order transfers ended)."""

    def __init__(self) -> None:
        self.bytes: list[int] = []
        self.wait_s: list[float] = []
        self.transfer_s: list[float] = []
        self.prefill_engine: list[int] = []
        self.decode_engine: list[int] = []
        self.request_id: list[Any] = []
        self.alloc_wait_s: list[float] = []     # from the prefill's end until the decode engine allocated
        self.num_expired = 0                    # holds the prefill engine released at its abort timeout

    def add(self, num_bytes: int, wait_s: float, transfer_s: float, prefill: int, decode: int,
            alloc_wait_s: float = 0.0, request_id: Any = None) -> None:
        self.alloc_wait_s.append(alloc_wait_s)
        self.bytes.append(num_bytes)
        self.wait_s.append(wait_s)
        self.transfer_s.append(transfer_s)
        self.prefill_engine.append(prefill)
        self.decode_engine.append(decode)
        self.request_id.append(request_id)


def simulate_pd(body: ScenarioBody, pd: PdDeployment, *, seed: int, base_dir: Path | None = None,
                summary: dict[str, Any] | None = None,
                progress: Callable[[float], None] | None = None) -> SimResult:
    """One run of ``body``'s traffic on the P/D deployment ``pd``."""
    wall_start = time.perf_counter()
    traffic = build_workload(body.workload, seed, base_dir=base_dir)
    closed = not isinstance(traffic, Sequence)
    if not closed and any(s.timeout_s is not None for s in traffic):
        raise TwinInputError("workload: client timeouts with disaggregation are not modelled; leave timeout_s out")
    new_record = record_factory(body.records.token_times)
    new_leg_record = record_factory("full")
    env = simpy.Environment()
    steps = new_step_log(body.records.steps)
    records: list[RequestRecord] = []
    leg_records: list[RequestRecord] = []
    clients: list[Request] = []
    legs: list[Request] = []
    transfers = PdTransfers()
    link = pd.link
    kv_bpt = pd.kv_bytes_per_token
    dep_p, dep_d = pd.deployments["prefill"], pd.deployments["decode"]
    n_p, n_d = pd.engines["prefill"], pd.engines["decode"]
    leg_client: dict[int, Request] = {}
    leg_cached: dict[int, int] = {}           # client id -> the prefill's prefix-cache hit tokens
    done = [0]
    outstanding = [0]
    arrivals_over = [False]
    drained = env.event()
    waiters: dict[int, simpy.Event] = {}
    total = None if closed else len(traffic)

    def check_drained() -> None:
        if arrivals_over[0] and not outstanding[0] and not drained.triggered:
            drained.succeed()

    def client_done(client: Request) -> None:
        done[0] += 1
        outstanding[0] -= 1
        if progress is not None and total and done[0] % 500 == 0:
            progress(done[0] / total)
        event = waiters.pop(id(client), None)
        if event is not None:
            event.succeed()
        check_drained()

    def prefill_done(leg: Request) -> None:
        client = leg_client.pop(id(leg))
        leg_rec = leg.client_data
        if leg_rec.status == REJECTED:
            client.reject_reason = leg.reject_reason
            close_record(client, env.now, REJECTED)
            client_done(client)
            return
        leg_cached[id(client)] = leg.num_cached_tokens
        engine = leg_rec.replica
        last_s = prefill[engine].cost_model.last_s if link.layerwise else 0.0
        # the leg's blocks stay held on the prefill engine until the decode engine has read them (vLLM's
        # delay_free_blocks), or until the producer's abort timeout
        sending[id(client)] = (leg, engine, last_s, env.now)
        env.timeout(abort_timeout_s).callbacks.append(lambda _e: release(leg, engine, expired=True))
        # the decode engine takes the request now; its scheduler allocates the blocks and starts the pull
        client.load_kv_async = True
        decode[decode_router.route(client, decode)].submit(client)
        if client.status == RequestStatus.FINISHED_REJECTED:    # the decode engine refused it: nothing to read
            del sending[id(client)]
            release(leg, engine)

    def release(leg: Request, engine: int, expired: bool = False) -> None:
        if id(leg) in released:
            return
        released.add(id(leg))
        prefill[engine].scheduler.kv_cache_manager.free(leg)
        prefill[engine].wake()           # a request its pool could not hold may fit now
        if expired:
            num_expired[0] += 1

    def load_starter(d: int) -> Callable[[Request], None]:
        return lambda client: env.process(transfer(client, d))

    def transfer(client: Request, d: int):
        leg, p_engine, last_step_s, finished_s = sending.pop(id(client))
        num_bytes = client.num_prompt_tokens * kv_bpt
        start = env.now
        with out_links[p_engine].request() as out_req:
            yield out_req
            with in_links[d].request() as in_req:
                yield in_req
                begun = env.now
                dt = link.exposed_s(num_bytes, last_step_s)
                yield env.timeout(dt)
        transfers.add(num_bytes, begun - start, dt, p_engine, n_p + d, start - finished_s, client.request_id)
        release(leg, p_engine)           # the producer frees on the decode's notification (finished_sending)
        decode[d].scheduler.finish_remote_load(client)
        decode[d].wake()

    sending: dict[int, tuple[Request, int, float, float]] = {}   # client id -> (leg, engine, last step, end)
    released: set[int] = set()
    num_expired = [0]
    abort_timeout_s = pd.config.abort_request_timeout_s
    prefill = [Replica(env, i, make_scheduler(dep_p.scheduler_config, dep_p.num_gpu_blocks),
                       _LastStep(dep_p.cost_model_factory()) if link.layerwise else dep_p.cost_model_factory(),
                       steps, None, prefill_done, fast_path=False)
               for i in range(n_p)]
    decode = [Replica(env, n_p + j, make_scheduler(dep_d.scheduler_config, dep_d.num_gpu_blocks),
                      dep_d.cost_model_factory(), steps, None, client_done, fast_path=True,
                      finish_wakes_anyone=lambda: closed or arrivals_over[0])
              for j in range(n_d)]
    for replica in prefill:
        replica.scheduler.delay_free_blocks = True
    for j, replica in enumerate(decode):
        replica.scheduler.on_load_start = load_starter(j)
    out_links = [simpy.Resource(env, 1) for _ in range(n_p)]
    in_links = [simpy.Resource(env, 1) for _ in range(n_d)]
    prefill_router = make_router(pd.config.prefill.router)
    decode_router = make_router(pd.config.decode.router)
    jitter = PathDraws(seed) if any(r.request_path_jitter_s > 0 for r in prefill) else None
    sharing = SegmentSharing(traffic) if not closed else None

    def dispatch(spec: Any) -> Request:
        private = sharing.private_from_token(spec) if sharing is not None else None
        client = spec.make_request(private_from_token=private)
        records.append(new_record(client))
        clients.append(client)
        leg = Request(spec.request_id, spec.arrival_s, spec.num_prompt_tokens, 1,
                      prompt_segments=spec.prompt_segments, task_class=spec.task_class, priority=spec.priority,
                      max_tokens=1, private_from_token=private)
        leg_records.append(new_leg_record(leg))
        legs.append(leg)
        leg_client[id(leg)] = client
        outstanding[0] += 1
        engine = prefill[prefill_router.route(leg, prefill)]
        delay = engine.request_path_s + (engine.request_path_jitter_s * jitter.next() if jitter else 0.0)
        if delay > 0:
            env.timeout(delay).callbacks.append(lambda _e: engine.submit(leg))
        else:
            engine.submit(leg)
        return client

    def open_loop(specs: Sequence[Any]):
        for spec in specs:
            if spec.arrival_s > env.now:
                yield env.timeout(spec.arrival_s - env.now)
            dispatch(spec)

    if closed:
        drivers = [env.process(closed_loop_user(env, traffic, u, dispatch, waiters))
                   for u in range(closed_loop_users(traffic))]
    else:
        drivers = [env.process(open_loop(traffic))]

    def arrivals_over_now() -> None:
        arrivals_over[0] = True
        check_drained()

    run_until_drained(env, drivers, arrivals_over_now, drained, body.max_sim_time_s)
    for replica in prefill + decode:
        replica.close()
    close_unfinished(clients)
    close_unfinished(legs)        # on their request path when the run stopped
    for client in clients:       # the client's prefix-cache hit is the prefill's (the decode's is the KV it got)
        cached = leg_cached.get(id(client))
        record = client.client_data
        if record.status != REJECTED:
            record.num_cached_tokens = cached if cached is not None else -1
    sort_by_arrival(records)
    sort_by_arrival(leg_records)
    transfers.num_expired = num_expired[0]
    kv_p = [r.scheduler.kv_cache_manager for r in prefill]
    result = SimResult(
        requests=records, steps=steps, config=dict(summary or {}), sim_start_s=0.0, sim_end_s=env.now,
        prefix_cache_hit_tokens=sum(m.num_hit_tokens for m in kv_p),
        prefix_cache_query_tokens=sum(m.num_query_tokens for m in kv_p),
        num_preemptions=sum(r.scheduler.num_preemptions for r in prefill + decode),
        num_replicas=n_p + n_d, wall_time_s=time.perf_counter() - wall_start,
    )
    if any(hasattr(m, "offload_stats") for m in kv_p):   # the prefill pool's offload tiers (its prefix hits)
        result.config["kv_offload"] = offload_summary(kv_p)
    window = (body.warmup_s, None) if body.warmup_s > 0 else None
    result.config.setdefault("disaggregation", {}).update(
        pd_metrics(result, leg_records, transfers, pd, slo=body.slo.as_dict() or None, window=window))
    return result
