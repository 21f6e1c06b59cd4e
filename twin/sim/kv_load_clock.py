"""KV offload tiers as the SimPy twin sees them: the load time the KV manager reports is added to the step that
admitted the loading requests, and the run's per-tier hit rates (``result.config["kv_offload"]``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

TIER_NAMES = ("host", "lower")


class KvLoadClock:
    """A cost model plus the offload loads of each step (everything else is the wrapped model's)."""

    def __init__(self, inner: Any, take_load_s: Callable[[], float]) -> None:
        self.inner = inner
        self.take_load_s = take_load_s

    def step_time_s(self, out: Any) -> float:
        return self.inner.step_time_s(out) + self.take_load_s()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def offload_summary(kv_managers: Sequence[Any]) -> dict[str, Any]:
    """Every replica's tiers summed: per tier its capacity, blocks stored / evicted / loaded and hit rate
    (hit tokens over the GPU prefix cache's query tokens), with the GPU tier's for comparison."""
    query = sum(m.num_query_tokens for m in kv_managers)
    gpu_hits = sum(m.num_hit_tokens for m in kv_managers)
    tiers: list[dict[str, Any]] = []
    for m in kv_managers:
        if not hasattr(m, "offload_stats"):
            continue
        for i, st in enumerate(m.offload_stats()):
            if i == len(tiers):
                tiers.append({"tier": TIER_NAMES[min(i, 1)], **{k: 0 for k in st}})
            for k, v in st.items():
                tiers[i][k] += v
    for t in tiers:
        t["hit_rate"] = t["hit_tokens"] / query if query else None
    total = gpu_hits + sum(t["hit_tokens"] for t in tiers)
    return {"query_tokens": query, "gpu_hit_tokens": gpu_hits, "gpu_hit_rate": gpu_hits / query if query else None,
            "tiers": tiers, "total_hit_rate": total / query if query else None,
            "load_s": sum(getattr(m, "offload_load_s", 0.0) for m in kv_managers)}
