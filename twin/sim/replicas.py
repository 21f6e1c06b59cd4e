"""Simulating a scenario's traffic on a set of replicas: the one place where the workload, schedulers, cost
models and speculators of resolved deployments meet the SimPy clock.

Each step's drafting time is in the step records (``draft_s``); the run's drafting totals land in
``result.config["spec_decode_stats"]``."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from twin.core.schedulers import make_scheduler
from twin.errors import TwinInputError
from twin.results.server_keys import server_knobs
from twin.results.sim_result import SimResult
from twin.scenario import ScenarioBody
from twin.sim.cold_server import COLD, ColdServers
from twin.sim.deployment import Deployment, make_router, resolve_deployment
from twin.sim.dp_router import DataParallelRouter
from twin.sim.simulate import simulate
from twin.spec_decode import SpecDecodeStats, Speculator, speculator_factory
from twin.workload.generate import build_workload


def run_single(body: ScenarioBody, base_dir: Path | None = None, *, replication: int = 0,
             progress: Callable[[float], None] | None = None,
             deployment: Deployment | None = None) -> SimResult:
    """One simulation of a single-deployment body on ``body.deployment.replicas`` replicas; replication r
    uses seed ``body.seed + r``. ``deployment`` is resolved here when ``None``."""
    dep = deployment or resolve_deployment(body, base_dir)
    seed = body.seed + replication
    summary = {
        "name": body.name, "seed": seed, "replication": replication,
        "deployment": body.deployment.model_dump(),
        "server": dep.scheduler_config.model_dump(),
        "vllm_version": body.server.vllm_version,
        "gpu_memory_utilization": body.server.gpu_memory_utilization,
        "num_gpu_blocks": dep.num_gpu_blocks,
        "kv_capacity_tokens": dep.kv_pool.capacity_tokens,
        "cost_model": body.cost_model.model_dump(),
    }
    if knobs := server_knobs(body.server):     # the other knobs set away from their defaults (twin run --json)
        summary["server_knobs"] = knobs
    if dep.cost_model_notes:                  # a server profile fitted on another model (carried over)
        summary["profile_note"] = " ".join(dep.cost_model_notes)
    if dep.weight_formats is not None:        # what weight_dtype "auto" and weight_formats resolved to
        summary["weight_formats"] = dep.weight_formats.as_dict()
    if dep.layout is not None and not dep.layout.is_trivial:
        summary["layout"] = dep.layout.as_dict()
    if body.speculative_decoding is not None:
        summary["speculative_decoding"] = body.speculative_decoding.model_dump()
    engines = body.deployment.replicas * dep.engines_per_replica
    if dep.engines_per_replica > 1:
        # data parallelism: every DP rank is an engine core of its own; one server's front end balances them
        # as vLLM does, several servers are flattened behind the deployment's router
        summary["data_parallel_engines"] = engines
        router = DataParallelRouter() if body.deployment.replicas == 1 else make_router(body.deployment.router)
    else:
        router = make_router(body.deployment.router)
    return simulate_replicas(body, [body], [dep], [0] * engines, router, seed=seed, base_dir=base_dir,
                             summary=summary, progress=progress)



def simulate_replicas(body: ScenarioBody, bodies: list[ScenarioBody], deps: list[Deployment], owner: list[int],
                      router: Any, *, seed: int, base_dir: Path | None, summary: dict[str, Any],
                      progress: Callable[[float], None] | None = None) -> SimResult:
    """Simulate ``body``'s traffic on ``len(owner)`` replicas, replica i served as ``deps[owner[i]]`` (with
    ``bodies[owner[i]]``'s speculative decoding) behind ``router``."""
    traffic = build_workload(body.workload, seed, base_dir=base_dir)
    summary = {**body.workload.bench_header(), **summary}
    speculators: list[Speculator] = []
    make_speculator = None
    if body.speculative_decoding is not None:
        factories = [speculator_factory(b.speculative_decoding, d.drafter, seed) if d.drafter is not None else None
                     for b, d in zip(bodies, deps)]

        def make_speculator(i: int) -> Speculator:
            factory = factories[owner[i]]
            if factory is None:
                raise TwinInputError("speculative_decoding: a replica group has no drafter")
            speculators.append(factory(i))
            return speculators[-1]

    make_cost = lambda i: deps[owner[i]].cost_model_factory()     # noqa: E731
    cold = ColdServers(deps, owner) if body.server_start == COLD else None
    if cold is not None:     # a freshly started server (twin.sim.cold_server); a warm run builds nothing
        make_cost = lambda i: cold.wrap(i, deps[owner[i]].cost_model_factory())     # noqa: E731
    result = simulate(
        traffic,
        lambda i: make_scheduler(deps[owner[i]].scheduler_config, deps[owner[i]].num_gpu_blocks),
        make_cost,
        num_replicas=len(owner),
        router=router,
        make_speculator=make_speculator,
        max_time_s=body.max_sim_time_s,
        progress=progress,
        config_summary=summary,
        seed=seed,
        token_times=body.records.token_times,
        steps_mode=body.records.steps,
    )
    if cold is not None:
        result.config["cold_start"] = cold.summary()
    if speculators:
        total = SpecDecodeStats()
        for s in speculators:
            total = total.merge(s.stats)
        result.config["spec_decode_stats"] = asdict(total)
    return result
