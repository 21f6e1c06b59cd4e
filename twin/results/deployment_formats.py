"""The weight format and KV-cache dtype a deployment sets, as the run's first line names them (``twin run``,
``twin compare``, the dashboard's caption): ``deployment.weight_dtype: fp8`` and ``kv_dtype: fp8`` change the KV
pool and every step, and the model's name does not say them."""

from __future__ import annotations

from typing import Any


def format_parts(d: Any) -> list[str]:
    """``["fp8 weights", "fp8 KV cache"]`` for what the deployment sets; ``[]`` at the model's own weights
    and a bf16 KV cache."""
    parts = [f"{d.weight_dtype} weights"] if d.weight_dtype != "auto" else []
    if d.weight_formats:
        parts.append("weight formats " + ", ".join(f"{k}={v}" for k, v in d.weight_formats.items()))
    return parts + ([f"{d.kv_dtype} KV cache"] if d.kv_dtype != "bf16" else [])
