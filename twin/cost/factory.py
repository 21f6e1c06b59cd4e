"""Build a cost model from a kind name and a parameter dict (what a scenario file says).

Kinds are looked up in `COST_MODEL_BUILDERS` ("roofline", "constant" and the calibrated "profile"); another
module adds one with `register_cost_model`:

    def _build_mine(model, gpu, tp, weight_dtype, kv_dtype, params): ...
    register_cost_model("mine", _build_mine)

A builder receives the resolved ModelSpec and GpuSpec, the tensor-parallel size, the weight and KV dtypes and
the user's parameter dict, and returns an object satisfying `twin.cost.base.CostModel`. It should raise
TwinInputError for parameters it does not know.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from twin.hardware.catalog import (GpuSpec, ModelSpec, activation_dtype, normalize_dtype, normalize_weight_dtype,
                                  resolve_gpu, resolve_model)
from twin.cost.base import CostModel
from twin.cost.constant import ConstantCostModel
from twin.cost.profile import build_profile_cost_model
from twin.cost.profile_file import resolve_profile_path
from twin.cost.server_profile import is_server_profile, server_profile_cost_model
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.hardware.parallel import ParallelLayout
from twin.hardware.weight_formats import WeightFormats
from twin.json_input import load_json_path

Builder = Callable[[ModelSpec, GpuSpec, int, str, str, dict[str, Any]], CostModel]


def _check_params(kind: str, params: Mapping[str, Any], allowed: Sequence[str]) -> None:
    for key in params:
        if key not in allowed:
            raise TwinInputError(f"cost_model.params.{key}: unknown parameter for kind {kind!r}; "
                                 f"allowed: {', '.join(allowed)}")


_ROOFLINE_PARAMS = tuple(
    p for p in inspect.signature(RooflineCostModel.__init__).parameters
    if p not in ("self", "model", "gpu", "tensor_parallel_size", "weight_dtype", "kv_dtype", "layout"))


def _build_roofline(model: ModelSpec, gpu: GpuSpec, tp: int, weight_dtype: str, kv_dtype: str,
                    params: dict[str, Any], layout: ParallelLayout | None = None) -> CostModel:
    _check_params("roofline", params, _ROOFLINE_PARAMS)
    return RooflineCostModel(model, gpu, tensor_parallel_size=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                             layout=layout, **params)


def _build_constant(model: ModelSpec, gpu: GpuSpec, tp: int, weight_dtype: str, kv_dtype: str,
                    params: dict[str, Any]) -> CostModel:
    allowed = ("step_s", "per_token_s", "per_seq_s")
    _check_params("constant", params, allowed)
    if "step_s" not in params:
        raise TwinInputError("cost_model.params.step_s: required for kind 'constant' (seconds per step)")
    return ConstantCostModel(**params)


def _build_profile(model: ModelSpec, gpu: GpuSpec, tp: int, weight_dtype: Any, kv_dtype: str,
                   params: dict[str, Any], layout: ParallelLayout | None = None) -> CostModel:
    """An engine profile (``twin calibrate``) or a server profile (``twin calibrate --from-results``; a fitted
    roofline, so it takes the weight formats per layer group and the parallel layout)."""
    path = params.get("path")
    if path and set(params) == {"path"}:
        resolved = resolve_profile_path(path)
        try:
            doc = load_json_path(resolved, "profile")
        except TwinInputError:
            doc = None      # the engine-profile reader gives the precise one-line error
        if is_server_profile(doc):
            return server_profile_cost_model(doc, f"profile {resolved}", model, gpu, tp, weight_dtype, kv_dtype,
                                             layout)
    if layout is not None and not layout.is_trivial:
        raise TwinInputError("cost_model.kind: a calibrated engine profile does not model data, pipeline or expert "
                             "parallelism; use kind roofline (or a server profile) for such a layout")
    if isinstance(weight_dtype, WeightFormats):
        weight_dtype = weight_dtype.attention     # an engine profile takes one format name
    return build_profile_cost_model(model, gpu, tp, weight_dtype, kv_dtype, params)


COST_MODEL_BUILDERS: dict[str, Builder] = {
    "roofline": _build_roofline,
    "constant": _build_constant,
    "profile": _build_profile,
}


def register_cost_model(kind: str, builder: Builder) -> None:
    """Add (or replace) a cost-model kind, e.g. "profile" from the calibration package."""
    COST_MODEL_BUILDERS[kind.strip().lower()] = builder


def _dtypes(dtypes: Mapping[str, str] | Sequence[str] | str | None) -> tuple[str, str]:
    if dtypes is None:
        return "bf16", "bf16"
    if isinstance(dtypes, str):
        d = normalize_dtype(dtypes, "dtype")
        return d, d
    if isinstance(dtypes, Mapping):
        unknown = set(dtypes) - {"weight_dtype", "kv_dtype", "weight", "kv", "dtype", "kv_cache_dtype"}
        if unknown:
            raise TwinInputError(f"dtypes: unknown key {sorted(unknown)[0]!r}; allowed: weight_dtype, kv_dtype")
        w = dtypes.get("weight_dtype", dtypes.get("weight", dtypes.get("dtype", "bf16")))
        kv = dtypes.get("kv_dtype", dtypes.get("kv", dtypes.get("kv_cache_dtype", "auto")))
        if not isinstance(w, WeightFormats):
            w = normalize_weight_dtype(w)
        # vLLM's kv_cache_dtype "auto" means: the model's dtype (the activation dtype for quantized weights)
        act = w.activation if isinstance(w, WeightFormats) else activation_dtype(w)
        kv = act if str(kv).lower() == "auto" else normalize_dtype(kv, "kv_dtype")
        return w, kv
    w, kv = dtypes
    return normalize_weight_dtype(w), normalize_dtype(kv, "kv_dtype")


def build_cost_model(
    kind: str,
    model: ModelSpec | str,
    gpu: GpuSpec | str,
    tp: int = 1,
    dtypes: Mapping[str, str] | Sequence[str] | str | None = None,
    params: Mapping[str, Any] | None = None,
    layout: ParallelLayout | None = None,
) -> CostModel:
    """A cost model of `kind` ("roofline", "constant", or a registered kind) for the deployment.

    dtypes: {"weight_dtype": ..., "kv_dtype": ...} (kv "auto" = the model's dtype), a (weight, kv) pair, one
    dtype for both, or None for bf16.
    """
    key = str(kind).strip().lower()
    if key not in COST_MODEL_BUILDERS:
        raise TwinInputError(f"cost_model.kind: unknown kind {kind!r}; allowed: {', '.join(COST_MODEL_BUILDERS)}")
    params = dict(params or {})
    weight_dtype, kv_dtype = _dtypes(dtypes)
    builder = COST_MODEL_BUILDERS[key]
    if layout is not None and not layout.is_trivial:
        if "layout" not in inspect.signature(builder).parameters:
            raise TwinInputError(f"cost_model.kind: {kind!r} does not model data, pipeline or expert parallelism; "
                                 f"use kind roofline for such a layout")
        return builder(resolve_model(model), resolve_gpu(gpu), tp, weight_dtype, kv_dtype, params, layout=layout)
    if isinstance(weight_dtype, WeightFormats) and "layout" not in inspect.signature(builder).parameters:
        weight_dtype = weight_dtype.attention     # kinds without formats and layouts take one format name
    return builder(resolve_model(model), resolve_gpu(gpu), tp, weight_dtype, kv_dtype, params)
