"""A run's KV offload tiers in one line (``result.config["kv_offload"]``, see ``twin.sim.kv_load_clock``): the
GPU prefix cache's hit rate, each tier's, the total and the load time, for the CLI and the dashboard."""

from __future__ import annotations

from typing import Any

from twin.results import numbers


def tier_hit_line(off: dict[str, Any]) -> str:
    parts = [f"GPU {numbers.percent(off['gpu_hit_rate'])}"]
    for t in off["tiers"]:
        parts.append(f"{t['tier']} {numbers.percent(t['hit_rate'])} ({t['loaded_blocks']:,} blocks loaded, "
                     f"{t['stored_blocks']:,} stored, {t['evicted_blocks']:,} evicted)")
    return (", ".join(parts) + f"; total {numbers.percent(off['total_hit_rate'])}, load time "
            f"{numbers.duration_s(off['load_s'])}")
