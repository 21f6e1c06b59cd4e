"""KV offload tiers under the GPU prefix cache: the ``server:`` knobs and what they resolve to.

vLLM's knobs by name: ``kv_offloading_size`` (GiB of host memory for offloaded KV, all tensor-parallel ranks
together; unset: no offloading) and ``kv_offloading_backend`` (``native``: vLLM's OffloadingConnector;
``lmcache``: LMCache's CPU tier; both modelled alike). The twin's own, stated: ``kv_offloading_bandwidth_gb_s``
(host <-> GPU, one direction, per GPU; default by GPU: PCIe Gen4 x16 ~25 GB/s effective on A100-class parts, PCIe
Gen5 ~50 GB/s on H100/H200/B200-class parts, NVLink-C2C ~450 GB/s on Grace parts: GH200, GB200, GB300) and
``kv_offloading_lower`` (an optional lower tier, e.g. local NVMe or a remote store, as a stated size and
bandwidth: blocks the host tier evicts move down to it, as LMCache's local-disk tier does).

A tier holds whole blocks of the server's ``block_size``; its capacity in blocks is its bytes over one block's
KV on all ranks. Loading a block costs its per-GPU bytes over the tier's bandwidth (each rank loads its shard at
once over its own link).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from twin.hardware.gpus import GpuSpec

GIB = 1 << 30
MAX_OFFLOAD_GIB = 1 << 20            # a pebibyte: a larger figure is a typo


class LowerTierKnobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    size_gib: float = Field(gt=0, le=MAX_OFFLOAD_GIB, allow_inf_nan=False)
    bandwidth_gb_s: float = Field(gt=0, le=1e5, allow_inf_nan=False)


class KvOffloadingKnobs(BaseModel):
    """The ``server:`` knobs of KV offloading (mixed into the server section)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kv_offloading_size: float | None = Field(None, gt=0, le=MAX_OFFLOAD_GIB, allow_inf_nan=False)
    kv_offloading_backend: Literal["native", "lmcache"] = "native"
    kv_offloading_bandwidth_gb_s: float | None = Field(None, gt=0, le=1e5, allow_inf_nan=False)
    kv_offloading_lower: LowerTierKnobs | None = None


OFFLOAD_KNOBS = tuple(KvOffloadingKnobs.model_fields)


def default_host_bandwidth_bytes_per_s(gpu: GpuSpec) -> float:
    """Host <-> GPU bandwidth one direction (stated priors, see the module's docstring)."""
    name = gpu.name.lower()
    if any(k in name for k in ("gh200", "gb200", "gb300")):
        return 450e9
    if "a100" in name or "a10" in name or "l4" in name or "v100" in name:
        return 25e9
    return 50e9


def offload_tiers(knobs: KvOffloadingKnobs, gpu: GpuSpec, kv_bytes_per_block: int,
                  tensor_parallel_size: int) -> tuple[tuple[int, float], ...]:
    """``((num_blocks, load_s_per_block), ...)`` per tier, the host tier first; () when offloading is off.
    ``kv_bytes_per_block`` is one block's KV on one GPU."""
    if knobs.kv_offloading_size is None:
        return ()
    all_ranks = kv_bytes_per_block * tensor_parallel_size
    host_bw = (knobs.kv_offloading_bandwidth_gb_s * 1e9 if knobs.kv_offloading_bandwidth_gb_s is not None
               else default_host_bandwidth_bytes_per_s(gpu))
    tiers = [(int(knobs.kv_offloading_size * GIB // all_ranks), kv_bytes_per_block / host_bw)]
    lower = knobs.kv_offloading_lower
    if lower is not None:
        tiers.append((int(lower.size_gib * GIB // all_ranks), kv_bytes_per_block / (lower.bandwidth_gb_s * 1e9)))
    return tuple(tiers)
