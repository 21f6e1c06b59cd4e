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

The per-replica view (``per_replica_metrics``, ``load_imbalance``) lives in ``twin.results.per_replica``, computed
from the records at the end of the run; it is re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from twin.sim.deployment import Deployment, check_checkpoint_kv, make_router, relative_to, resolve_deployment
from twin.sim.replicas import run_single, simulate_replicas
from twin.errors import TwinInputError
from twin.hardware.catalog import resolve_model
from twin.results.per_replica import PER_REPLICA_KEYS, load_imbalance, per_replica_metrics, replica_owner
from twin.results.sim_result import SimResult
from twin.scenario import ReplicaGroup, ScenarioBody, deep_merge
from twin.workload.validation_errors import format_validation_error

__all__ = ["PER_REPLICA_KEYS", "ClusterDeployment", "ReplicaGroup", "group_body", "load_groups", "load_imbalance",
           "per_replica_metrics", "replica_owner", "resolve_cluster", "run_cluster"]


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
    # the groups share the scenario's model and KV format; each group's body sets kv_dtype, so check it here (an
    # unknown model is left to the groups, whose error names the group)
    try:
        model = resolve_model(relative_to(body.deployment.model, base))
    except TwinInputError:
        model = None
    if model is not None:
        check_checkpoint_kv(body, model)
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
                cluster: ClusterDeployment | None = None, deployment: Deployment | None = None) -> SimResult:
    """One run of ``body`` on a cluster of replica groups (default: the scenario's ``deployment.groups``, or
    its own deployment). ``cluster`` is the cluster already resolved (``resolve_cluster``); ``deployment`` the
    scenario's own deployment already resolved, used where the run is exactly `twin run`'s.

    ``router`` is a router name (default: the scenario's ``deployment.router``) or a router object."""
    base = Path(base_dir) if base_dir is not None else None
    name = router if isinstance(router, str) or router is None else None
    name = name or body.deployment.router
    if (groups is None and cluster is None and body.deployment.groups is None and name == body.deployment.router
            and not router_params):
        # the scenario's own deployment: exactly `twin run`
        result = run_single(body, base, replication=replication, progress=progress, deployment=deployment)
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
