"""Fit parameters that hold on part of the data only: ``name@scope`` sets the cost model's ``name`` for the
deployments ``scope`` covers, over the unscoped ``name`` (or the model's default).

Scopes: a GPU generation (``@hopper``, ``@blackwell``, ... as ``twin.cost.generations`` names them), a weight
format (``@fp8``, ``@int4``, ``@int8``, ``@nf4``: any of the checkpoint's linear layer groups in it), and ``@sync``: servers without async scheduling (vLLM before 0.14, or ``async_scheduling: false``), where the
engine core's CPU work per step is no longer hidden behind the GPU's (the step and per-sequence overheads).

Expert kernel paths (issue 33, round 4): ``@experts_<format>`` covers the MoE deployments whose ROUTED EXPERTS are
stored in that format (``experts_bf16``, ``experts_fp8``, ``experts_int4``, ``experts_nvfp4``, ``experts_mxfp4``,
...; the format's base name, ``int4-g32-sym`` -> ``int4``), whatever the other layer groups are: vLLM picks the
fused-MoE kernel by the experts' format (bf16 / FP8: Triton ``fused_moe``, DeepGEMM or CUTLASS; NVFP4: FlashInfer
CUTLASS or TRT-LLM-gen; MXFP4 on Blackwell: FlashInfer TRT-LLM-gen; INT4 W4A16: Marlin MoE or FlashInfer), so a
cost of that kernel path is set per format. Dense models are never covered. Identification: in the data here a
format is often one model family's alone (MXFP4: gpt-oss-120b; INT4: Kimi-K2.5; bf16: Mixtral), so such a scope is
effectively per family: in a leave-one-family-out fold it has no training rows when that family is held out and
must stay at its prior there (``twin.fitting.identify`` reports it as not identified).

Clients (issue 33, round 6): ``@client_<name>`` covers the runs that client measured (``MeasuredRun.client``,
``twin.workload.clients``): ``request_path_s@client_vllm_bench`` gives the silicon rows' request path apart from
the inference-perf runs' (the request path is a client's and its host's as much as the server's).

KV cache formats (issue 33, round 7): ``@kv_fp8`` covers the deployments whose KV cache is FP8; with a generation,
``kv_memory_efficiency@hopper+kv_fp8`` is the FP8 KV decode attention's read rate on Hopper
(``twin.cost.kv_attention``).

Attention architecture (issue 33, round 8): ``@mla`` covers the models with multi-head latent attention
(DeepSeek-V3 layout: Kimi-K2.5 in the data), ``layer_overhead_s@mla`` their fixed time per layer and step
(``twin.cost.mla_decode``); ``@gqa`` every other model (issue 33, round 14: ``blackwell+gqa+experts_nvfp4``, a
path's eager MoE floor that Kimi-K2.5's MLA layers on the same expert format do not share, ``twin.cost.
eager_path_floors``).

Releases (issue 33, round 16): ``@vllm_0.10`` covers the replayed runs measured on vLLM 0.10.x
(``twin.fitting.release_scope``).

A scope that covers no deployment (an unknown part, a part twice, two GPU generations, ...) is a one-line error
(issue 33, round 20: ``check_scoped_name``), where a value is read (``parse_scoped_set_options``) and where it is
applied (``params_for``): ``in_scope`` would match nothing and the value be silently ignored."""

from __future__ import annotations

import difflib
import functools
from typing import Any

from twin.cost.generations import GENERATION_OF_NAME, gpu_generation
from twin.cost.kv_attention import kv_format
from twin.hardware.weight_formats import format_family
from twin.fitting.release_scope import PREFIX as RELEASE_PREFIX, SCOPES as RELEASE_SCOPES, in_release_scope
from twin.errors import TwinInputError
from twin.yaml_input import parse_numeric_set_options
from twin.workload.clients import CLIENT_SCOPES, SCOPE_PREFIX as CLIENT_PREFIX, client_scope

SEPARATOR = "@"
WEIGHT_SCOPES = ("fp8", "int8", "int4", "nf4")
EXPERT_PREFIX = "experts_"
EXPERT_FORMATS = ("bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4")
EXPERT_SCOPES = tuple(EXPERT_PREFIX + f for f in EXPERT_FORMATS)
KV_PREFIX = "kv_"          # the KV cache format (issue 33, round 7: ``hopper+kv_fp8``, twin.cost.kv_attention)
KV_SCOPES = (KV_PREFIX + "fp8",)
MLA_SCOPE = "mla"          # models with multi-head latent attention (issue 33, round 8)
GQA_SCOPE = "gqa"          # models without it: grouped-query / multi-head attention (issue 33, round 14)
SCOPES = tuple(g for g, _ in GENERATION_OF_NAME) + WEIGHT_SCOPES + ("sync",) + EXPERT_SCOPES + CLIENT_SCOPES + KV_SCOPES \
    + (MLA_SCOPE, GQA_SCOPE) + RELEASE_SCOPES


# scopes of which one deployment is covered by one at most: a compound of two of them covers nothing
EXCLUSIVE_SCOPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("GPU generation", tuple(g for g, _ in GENERATION_OF_NAME)), ("routed experts' format", EXPERT_SCOPES),
    ("client", CLIENT_SCOPES), ("KV cache format", KV_SCOPES), ("attention architecture", (MLA_SCOPE, GQA_SCOPE)),
    ("vLLM release", RELEASE_SCOPES))


def check_scoped_name(name: str, flag: str = "--set") -> str:
    """``name`` unchanged when its ``@scope`` (if any) can cover a deployment: every ``+`` part one of ``SCOPES``,
    none twice, no two of one exclusive kind (``hopper+blackwell``); else a one-line TwinInputError naming the term
    and the scopes it accepts. ``in_scope`` matches nothing on such a scope, so the value would be silently
    ignored (issue 33, round 20: ``compute_efficiency@nvfp4`` ran as if never given)."""
    base, sep, scope = name.partition(SEPARATOR)
    if not sep:
        return name
    parts = scope.split("+")
    accepted = f"{base} takes @SCOPE, SCOPE one of {', '.join(SCOPES)} or a '+' of several (e.g. hopper+experts_fp8)"
    if not base:
        raise TwinInputError(f"{flag} {name}: no term before '@'")
    for part in parts:
        if part not in SCOPES:
            close = [p + part for p in (EXPERT_PREFIX, KV_PREFIX, CLIENT_PREFIX) if p + part in SCOPES] \
                or difflib.get_close_matches(part, SCOPES, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TwinInputError(f"{flag} {name}: unknown scope {part!r}{hint}; {accepted}")
    if len(set(parts)) < len(parts):
        raise TwinInputError(f"{flag} {name}: a scope part given twice; {accepted}")
    for kind, members in EXCLUSIVE_SCOPES:
        both = [p for p in parts if p in members]
        if len(both) > 1:
            raise TwinInputError(f"{flag} {name}: {' and '.join(both)} cover no deployment together (one "
                                 f"{kind} each); {accepted}")
    return name


def split(name: str) -> tuple[str, str | None]:
    base, _, scope = name.partition(SEPARATOR)
    return base, (scope or None)


def in_scope(scope: str, deployment: Any) -> bool:
    """Whether ``deployment`` (a ``twin.sim.deployment.Deployment``) is covered by ``scope``; a compound scope
    ``a+b`` (``hopper+experts_fp8``: twin.cost.generation_experts) covers what every part covers."""
    if "+" in scope:
        return all(in_scope(part, deployment) for part in scope.split("+"))
    if scope.startswith(EXPERT_PREFIX):
        return routed_expert_format(deployment) == scope[len(EXPERT_PREFIX):]
    if scope.startswith(CLIENT_PREFIX):       # the runs one client measured (twin.workload.clients)
        client = getattr(deployment, "client", None)
        return client is not None and client_scope(client) == scope
    if scope.startswith(RELEASE_PREFIX):      # the vLLM release line a replayed run measured (round 16)
        return in_release_scope(scope, deployment)
    if scope.startswith(KV_PREFIX):        # the KV cache's format family (fp8_e4m3 -> fp8)
        kv = getattr(getattr(deployment, "kv_pool", None), "kv_dtype", None)
        return kv is not None and kv_format(kv) == scope[len(KV_PREFIX):]
    if scope == MLA_SCOPE:        # multi-head latent attention models (twin.cost.mla_decode)
        return bool(getattr(getattr(deployment, "model", None), "is_mla", False))
    if scope == GQA_SCOPE:        # every other model (twin.cost.eager_path_floors: MiniMax-M2.5's NVFP4 layer)
        model = getattr(deployment, "model", None)
        return model is not None and not bool(getattr(model, "is_mla", False))
    if scope == "sync":
        return not bool(getattr(deployment.scheduler_config, "async_scheduling", False))
    if scope in WEIGHT_SCOPES:     # any linear layer group in that format (Kimi-K2.5: INT4 routed experts only)
        formats = getattr(deployment, "weight_formats", None)
        if formats is not None:
            return scope in formats.linear_families
        return getattr(getattr(deployment, "kv_pool", None), "weight_dtype", None) == scope
    return gpu_generation(deployment.gpu) == scope


def routed_expert_format(deployment: Any) -> str | None:
    """The base name of the routed experts' weight format (``int4-g32-sym`` -> ``int4``) of a MoE deployment;
    None for a dense model or a deployment that does not say its formats."""
    model, formats = getattr(deployment, "model", None), getattr(deployment, "weight_formats", None)
    if model is None or not getattr(model, "is_moe", False):
        return None
    if formats is not None:
        return format_family(formats.routed_experts)
    dtype = getattr(getattr(deployment, "kv_pool", None), "weight_dtype", None)
    return None if dtype is None else format_family(dtype)


def params_for(params: dict[str, float], deployment: Any) -> dict[str, float]:
    """The cost model keywords of ``params`` on ``deployment``: unscoped values, overridden by the scoped ones
    that cover it (scoped ones that do not are dropped; one whose scope covers no deployment at all is a one-line
    error, ``check_scoped_name``, wherever it came from)."""
    out = {k: v for k, v in params.items() if SEPARATOR not in k}
    # the narrower (compound) scopes last, so they win over a single scope covering the same deployment
    for key, value in sorted(params.items(), key=lambda kv: split(kv[0])[1].count("+") if SEPARATOR in kv[0] else 0):
        base, scope = split(key)
        if scope is not None and _checked(key) and in_scope(scope, deployment):
            out[base] = value
    return out


def parse_scoped_set_options(items: list[str] | tuple[str, ...], flag: str = "--set") -> dict[str, float]:
    """``--set NAME=NUMBER`` items of cost parameters (``twin.yaml_input.parse_numeric_set_options``) whose every
    scope can cover a deployment (``check_scoped_name``): a bad one is one line before any simulation."""
    out = parse_numeric_set_options(items, flag)
    for name in out:
        check_scoped_name(name, flag)
    return out


@functools.lru_cache(maxsize=None)
def _checked(name: str) -> bool:
    """``check_scoped_name`` once per name (``params_for`` runs for every case of every fit evaluation)."""
    return bool(check_scoped_name(name, "scoped parameter"))
