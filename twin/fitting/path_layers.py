"""A request path that grows with the server's decoder layers: ``request_path_layer_s`` (seconds per decoder layer
per request; issue 33, round 17; docs/fidelity.md "Round 17: the bench client's request path by structure").

What it tests: a fold fits the bench client's request path (``request_path_s@client_vllm_bench``) as one constant
per request (15-19 ms where a family is held out), and gpt-oss-120b (36 decoder layers) asks for less of it than
Kimi-K2.5 (61), MiniMax-M2.5 (62) and Llama-3.1-70B (80). If that time is per-layer work a request meets once
(its first step's per-layer set-up, or per-layer host work on its way in), the path of a run the term covers is

    BASE_S (the embedded request path, 4.8 ms: round 14 timed the bench client's own part at ~1 ms over it)
    + request_path_layer_s x the model's decoder layers

and a fold that fits the per-layer part on the other families carries the right amount to a shallower or deeper
held-out model. The base is fixed, not the fold's ``request_path_s``: the covered runs neither set nor identify the
unscoped path (``covers``, used by ``twin.fitting.identify``), so a fold with no inference-perf run in training
(H100 held out; the inference-perf source held out) holds that at its prior instead of fitting it on bench rows.

A fit-only term (opt-in: ``fidelity_real.py --terms ... request_path_layer_s@client_vllm_bench``): prior 0, no
embedded value, so the cost model never sees it; the replay sets the covered deployments' ``request_path_s``
(nothing per step), the fit's surrogate each request's path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from twin.cost.param_checks import check_nonneg
from twin.cost.roofline import DEFAULT_REQUEST_PATH_S
from twin.hardware.model_catalog import resolve_model

TERM = "request_path_layer_s"
BASE_S = DEFAULT_REQUEST_PATH_S      # s per request: the embedded (inference-perf) path under the per-layer part


def layer_path_s(value: float, model: Any) -> float:
    """The path of a covered run: ``BASE_S`` + ``value`` (s per decoder layer per request) x the model's decoder
    layers; a one-line error for a negative or non-numeric value."""
    return BASE_S + check_nonneg(TERM, value) * int(resolve_model(model).num_hidden_layers)


def split_kwargs(kw: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
    """(the cost model's keywords without the term, the term's value or None where it does not apply)."""
    rest = dict(kw)
    return rest, rest.pop(TERM, None)


def covers(names: Sequence[str], deployment: Any) -> bool:
    """Whether a fitted ``request_path_layer_s[@scope]`` among ``names`` sets ``deployment``'s path (then the
    unscoped ``request_path_s`` does not)."""
    from twin.fitting.scoped import in_scope, split
    for name in names:
        base, scope = split(name)
        if base == TERM and (scope is None or in_scope(scope, deployment)):
            return True
    return False
