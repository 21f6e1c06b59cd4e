"""A prefill/decode (``disaggregation:``) run on the dashboard: its diagnosis per pool and what the page says
about its pools.

The diagnosis (`twin.analysis.causes.diagnose`) judges one deployment's engine steps. A P/D run has two: each
pool is diagnosed on its own engines' steps with its own deployment (scheduler knobs, KV pool, cost model), and
the run's verdict names the pool that limits it (the saturated one; else the decode pool, which sets TPOT).
The KV link is not a deployment: its queueing and transfer times are in the Pools section, not the verdict.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from twin.analysis.causes import Diagnosis, diagnose
from twin.deploy.pd_metrics import steps_of_engines
from twin.deploy.pd_pools import POOLS, PdDeployment
from twin.results.sim_result import SimResult

PER_POOL_NOTE = ("Diagnosed per pool (each pool is one deployment: its own engines' steps and knobs); the KV "
                 "link's queueing and transfer times are in the Pools section.")


def pool_view(result: SimResult, pd: PdDeployment, pool: str) -> SimResult | None:
    """The run as one pool's engines saw it: their steps, the client's requests (whose prefix-cache hits are
    the prefill's); ``None`` without per-step records."""
    engines = pd.summary()[pool]["engines"]
    steps = steps_of_engines(result.steps, engines)
    if steps is None:
        return None
    return SimResult(requests=result.requests, steps=steps, sim_start_s=result.sim_start_s,
                     sim_end_s=result.sim_end_s, num_replicas=len(engines))


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
        return Diagnosis("step_time", False, "No per-step records were kept (records.steps), so neither pool can "
                         "be diagnosed; the Pools section has their load.", [PER_POOL_NOTE]), per
    # the pool that limits the run: a saturated one (longest queued share), else the decode pool
    key = max(per, key=lambda p: (per[p].saturated, per[p].stats.get("queued", 0.0), p == "decode"))
    lead = per[key]
    other = [p for p in per if p != key]
    verdict = f"{key.capitalize()} pool: {lead.verdict}"
    if other:
        verdict += f"\n\n{other[0].capitalize()} pool: {per[other[0]].verdict}"
    notes: list[str] = []
    for pool in per.values():
        notes += [n for n in pool.notes if n not in notes]
    notes.append(PER_POOL_NOTE)
    return replace(lead, saturated=any(d.saturated for d in per.values()), verdict=verdict, notes=notes,
                   stats={**lead.stats, "pool": key}), per


def pd_info(pd: PdDeployment) -> dict[str, Any]:
    """The deployment facts the page shows for a P/D run (``gpu``: both pools' GPU names when they differ)."""
    s = pd.summary()
    pools = []
    for pool in POOLS:
        sc = pd.deployments[pool].scheduler_config
        pools.append({"pool": pool, "gpu": pd.deployments[pool].gpu.name, "engines": len(s[pool]["engines"]),
                      "gpus": s[pool]["gpus"], "tensor_parallel_size": s[pool]["tensor_parallel_size"],
                      "max_num_seqs": sc.max_num_seqs, "max_num_batched_tokens": sc.max_num_batched_tokens,
                      "enable_prefix_caching": sc.enable_prefix_caching,
                      "kv_capacity_tokens": pd.deployments[pool].kv_pool.capacity_tokens})
    gpus = list(dict.fromkeys(p["gpu"] for p in pools))
    p = pools[0]
    return {"pools": pools, "link": s["link"], "gpu": " / ".join(gpus), "model": pd.deployments["prefill"].model.name,
            "scheduler": "continuous", "max_num_seqs": p["max_num_seqs"],
            "max_num_batched_tokens": p["max_num_batched_tokens"], "enable_prefix_caching": p["enable_prefix_caching"],
            "enable_chunked_prefill": pd.deployments["prefill"].scheduler_config.enable_chunked_prefill,
            "kv_capacity_tokens": p["kv_capacity_tokens"], "tensor_parallel_size": p["tensor_parallel_size"],
            "replicas": p["engines"], "num_gpus": sum(q["gpus"] for q in pools)}


def pd_headline(info: dict[str, Any]) -> str:
    """``llama-3.1-8b, prefill 2×TP1 A100 (max_num_seqs 256, ...) → decode 1×TP1 A100 (...) over infiniband``."""
    parts = [f"{p['pool']} {p['engines']}×TP{p['tensor_parallel_size']} {p['gpu']} (max_num_seqs "
             f"{p['max_num_seqs']}, max_num_batched_tokens {p['max_num_batched_tokens']}, KV pool "
             f"{p['kv_capacity_tokens']:,} tokens)" for p in info["pools"]]
    return f"{info['model']} disaggregated: {' → '.join(parts)} · KV link {info['link'].get('kind', '?')}"
