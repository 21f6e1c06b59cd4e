"""The diagnosis of a run served by several deployments: each prefill/decode pool (``disaggregation:``) or each
replica group of a mixed cluster (``deployment.groups``) is judged on its own engines' steps with its own
deployment (scheduler knobs, KV pool, cost model) by `twin.analysis.causes.diagnose`, and the run's verdict
names the part that limits it (a saturated one, the longest queued first; else, for P/D, the decode pool, which
sets TPOT). The KV link is not a deployment: its queueing and transfer times are in the pools' own figures.

The dashboard (`twin.dashboard.pd_run`) and `twin run` (`twin.analysis.run_limits`) share these functions.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from twin.analysis.causes import STEP_TIME, Diagnosis, diagnose
from twin.deploy.pd_metrics import steps_of_engines
from twin.deploy.pd_pools import POOLS, PdDeployment
from twin.results.sim_result import SimResult

PER_POOL_NOTE = ("Diagnosed per pool (each pool is one deployment: its own engines' steps and knobs); the KV "
                 "link's queueing and transfer times are in the Pools section.")
PER_GROUP_NOTE = "Diagnosed per replica group (each group is one deployment: its own replicas' steps and knobs)."
NO_STEPS = ("No per-step records were kept (records.steps), so neither pool can be diagnosed; the Pools section "
            "has their load.")


def engines_view(result: SimResult, engines: list[int]) -> SimResult | None:
    """The run as ``engines`` saw it: their steps, the client's requests; ``None`` without per-step records."""
    steps = steps_of_engines(result.steps, engines)
    if steps is None:
        return None
    return SimResult(requests=result.requests, steps=steps, sim_start_s=result.sim_start_s,
                     sim_end_s=result.sim_end_s, num_replicas=len(engines))


def pool_view(result: SimResult, pd: PdDeployment, pool: str) -> SimResult | None:
    """The run as one pool's engines saw it: their steps, the client's requests (whose prefix-cache hits are
    the prefill's); ``None`` without per-step records."""
    return engines_view(result, pd.summary()[pool]["engines"])


def _lead(per: dict[str, Diagnosis], prefer: str | None) -> str:
    """The part that limits the run: a saturated one (longest queued share), else ``prefer``, else the first."""
    order = list(per)
    return max(per, key=lambda p: (per[p].saturated, per[p].stats.get("queued", 0.0), p == prefer,
                                   -order.index(p)))


def combined(per: dict[str, Diagnosis], *, unit: str, note: str, prefer: str | None = None) -> Diagnosis:
    """One diagnosis of the run from its parts' (``unit``: ``pool`` or ``group``): the limiting part's, its
    verdict first, then each other part's, every note once, ``stats["pool"]`` (or ``["group"]``) naming it."""
    key = _lead(per, prefer)
    lead = per[key]
    verdict = f"{key.capitalize()} {unit}: {lead.verdict}"
    for other in (p for p in per if p != key):
        verdict += f"\n\n{other.capitalize()} {unit}: {per[other].verdict}"
    notes: list[str] = []
    for part in per.values():
        notes += [n for n in part.notes if n not in notes]
    notes.append(note)
    return replace(lead, saturated=any(d.saturated for d in per.values()), verdict=verdict, notes=notes,
                   stats={**lead.stats, unit: key})


def pd_diagnosis(result: SimResult, pd: PdDeployment) -> tuple[Diagnosis, dict[str, Diagnosis]]:
    """The run's verdict and each pool's diagnosis."""
    pools_m = (result.config.get("disaggregation") or {}).get("pools") or {}
    per: dict[str, Diagnosis] = {}
    for pool in POOLS:
        view = pool_view(result, pd, pool)
        if view is None:
            continue
        per[pool] = diagnose(view, pd.deployments[pool], {"busy_fraction": (pools_m.get(pool) or {}).get(
            "busy_fraction")})
    if not per:
        return Diagnosis(STEP_TIME, False, NO_STEPS, [PER_POOL_NOTE]), per
    return combined(per, unit="pool", note=PER_POOL_NOTE, prefer="decode"), per


def group_names(cluster: Any) -> list[str]:
    """Each replica group's name as the run's headline writes it (``group 0`` when unnamed)."""
    return [g.name or f"group {i}" for i, g in enumerate(cluster.groups)]


def cluster_diagnosis(result: SimResult, cluster: Any) -> tuple[Diagnosis | None, dict[str, Diagnosis]]:
    """A mixed cluster (`twin.sim.cluster.ClusterDeployment`): each group's diagnosis and the run's; ``None``
    without per-step records."""
    owner = cluster.owner
    per: dict[str, Diagnosis] = {}
    for gi, (name, dep) in enumerate(zip(group_names(cluster), cluster.deployments)):
        view = engines_view(result, [r for r, g in enumerate(owner) if g == gi])
        if view is None:
            return None, {}
        per[name] = diagnose(view, dep)
    return combined(per, unit="group", note=PER_GROUP_NOTE), per


__all__ = ["NO_STEPS", "PER_GROUP_NOTE", "PER_POOL_NOTE", "cluster_diagnosis", "combined", "engines_view",
           "group_names", "pd_diagnosis", "pool_view"]
