"""A profile fitted on a real server's benchmark results (``twin calibrate --from-results``).

Unlike the engine profile (``twin.cost.profile``: regression coefficients for one model on one device), a server
profile holds the roofline's physical parameters (efficiencies as fractions of datasheet peaks, overheads in
seconds, the GEMM knee in tokens, the request path in seconds), so it applies to any catalogued model and GPU:
``cost_model: {kind: profile, profile: my-server.json}`` builds a ``RooflineCostModel`` with them. Using it on
another GPU than it was fitted on warns once: efficiencies transfer by datasheet ratio, host-side overheads
only as far as the host CPU and vLLM version are alike. Using it for another model than it was fitted on says so
once (``fitted_model_note``; the run's config summary keeps it as ``profile_note``): the parameters carry over.

Format: ``{"format": "twin-server-profile", "version": 1, "params": {name: value}, "std": {name: value},
"fitted_on": {"gpus": [...], "models": [...], "runs": N, ...}, "runs": [{name, measured, predicted}, ...]}``.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

from twin.cost.profile import ProfileWarning
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.json_input import load_json_path

SERVER_PROFILE_FORMAT = "twin-server-profile"
SERVER_PROFILE_VERSION = 1
FITTED_PARAMETERS = ("memory_efficiency", "compute_efficiency", "gemm_half_tokens", "step_overhead_s",
                     "per_seq_overhead_s", "per_token_overhead_s", "request_path_s", "request_path_jitter_s",
                     "allreduce_latency_s",
                     "interconnect_efficiency")


def is_server_profile(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("format") == SERVER_PROFILE_FORMAT


def validate_server_profile(doc: Any, source: str) -> dict[str, float]:
    """The profile's parameters, checked (one-line ``TwinInputError`` naming the first bad field)."""
    version = doc.get("version")
    if version != SERVER_PROFILE_VERSION or isinstance(version, bool):
        raise TwinInputError(f"{source}: version = {version!r}: supported: {SERVER_PROFILE_VERSION}")
    params = doc.get("params")
    if not isinstance(params, dict) or not params:
        raise TwinInputError(f"{source}: params: expected an object of fitted parameters")
    out = {}
    for name, value in params.items():
        if name not in FITTED_PARAMETERS:
            raise TwinInputError(f"{source}: params.{name}: unknown parameter; allowed: {', '.join(FITTED_PARAMETERS)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise TwinInputError(f"{source}: params.{name} = {value!r}: must be a finite number >= 0")
        out[name] = float(value)
    _fitted_on(doc, source)
    return out


MAX_NAME_CHARS = 4096      # a GPU or model name, alias, Hugging Face id or path
MAX_NOTED = 4              # a note names this many of the profile's GPUs or models, then counts the rest


def _fitted_on(doc: dict[str, Any], source: str) -> dict[str, list[str]]:
    """``fitted_on``'s ``gpus`` and ``models`` (each absent, null, or a list of names: text of 1 to
    ``MAX_NAME_CHARS`` characters), the other keys being the fit's own record (not read)."""
    fitted = doc.get("fitted_on")
    if fitted is None:
        return {"gpus": [], "models": []}
    if not isinstance(fitted, dict):
        raise TwinInputError(f"{source}: fitted_on = {_cut(repr(fitted))}: must be an object (gpus, models, ...)")
    out = {}
    for key in ("gpus", "models"):
        names = fitted.get(key)
        if names is None:
            names = []
        if not isinstance(names, list) or any(not isinstance(n, str) or not n.strip() or len(n) > MAX_NAME_CHARS
                                              for n in names):
            raise TwinInputError(f"{source}: fitted_on.{key} = {_cut(repr(names))}: must be a list of names (text "
                                 f"of 1 to {MAX_NAME_CHARS:,} characters each)")
        out[key] = names
    return out


def _cut(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _noted(names: list[str]) -> str:
    """The first ``MAX_NOTED`` names (each cut), then how many more."""
    more = len(names) - MAX_NOTED
    return ", ".join(_cut(n) for n in names[:MAX_NOTED]) + (f" and {more:,} more" if more > 0 else "")


def read_server_profile(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    doc = load_json_path(p, "profile")
    if not is_server_profile(doc):
        raise TwinInputError(f"profile {p}: format = {doc.get('format') if isinstance(doc, dict) else None!r}: "
                             f"must be {SERVER_PROFILE_FORMAT!r}")
    validate_server_profile(doc, f"profile {p}")
    return doc


def write_server_profile(path: str | Path, doc: dict[str, Any]) -> None:
    out = {"format": SERVER_PROFILE_FORMAT, "version": SERVER_PROFILE_VERSION, **doc}
    validate_server_profile(out, f"profile {path}")
    Path(path).write_text(json.dumps(out, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def server_profile_cost_model(doc: dict[str, Any], source: str, model: Any, gpu: Any, tp: int, weight_dtype: Any,
                              kv_dtype: str, layout: Any = None) -> RooflineCostModel:
    params = validate_server_profile(doc, source)
    gpus = _fitted_on(doc, source)["gpus"]
    if gpus and getattr(gpu, "name", None) not in gpus:
        warnings.warn(f"{source} was fitted on {_noted(gpus)}; the deployment runs {gpu.name}: "
                      f"efficiencies carry over by datasheet ratio, host overheads only as far as the host is alike",
                      ProfileWarning, stacklevel=2)
    cm = RooflineCostModel(model, gpu, tensor_parallel_size=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                           layout=layout, **params)
    if (note := fitted_model_note(doc, source, getattr(model, "name", None))) is not None:
        warnings.warn(note, ProfileWarning, stacklevel=2)
        cm.profile_notes = (note,)
    return cm


def fitted_model_note(doc: dict[str, Any], source: str, model: str | None) -> str | None:
    """One line when the profile was fitted on other models than ``model`` (the deployment's): its parameters
    are physical, so they carry over (not an error); None when the profile does not say its models, or saw
    ``model``."""
    models = _fitted_on(doc, source)["models"]
    if not models or model is None or model in models:
        return None
    return (f"{source} was fitted on {_noted(models)}, the deployment runs {model}: its parameters are "
            f"physical (efficiencies, overheads, the request path) and carry over; a fit on {model}'s own results "
            f"would check them")
