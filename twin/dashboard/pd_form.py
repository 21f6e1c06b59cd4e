"""The what-if settings of a prefill/decode (``disaggregation:``) configuration.

The pools (GPU, tensor parallelism, engines per pool, the KV link) come from the scenario file and are shown,
not edited: the form's GPU, tensor-parallel and replica widgets describe one deployment. What the form does
edit reaches both pools the same way: the model (both pools serve one model) and each server knob that
neither pool sets itself and that resolves to the same value in both (the scenario's ``server:`` sits under
each pool's own ``server:``, so a change there is the change in both pools). A knob a pool sets, or one whose
pools differ, is listed as the pools have it. The pools run vLLM's continuous scheduler (no scheduler choice)
and no speculative decoding (not modelled with disaggregation).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from twin.deploy.pd_pools import POOLS, resolve_pd
from twin.results import numbers
from twin.scenario import ScenarioBody

PD_SERVER_KEYS = ("max_num_seqs", "max_num_batched_tokens", "enable_chunked_prefill", "enable_prefix_caching",
                  "block_size", "gpu_memory_utilization")
POOLS_NOTE = ("The pools (GPU, tensor parallelism, engines, KV link) come from the scenario file's "
              "`disaggregation:` section; change them there (or pick another variant). The settings below apply "
              "to both pools.")


def _knob(pd: Any, pool: str, key: str) -> Any:
    if key == "gpu_memory_utilization":
        return pd.bodies[pool].server.gpu_memory_utilization
    return getattr(pd.deployments[pool].scheduler_config, key)


def pd_settings(body: ScenarioBody, base_dir: Path | None) -> tuple[dict[str, Any], list[str]]:
    """(the editable settings with their resolved values, lines describing the pools as they are)."""
    pd = resolve_pd(body, base_dir)
    out: dict[str, Any] = {"model": pd.deployments["prefill"].model.name}
    s = pd.summary()
    fixed: list[str] = []
    for key in PD_SERVER_KEYS:
        values = {pool: _knob(pd, pool, key) for pool in POOLS}
        own = [pool for pool in POOLS if key in getattr(body.disaggregation, pool).server]
        if own or values["prefill"] != values["decode"]:
            fixed.append(f"{key}: prefill {values['prefill']}, decode {values['decode']}"
                         + (f" (set by the {' and '.join(own)} pool{'s' if len(own) > 1 else ''})" if own else ""))
        else:
            out[key] = values["prefill"]
    lines = []
    for pool in POOLS:
        p = s[pool]
        n = len(p["engines"])
        lines.append(f"{pool}: {numbers.counted(n, 'engine')} × TP{p['tensor_parallel_size']} "
                     f"{pd.deployments[pool].gpu.name} ({numbers.counted(p['gpus'], 'GPU')}), "
                     f"router {p['router']}, {p['kv_transfer_config']['kv_connector']}")
    link = s["link"]
    lines.append(f"KV link: {link['kind']}, {numbers.with_unit(link['bandwidth_gb_s'], 'GB/s')} × "
                 f"{link['lanes']}, {numbers.with_unit(link['latency_us'], 'µs')}"
                 f"{', layer-wise' if link['layerwise'] else ''}")
    return out, lines + [f"per pool, {f}" for f in fixed]

