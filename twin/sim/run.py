"""From a validated scenario body to a run: vLLM defaults resolved for the deployment, the KV pool sized,
the cost model and traffic built, replications simulated.

With a ``speculative_decoding:`` section the drafter is built once per deployment: its weights and KV shrink
the KV pool, model-based drafters reserve ``num_speculative_tokens`` lookahead slots per request (as vLLM's
scheduler does for EAGLE-style proposers), and every replica gets a ``twin.spec_decode.Speculator``. The run's
drafting totals land in ``result.config["spec_decode_stats"]``; each step's drafting time is in the step records
(``draft_s``), from which the metrics derive ``spec_decode_draft_time_s`` and ``spec_decode_draft_time_fraction``
(drafting's share of the busy time, within the measured window)."""


from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from twin.results.sim_result import SimResult
from twin.scenario import ScenarioBody
from twin.sim.cluster import ClusterDeployment, resolve_cluster, run_cluster
from twin.sim.deployment import Deployment, resolve_deployment
from twin.sim.replicas import run_single


def resolve_for_run(body: ScenarioBody, base_dir: Path | None = None) -> Deployment | ClusterDeployment:
    """What ``run_body`` needs resolved: the ``Deployment``, or for a mixed cluster (``deployment.groups``)
    the ``ClusterDeployment``. Resolve once and pass it to every replication."""
    if body.deployment.groups is not None:
        return resolve_cluster(body, base_dir=base_dir)
    return resolve_deployment(body, base_dir)


def run_body(body: ScenarioBody, base_dir: Path | None = None, *, replication: int = 0,
             progress: Callable[[float], None] | None = None,
             deployment: Deployment | ClusterDeployment | None = None) -> SimResult:
    """The one entry point that runs a scenario body: one simulation, replication r with seed
    ``body.seed + r``. ``deployment`` is what ``resolve_for_run`` gives (resolved here when ``None``)."""
    if body.deployment.groups is not None:
        if deployment is not None and not isinstance(deployment, ClusterDeployment):
            raise TypeError("run_body: a body with deployment.groups takes a ClusterDeployment (resolve_for_run)")
        return run_cluster(body, base_dir=base_dir, replication=replication, progress=progress,
                           cluster=deployment)
    if deployment is not None and not isinstance(deployment, Deployment):
        raise TypeError("run_body: a body without deployment.groups takes a Deployment (resolve_for_run)")
    return run_single(body, base_dir, replication=replication, progress=progress, deployment=deployment)


def metrics_of(result: SimResult, body: ScenarioBody) -> dict[str, Any]:
    """The run's metrics with the scenario's SLOs, measured after its warm-up."""
    window = (body.warmup_s, None) if body.warmup_s > 0 else None
    return result.metrics(slo=body.slo.as_dict() or None, window=window)
