"""Reading a calibrated profile file: JSON in, every field checked (a ``TwinInputError`` names the first bad one),
and where a profile named by its bundled name lives."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from twin.cost.profile_features import (FEATURE_NAMES, MODEL_SHAPE_FIELDS, PROFILE_FORMAT, RANGE_FIELDS,
                                        SUPPORTED_VERSIONS, DecodePadding)
from twin.errors import TwinInputError
from twin.json_input import JsonSyntaxError, parse_json
from twin.yaml_input import read_text


def _bad(source: str, field: str, value: Any, allowed: str) -> TwinInputError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return TwinInputError(f"{source}: field '{field}' = {shown}: {allowed}")


def _mapping(doc: Mapping[str, Any], key: str, source: str, prefix: str = "") -> Mapping[str, Any]:
    if key not in doc:
        raise TwinInputError(f"{source}: field '{prefix}{key}' is required")
    value = doc[key]
    if not isinstance(value, Mapping):
        raise _bad(source, prefix + key, value, "must be a JSON object")
    return value


def _number(value: Any, field: str, source: str, *, minimum: float = 0.0, maximum: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum \
            or value > maximum:
        bound = f" and <= {maximum:g}" if math.isfinite(maximum) else ""
        raise _bad(source, field, value, f"must be a finite number >= {minimum:g}{bound}")
    return float(value)


# seconds per unit of a feature (a step, a token, a pair): an hour is far past any engine; 1e308 overflowed the
# simulated clock
MAX_COEFFICIENT_S = 3600.0


def read_profile(path: str | Path) -> dict[str, Any]:
    """Read and validate a profile JSON file; ``TwinInputError`` (one line, naming the field) if it is bad."""
    p = Path(path)
    source = f"profile {p}"
    text = read_text(p, "profile")
    try:
        doc = parse_json(text, source)
    except JsonSyntaxError as e:
        raise TwinInputError(f"{source} line {e.lineno}: not valid JSON ({e.msg})") from None
    validate_profile(doc, source)
    return doc


def validate_profile(doc: Any, source: str = "profile") -> None:
    """Check a profile document's structure and values (raises ``TwinInputError`` naming the first bad field)."""
    if not isinstance(doc, Mapping):
        raise TwinInputError(f"{source}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("format") != PROFILE_FORMAT:
        raise _bad(source, "format", doc.get("format"), f"must be {PROFILE_FORMAT!r} (a profile written by "
                   f"'twin calibrate')")
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version not in SUPPORTED_VERSIONS:
        raise _bad(source, "version", version, f"supported: {', '.join(map(str, SUPPORTED_VERSIONS))}")
    cm = _mapping(doc, "cost_model", source)
    coefs = _mapping(cm, "coefficients", source, "cost_model.")
    for name, value in coefs.items():
        if name not in FEATURE_NAMES:
            raise _bad(source, f"cost_model.coefficients.{name}", value,
                       f"unknown feature; allowed: {', '.join(FEATURE_NAMES)}")
        _number(value, f"cost_model.coefficients.{name}", source, maximum=MAX_COEFFICIENT_S)
    if "step" not in coefs:
        raise TwinInputError(f"{source}: field 'cost_model.coefficients.step' is required")
    _number(cm.get("knee_tokens", 0), "cost_model.knee_tokens", source)
    rng = doc.get("range")
    if rng is not None:
        if not isinstance(rng, Mapping):
            raise _bad(source, "range", rng, "must be a JSON object of [min, max] pairs")
        for name, pair in rng.items():
            if name not in RANGE_FIELDS:
                continue   # other recorded ranges are informative
            if (not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2):
                raise _bad(source, f"range.{name}", pair, "must be a [min, max] pair")
            lo = _number(pair[0], f"range.{name}[0]", source)
            hi = _number(pair[1], f"range.{name}[1]", source)
            if hi < lo:
                raise _bad(source, f"range.{name}", pair, "max must be >= min")
    read_decode_padding(doc, source)
    for name in ("device", "calibration", "fit"):
        if doc.get(name) is not None and not isinstance(doc[name], Mapping):
            raise _bad(source, name, doc[name], "must be a JSON object")
    tp = doc.get("tensor_parallel_size", 1)
    if tp is not None and (isinstance(tp, bool) or not isinstance(tp, int) or tp < 1):
        raise _bad(source, "tensor_parallel_size", tp, "must be a positive integer")
    model = doc.get("model")
    if model is not None:
        if not isinstance(model, Mapping):
            raise _bad(source, "model", model, "must be a JSON object")
        for name in MODEL_SHAPE_FIELDS:
            if name in model and model[name] is not None:
                v = model[name]
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise _bad(source, f"model.{name}", v, "must be a positive integer")


def read_decode_padding(doc: Mapping[str, Any], source: str = "profile") -> DecodePadding | None:
    """A profile's ``decode_padding`` as ``(batch buckets, block size)``, None when it has none."""
    pad = doc.get("decode_padding")
    if pad is None:
        return None
    if not isinstance(pad, Mapping):
        raise _bad(source, "decode_padding", pad, "must be a JSON object with batch_buckets and block_size")
    buckets, block = pad.get("batch_buckets"), pad.get("block_size")
    if (not isinstance(buckets, list) or not buckets
            or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in buckets)
            or buckets != sorted(set(buckets))):
        raise _bad(source, "decode_padding.batch_buckets", buckets,
                   "must be a non-empty list of increasing positive integers")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise _bad(source, "decode_padding.block_size", block, "must be a positive integer")
    return tuple(buckets), block


def bundled_profiles_dir() -> Path | None:
    """``calibration/profiles`` of this installation (found without importing the calibration package)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("calibration")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        d = Path(loc) / "profiles"
        if d.is_dir():
            return d
    return None


def resolve_profile_path(path: str | Path) -> Path:
    """A profile path as given, or the name of a bundled profile (``tiny-llama-cpu`` ->
    ``calibration/profiles/tiny-llama-cpu.json``)."""
    p = Path(path)
    if p.exists():
        return p
    bundled = bundled_profiles_dir()
    if bundled is not None and p.parent == Path("."):
        for cand in (bundled / p.name, bundled / f"{p.name}.json"):
            if cand.is_file():
                return cand
    return p
