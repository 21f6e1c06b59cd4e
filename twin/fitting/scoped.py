"""Fit parameters that hold on part of the data only: ``name@scope`` sets the cost model's ``name`` for the
deployments ``scope`` covers, over the unscoped ``name`` (or the model's default).

Scopes: a GPU generation (``@hopper``, ``@blackwell``, ... as ``twin.cost.generations`` names them), a weight
format (``@fp8``, ``@int4``, ``@int8``, ``@nf4``: any of the checkpoint's linear layer groups in it), and ``@sync``: servers without async scheduling (vLLM before 0.14, or ``async_scheduling: false``), where the
engine core's CPU work per step is no longer hidden behind the GPU's (the step and per-sequence overheads)."""

from __future__ import annotations

from typing import Any

from twin.cost.generations import GENERATION_OF_NAME, gpu_generation

SEPARATOR = "@"
WEIGHT_SCOPES = ("fp8", "int8", "int4", "nf4")
SCOPES = tuple(g for g, _ in GENERATION_OF_NAME) + WEIGHT_SCOPES + ("sync",)
LINEAR_GROUPS = ("attention", "dense_mlp", "routed_experts", "shared_experts")


def split(name: str) -> tuple[str, str | None]:
    base, _, scope = name.partition(SEPARATOR)
    return base, (scope or None)


def in_scope(scope: str, deployment: Any) -> bool:
    """Whether ``deployment`` (a ``twin.sim.deployment.Deployment``) is covered by ``scope``."""
    if scope == "sync":
        return not bool(getattr(deployment.scheduler_config, "async_scheduling", False))
    if scope in WEIGHT_SCOPES:     # any linear layer group in that format (Kimi-K2.5: INT4 routed experts only)
        formats = getattr(deployment, "weight_formats", None)
        if formats is not None:
            return any(str(getattr(formats, g)).split("-")[0] == scope for g in LINEAR_GROUPS)
        return getattr(getattr(deployment, "kv_pool", None), "weight_dtype", None) == scope
    return gpu_generation(deployment.gpu) == scope


def params_for(params: dict[str, float], deployment: Any) -> dict[str, float]:
    """The cost model keywords of ``params`` on ``deployment``: unscoped values, overridden by the scoped ones
    that cover it (scoped ones that do not are dropped)."""
    out = {k: v for k, v in params.items() if SEPARATOR not in k}
    for key, value in params.items():
        base, scope = split(key)
        if scope is not None and in_scope(scope, deployment):
            out[base] = value
    return out
