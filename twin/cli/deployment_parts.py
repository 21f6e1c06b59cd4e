"""The parts of a run's first line (``twin run`` / ``twin compare``): what was simulated, in vLLM's words.

``1x4 H100-SXM`` is replicas x tensor-parallel GPUs; a weight format or KV-cache dtype the scenario sets is
named (``twin.results.deployment_formats``)."""

from __future__ import annotations

from typing import Any

from twin.results.deployment_formats import format_parts, returned_parts


def deployment_parts(body: Any, dep: Any, ref: Any = None) -> list[str]:
    """One engine's layout, scheduler, limits in force and KV pool (its formats where set; with ``ref``, the
    reference run's body, also a format it leaves at the model's own where the reference sets one)."""
    sc = dep.scheduler_config
    d = body.deployment
    formats = format_parts(d)
    if ref is not None:
        own = dep.weight_formats.label if dep.weight_formats is not None else "bf16"
        formats += returned_parts(d, ref.deployment, own)
    layout = "".join(f"x{k}{v}" for k, v in (("pp", d.pipeline_parallel_size), ("dp", d.data_parallel_size))
                     if v > 1) + ("+ep" if d.enable_expert_parallel else "")
    per_rank = f" per DP rank (x{d.data_parallel_size})" if d.data_parallel_size > 1 else ""
    return [f"{d.replicas}x{d.tensor_parallel_size}{layout} {dep.gpu.name}", *formats, sc.scheduler,
            f"max_num_seqs={sc.max_num_seqs}", f"max_num_batched_tokens={sc.max_num_batched_tokens}",
            f"prefix_caching={'on' if sc.enable_prefix_caching else 'off'}",
            f"KV pool {dep.kv_pool.capacity_tokens:,} tokens{per_rank}"]
