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


def returned_parts(d: Any, ref: Any, own_weights: str) -> list[str]:
    """The formats a deployment leaves at the model's own where the reference's deployment (``ref``) sets
    one, named: ``bf16 weights`` (``own_weights``: the checkpoint's format label), ``bf16 KV cache``. A
    variant that returns to the default against an FP8 reference otherwise said nothing on its first line."""
    parts = []
    if d.weight_dtype == "auto" and not d.weight_formats and (ref.weight_dtype != "auto" or ref.weight_formats):
        parts.append(f"{own_weights} weights")
    if d.kv_dtype == "bf16" and ref.kv_dtype != "bf16":
        parts.append("bf16 KV cache")
    return parts
