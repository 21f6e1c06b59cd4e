"""The one entry point that runs any scenario body: one server or a cluster of replica groups
(``twin.sim.run``: one server is a cluster of one), or prefill/decode pools (``disaggregation:``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from twin.deploy.pd_pools import PdDeployment, resolve_pd
from twin.deploy.pd_sim import simulate_pd
from twin.results.sim_result import SimResult
from twin.scenario import ScenarioBody
from twin.sim import run as sim_run
from twin.sim.cluster import ClusterDeployment
from twin.sim.deployment import Deployment

metrics_of = sim_run.metrics_of
Resolved = Deployment | ClusterDeployment | PdDeployment


def resolve_for_run(body: ScenarioBody, base_dir: Path | None = None) -> Resolved:
    """What ``run_body`` needs resolved; resolve once and pass it to every replication."""
    if body.disaggregation is not None:
        return resolve_pd(body, base_dir)
    return sim_run.resolve_for_run(body, base_dir)


def run_body(body: ScenarioBody, base_dir: Path | None = None, *, replication: int = 0,
             progress: Callable[[float], None] | None = None, deployment: Resolved | None = None) -> SimResult:
    """One simulation of ``body``; replication r uses seed ``body.seed + r``."""
    if body.disaggregation is None:
        return sim_run.run_body(body, base_dir, replication=replication, progress=progress, deployment=deployment)
    if deployment is not None and not isinstance(deployment, PdDeployment):
        raise TypeError("run_body: a body with disaggregation takes a PdDeployment (resolve_for_run)")
    pd = deployment or resolve_pd(body, base_dir)
    seed = body.seed + replication
    summary: dict[str, Any] = {
        **body.workload.bench_header(), "name": body.name, "seed": seed, "replication": replication,
        "deployment": body.deployment.model_dump(), "cost_model": body.cost_model.model_dump(),
        "router": f"prefill: {pd.config.prefill.router}, decode: {pd.config.decode.router}",
    }
    return simulate_pd(body, pd, seed=seed, base_dir=base_dir, summary=summary, progress=progress)
