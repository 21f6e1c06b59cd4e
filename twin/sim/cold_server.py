"""A freshly started server in a user scenario (``server_start: cold``; issue 33, round 12).

By default a run models a warm server: every one-off start-up cost is paid before the first request. With
``server_start: cold`` each replica starts as a server that has just finished vLLM's start-up (weights loaded,
memory profiled, CUDA graphs captured) and meets its first traffic: the one-off work start-up did not reach is
paid by the first step that needs it. Priced today: the Triton fused-MoE JIT compiles of an unquantised MoE on a
GPU whose tuned table is known (``twin.cost.cold_compile``; Mixtral-8x7B TP 2 on H100: 13 specialisations,
0.74 s each). Nothing else is priced (the dense TP > 1 servers' single stall has no pinned cause: the round-12
section of docs/fidelity.md), so a deployment without a priced table runs exactly as warm and says so
(``priced: false``).

Each replica is its own server process, so each keeps its own record of what it has compiled; the run's
``result.config["cold_start"]`` sums them: stalls met, their time, and per replica what could be met. The cost
model is wrapped only when asked; a warm run builds nothing here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from twin.cost.cold_compile import ColdCompiles, ColdStartClock, cold_compiles_for
from twin.sim.deployment import Deployment
from twin.results.numbers import counted

WARM, COLD = "warm", "cold"
SERVER_STARTS = (WARM, COLD)


def cold_compiles_of(dep: Deployment) -> ColdCompiles | None:
    """The one-off compiles a fresh server of ``dep`` can meet, or None where none is priced: no tuned table for
    its MoE shape, experts not on the unquantised Triton path, expert parallelism (other per-rank shapes), or
    CUDA graphs that cover decodes only (or none)."""
    layout = dep.layout
    if layout is not None and layout.enable_expert_parallel:
        return None
    graphs = dep.cudagraph_tokens
    if not graphs or graphs[0] != graphs[1]:
        return None      # graphs that cover decodes only (or none): not priced (the default modes cover both)
    sched = dep.scheduler_config
    compiles = cold_compiles_for(dep.model, dep.gpu.name, layout.tensor_parallel_size if layout is not None else 1,
                                 dep.weight_formats.routed_experts if dep.weight_formats else "bf16",
                                 sched.max_num_batched_tokens, min(graphs[1], sched.max_num_batched_tokens))
    return compiles if compiles is not None and compiles.num_cold else None


class ColdServers:
    """The replicas of one run started cold: wraps each replica's cost model where a cold-start term applies and
    sums what the replicas met. ``deps[owner[i]]`` is replica i's deployment (as ``simulate_replicas``)."""

    def __init__(self, deps: Sequence[Deployment], owner: Sequence[int]) -> None:
        per_dep = [cold_compiles_of(d) for d in deps]
        self.compiles = [per_dep[o] for o in owner]
        self.clocks: list[ColdStartClock] = []

    def wrap(self, i: int, cost: Any) -> Any:
        """Replica i's cost model, as a freshly started server's where a term applies (else unchanged)."""
        compiles = self.compiles[i]
        if compiles is None:
            return cost
        self.clocks.append(ColdStartClock(cost, compiles))
        return self.clocks[-1]

    def summary(self) -> dict[str, Any]:
        """``result.config["cold_start"]``: what the fresh servers paid (units in the names)."""
        priced = [c for c in self.compiles if c is not None]
        return {
            "server_start": COLD,
            "priced": bool(priced),
            "terms": ["triton_fused_moe_compile"] if priced else [],
            "replicas_priced": len(priced),
            "stalls": sum(c.num_stalls for c in self.clocks),
            "stall_time_s": sum(c.num_stalls * c.compiles.stall_s for c in self.clocks),
            "specialisations_per_replica": max((c.num_cold for c in priced), default=0),
            "stall_s_per_specialisation": max((c.stall_s for c in priced), default=0.0),
        }


def cold_start_line(summary: dict[str, Any]) -> str:
    """One line for the CLI: what a cold run's servers paid, or that nothing is priced for its deployment."""
    if not summary.get("priced"):
        return ("server start: cold, but no cold-start term is priced for this deployment (only the Triton "
                "fused-MoE compiles of a known table are): the run is the warm one")
    return (f"server start: cold, {counted(summary['stalls'], 'one-off compile stall')} met, "
            f"{summary['stall_time_s']:.2f} s in all ({summary['stall_s_per_specialisation']:.2f} s each; "
            f"{summary['specialisations_per_replica']} possible per replica, "
            f"{counted(summary['replicas_priced'], 'replica')} priced)")
