"""A cluster: groups of replicas (each group its own GPU type, tensor parallelism and server settings) behind
one router, and the per-replica view of a run.

    groups = [ReplicaGroup(gpu="H100-SXM", replicas=4),
              ReplicaGroup(gpu="A100-SXM-80GB", replicas=2, server={"max_num_seqs": 128}, weight=0.5)]
    result = run_cluster(body, groups, router="least_outstanding")
    per_replica_metrics(result, slo=body.slo.as_dict())

Replicas are numbered group after group; every request record carries its ``replica`` and
``result.config["replica_groups"]`` maps indices to groups. A group's fields override the scenario's
``deployment``/``server`` for its replicas; everything else (model, cost model, speculative decoding,
workload) is the scenario's. ``weight`` is the group's share for weighted routers (round robin, least
outstanding, the consistent-hash ring); it defaults to 1 for every replica.

A scenario can declare its groups itself (``deployment.groups``, see ``twin.scenario.DeploymentConfig``):
``run_cluster(body)`` then runs them, and so does ``twin.sim.run.run_body``, which hands such bodies to this
module, so ``twin run`` and ``twin compare`` run mixed clusters as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from twin.sim.deployment import Deployment, make_router, resolve_deployment
from twin.sim.replicas import run_single, simulate_replicas
from twin.errors import TwinInputError
from twin.results.metrics import compute_metrics
from twin.results.records import REJECTED, STEP_COLUMN_NAMES, StepRecords
from twin.results.sim_result import SimResult
from twin.scenario import ReplicaGroup, ScenarioBody, deep_merge
from twin.workload.validation_errors import format_validation_error

__all__ = ["ClusterDeployment", "ReplicaGroup", "group_body", "load_groups", "load_imbalance",
           "per_replica_metrics", "resolve_cluster", "run_cluster"]


def load_groups(items: Sequence[ReplicaGroup | dict]) -> list[ReplicaGroup]:
    groups = []
    for i, item in enumerate(items):
        if isinstance(item, ReplicaGroup):
            groups.append(item)
            continue
        try:
            groups.append(ReplicaGroup.model_validate(item))
        except ValidationError as exc:
            raise TwinInputError(format_validation_error(exc, f"groups[{i}]")) from None
    if not groups:
        raise TwinInputError("groups: give at least one replica group")
    return groups


def group_body(body: ScenarioBody, group: ReplicaGroup, where: str | None = None) -> ScenarioBody:
    """The scenario body one group's replicas run (the group's GPU, TP, replicas and server merged in; the
    scenario's own ``deployment.groups`` left out)."""
    data = body.model_dump(mode="python", exclude_none=True)
    data["deployment"].pop("groups", None)
    dep: dict[str, Any] = {"replicas": group.replicas}
    if group.gpu is not None:
        dep["gpu"] = group.gpu
    if group.tensor_parallel_size is not None:
        dep["tensor_parallel_size"] = group.tensor_parallel_size
    data = deep_merge(data, {"deployment": dep, "server": dict(group.server)})
    where = where or f"group {group.name or group.gpu or ''}".strip()
    try:
        return ScenarioBody.model_validate(data)
    except ValidationError as exc:
        raise TwinInputError(f"{where}: {format_validation_error(exc)}") from None


@dataclass
class ClusterDeployment:
    """A cluster, resolved: per group, the body its replicas run and its ``Deployment``. Replicas are numbered
    group after group."""

    groups: list[ReplicaGroup]
    bodies: list[ScenarioBody]
    deployments: list[Deployment]

    @property
    def owner(self) -> list[int]:
        """Replica index -> group index."""
        return [gi for gi, g in enumerate(self.groups) for _ in range(g.replicas)]

    @property
    def num_replicas(self) -> int:
        return sum(g.replicas for g in self.groups)


def resolve_cluster(body: ScenarioBody, groups: Sequence[ReplicaGroup | dict] | None = None,
                    base_dir: str | Path | None = None) -> ClusterDeployment:
    """Resolve every group of a cluster: ``groups``, else the scenario's ``deployment.groups``, else the
    scenario's deployment as one group. A problem names the group (``deployment.groups[1] (slow): ...``)."""
    base = Path(base_dir) if base_dir is not None else None
    own = groups is None and body.deployment.groups is not None
    if groups is None:
        groups = body.deployment.groups or [ReplicaGroup(replicas=body.deployment.replicas)]
    loaded = load_groups(groups)
    bodies, deps = [], []
    for i, g in enumerate(loaded):
        where = f"{'deployment.groups' if own else 'groups'}[{i}]" + (f" ({g.name})" if g.name else "")
        b = group_body(body, g, where)
        try:
            deps.append(resolve_deployment(b, base))
        except TwinInputError as exc:
            raise TwinInputError(f"{where}: {exc}") from None
        if deps[-1].engines_per_replica > 1:
            raise TwinInputError(f"{where}: deployment.data_parallel_size > 1 with replica groups is not modelled; "
                                 f"leave groups out to run a data-parallel server")
        bodies.append(b)
    return ClusterDeployment(loaded, bodies, deps)


def run_cluster(body: ScenarioBody, groups: Sequence[ReplicaGroup | dict] | None = None, *,
                base_dir: str | Path | None = None, replication: int = 0, router: Any = None,
                router_params: dict[str, Any] | None = None, progress=None,
                cluster: ClusterDeployment | None = None) -> SimResult:
    """One run of ``body`` on a cluster of replica groups (default: the scenario's ``deployment.groups``, or
    its own deployment). ``cluster`` is the cluster already resolved (``resolve_cluster``).

    ``router`` is a router name (default: the scenario's ``deployment.router``) or a router object."""
    base = Path(base_dir) if base_dir is not None else None
    name = router if isinstance(router, str) or router is None else None
    name = name or body.deployment.router
    if (groups is None and cluster is None and body.deployment.groups is None and name == body.deployment.router
            and not router_params):
        # the scenario's own deployment: exactly `twin run`
        result = run_single(body, base, replication=replication, progress=progress)
        result.config["router"] = name
        return result
    if cluster is None:
        cluster = resolve_cluster(body, groups, base)
    groups = cluster.groups
    homogeneous = len(groups) == 1 and not router_params and (router is None or isinstance(router, str))
    if homogeneous:
        gb = cluster.bodies[0]
        if gb.deployment.router != name:
            gb = ScenarioBody.model_validate(deep_merge(gb.model_dump(mode="python", exclude_none=True),
                                                        {"deployment": {"router": name}}))
        result = run_single(gb, base, replication=replication, progress=progress, deployment=cluster.deployments[0])
        result.config["replica_groups"] = [_group_summary(groups[0], gb, list(range(groups[0].replicas)))]
        result.config["router"] = name
        return result

    owner = cluster.owner
    weights = [groups[gi].weight for gi in owner]
    if router is None or isinstance(router, str):
        router_obj = make_router(name, **({"weights": weights} | dict(router_params or {})))
    else:
        router_obj = router

    seed = body.seed + replication
    summary: dict[str, Any] = {
        "name": body.name, "seed": seed, "replication": replication, "router": name,
        "deployment": body.deployment.model_dump(),
        "replica_groups": [], "cost_model": body.cost_model.model_dump(),
    }
    start = 0
    for g, b, d in zip(groups, cluster.bodies, cluster.deployments):
        summary["replica_groups"].append(_group_summary(g, b, list(range(start, start + g.replicas)), d))
        start += g.replicas
    return simulate_replicas(body, cluster.bodies, cluster.deployments, owner, router_obj, seed=seed,
                             base_dir=base, summary=summary, progress=progress)


def _group_summary(group: ReplicaGroup, body: ScenarioBody, replicas: list[int],
                   dep: Deployment | None = None) -> dict[str, Any]:
    out = {"name": group.name, "gpu": body.deployment.gpu,
           "tensor_parallel_size": body.deployment.tensor_parallel_size, "replicas": replicas,
           "weight": group.weight, "server_overrides": dict(group.server)}
    if dep is not None:
        out["server"] = dep.scheduler_config.model_dump()
        out["num_gpu_blocks"] = dep.num_gpu_blocks
    return out


def replica_owner(result: SimResult) -> dict[int, dict[str, Any]]:
    """Replica index -> its group, GPU and TP (from the recorded groups, or the run's one deployment)."""
    out: dict[int, dict[str, Any]] = {}
    dep = result.config.get("deployment")
    if not result.config.get("replica_groups") and isinstance(dep, dict) and result.num_replicas:
        return {i: {"group": 0, "gpu": dep.get("gpu"), "tensor_parallel_size": dep.get("tensor_parallel_size")}
                for i in range(result.num_replicas)}
    for gi, g in enumerate(result.config.get("replica_groups") or []):
        for i in g["replicas"]:
            out[i] = {"group": g.get("name") or gi, "gpu": g["gpu"], "tensor_parallel_size": g["tensor_parallel_size"]}
    return out


def _steps_of(steps: StepRecords, replica: int) -> StepRecords:
    if getattr(steps, "aggregated", False):
        return steps.for_replica(replica)
    if not len(steps):
        return StepRecords()
    mask = steps.column("replica") == replica
    return StepRecords.from_columns({name: steps.column(name)[mask] for name in STEP_COLUMN_NAMES})


PER_REPLICA_KEYS = (
    "num_requests", "completed", "failed", "request_throughput", "output_throughput", "mean_ttft_ms",
    "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "p99_e2el_ms",
    "num_good_requests", "prefix_cache_hit_rate", "num_preemptions", "busy_fraction", "mean_running_batch",
    "mean_queue_length", "mean_kv_usage", "max_kv_usage",
)


def per_replica_metrics(result: SimResult, slo: Any = None,
                        window: tuple[float | None, float | None] | None = None) -> list[dict[str, Any]]:
    """One row per replica: its requests' latency and throughput, its prefix-cache hit rate (cached /
    prompt tokens of its requests) and its step-based load, plus its group, GPU and TP."""
    n = result.num_replicas or (max((r.replica for r in result.requests), default=0) + 1)
    owner = replica_owner(result)
    by_replica: list[list] = [[] for _ in range(n)]
    for r in result.requests:
        by_replica[r.replica].append(r)
    rows = []
    for i in range(n):
        m = compute_metrics(by_replica[i], _steps_of(result.steps, i), slo=slo, window=window, num_replicas=1)
        row: dict[str, Any] = {"replica": i, **owner.get(i, {})}
        row.update({k: m.get(k) for k in PER_REPLICA_KEYS})
        row["share_of_requests"] = len(by_replica[i]) / len(result.requests) if result.requests else None
        rows.append(row)
    return rows


def load_imbalance(rows: list[dict[str, Any]]) -> float | None:
    """Max over mean of the requests each replica served (1 = perfectly even)."""
    counts = [r["num_requests"] for r in rows]
    mean = sum(counts) / len(counts) if counts else 0
    return max(counts) / mean if mean else None


def rejected_share(result: SimResult) -> float:
    return sum(1 for r in result.requests if r.status == REJECTED) / len(result.requests) if result.requests else 0.0
