"""A calibrated step-time model: a feature regression fitted to real engine measurements (``twin calibrate``).

A profile is a versioned JSON file (``{"format": "twin-profile", "version": 1, ...}``) written by
``calibration.fit``. Its cost model is the roofline's form with measured coefficients instead of datasheet
peaks and guessed efficiencies::

    t = step                                    per-step overhead (scheduling, input prep, launches, sampling)
      + seqs              x num sequences       per-sequence bookkeeping, LM head row, sampling
      + tokens            x scheduled tokens    every token through the GEMMs and the per-token kernels
      + tokens_over_knee  x max(0, tokens - K)  GEMMs turning compute-bound: below the knee K their time is the
                                                weight read (inside ``step``), above it it grows with tokens
      + attn_pairs        x sum(n c + n(n+1)/2) attention (query, key) pairs: QK^T and PV FLOPs
      + kv_read_tokens    x sum(c + n)          KV-cache tokens read (and gathered) by attention
      + padded_kv_tokens  x seqs x max(c + n)   KV slots a batched attention that pads every sequence to the
                                                longest reads (the calibration engine's batched SDPA does; a
                                                varlen kernel such as vLLM's FlashAttention fits ~0 here)

with n a sequence's new tokens and c its tokens already computed. Every coefficient is physically
non-negative and fitted so (NNLS). The profile also carries the fit's held-out error and residuals and the
range of each feature it was fitted on; a step outside that range is predicted by extrapolation, and the
model says so once (a ``ProfileRangeWarning``) and counts such steps.

This module is pure Python on the simulator's hot path (no numpy, no torch): ``step_time_s`` costs a few
microseconds. ``step_features`` is the one definition of the features; the fitting code imports it.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from operator import add, mul
from pathlib import Path
from typing import Any

from twin.cost.base import StepShape
from twin.errors import TwinInputError

PROFILE_FORMAT = "twin-profile"
PROFILE_VERSION = 1
SUPPORTED_VERSIONS = (1,)

# coefficient names, in design-matrix order (seconds per unit of the feature)
FEATURE_NAMES: tuple[str, ...] = ("step", "seqs", "tokens", "tokens_over_knee", "attn_pairs", "kv_read_tokens",
                                  "padded_kv_tokens")
FEATURE_UNITS: dict[str, str] = {
    "step": "s per step", "seqs": "s per sequence", "tokens": "s per scheduled token",
    "tokens_over_knee": "s per scheduled token beyond knee_tokens", "attn_pairs": "s per attention (query, key) pair",
    "kv_read_tokens": "s per KV token read", "padded_kv_tokens": "s per padded KV slot (seqs x longest)"}
# the step aggregates whose fitted [min, max] a profile records; the model checks each step against the max
RANGE_FIELDS: tuple[str, ...] = ("seqs", "tokens", "attn_pairs", "kv_read_tokens", "max_seq_len", "padded_kv_tokens")
MODEL_SHAPE_FIELDS: tuple[str, ...] = ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                       "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size")


class ProfileWarning(UserWarning):
    """Something about a profile's use deserves attention (measured on another device, extrapolation)."""


class ProfileRangeWarning(ProfileWarning):
    """A step lies outside the range of steps the profile was fitted on (its time is extrapolated)."""


class ForeignProfileWarning(ProfileWarning):
    """The profile was measured on another machine (another CPU model or GPU) than the one it is used on."""


def measured_on(doc: Mapping[str, Any]) -> str | None:
    """The device a profile was measured on, by name (``device.name``; older files: ``environment.device_name``)."""
    name = (doc.get("device") or {}).get("name") or (doc.get("environment") or {}).get("device_name")
    return str(name) if name else None


def foreign_machine(doc: Mapping[str, Any], here: str, source: str = "profile") -> str | None:
    """One line saying that the profile was measured on another device than ``here`` (this machine's CPU or
    GPU, by name), or None when they are the same or the profile does not say where it was measured."""
    from twin.hardware.host import same_device

    there = measured_on(doc)
    if there is None or same_device(there, here):
        return None
    source = os.path.normpath(source)
    return (f"cost model profile {source} was measured on {there!r}, not on this machine ({here!r}): its step "
            f"times are that machine's, so timings compared with this machine's will differ; calibrate here "
            f"(twin calibrate --quick -o here.json) for comparable ones")


def warn_if_foreign(doc: Mapping[str, Any], here: str, source: str = "profile") -> str | None:
    """Warn (once per message, a ``ForeignProfileWarning``) if the profile was measured on another device than
    ``here``; return the message, or None."""
    message = foreign_machine(doc, here, source)
    if message is not None:
        warnings.warn(message, ForeignProfileWarning, stacklevel=1)
    return message


def step_features(num_new_tokens: Sequence[int], num_computed_before: Sequence[int]
                  ) -> tuple[int, int, float, int, int, int]:
    """``(seqs, tokens, attn_pairs, kv_read_tokens, max_seq_len, padded_kv_tokens)`` of a step (the order of
    ``RANGE_FIELDS``): the number of sequences, the scheduled tokens, the attention (query, key) pairs
    ``sum(n c + n(n+1)/2)``, the KV tokens attention reads ``sum(c + n)``, the longest sequence after the step
    ``max(c + n)``, and ``seqs x max(c + n)``."""
    nn, cc = num_new_tokens, num_computed_before
    seqs = len(nn)
    if not seqs:
        return 0, 0, 0.0, 0, 0, 0
    context = sum(cc)
    if nn.count(1) == seqs:                        # pure decode
        longest = max(cc) + 1
        return seqs, seqs, float(context + seqs), context + seqs, longest, seqs * longest
    tokens = sum(nn)
    pairs = sum(map(mul, nn, cc)) + 0.5 * (sum(map(mul, nn, nn)) + tokens)
    longest = max(map(add, nn, cc))
    return seqs, tokens, pairs, context + tokens, longest, seqs * longest


# ---------------------------------------------------------------------------------------------------- loading

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


def _number(value: Any, field: str, source: str, *, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
        raise _bad(source, field, value, f"must be a finite number >= {minimum:g}")
    return float(value)


def read_profile(path: str | Path) -> dict[str, Any]:
    """Read and validate a profile JSON file; ``TwinInputError`` (one line, naming the field) if it is bad."""
    p = Path(path)
    source = f"profile {p}"
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise TwinInputError(f"{source}: cannot read file ({e.strerror or e})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
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
        _number(value, f"cost_model.coefficients.{name}", source)
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
    model = doc.get("model")
    if model is not None:
        if not isinstance(model, Mapping):
            raise _bad(source, "model", model, "must be a JSON object")
        for name in MODEL_SHAPE_FIELDS:
            if name in model and model[name] is not None:
                v = model[name]
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise _bad(source, f"model.{name}", v, "must be a positive integer")


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


# ---------------------------------------------------------------------------------------------------- the model

class ProfileCostModel:
    """Step time from a calibrated profile (see the module docstring)."""

    name = "profile"

    def __init__(self, profile: Mapping[str, Any] | str | Path, *, check_range: bool = True,
                 source: str | None = None) -> None:
        if isinstance(profile, (str, Path)):
            path = resolve_profile_path(profile)
            doc = read_profile(path)
            source = source or str(path)
        else:
            doc = profile
            source = source or "profile"
            validate_profile(doc, f"profile {source}")
        self.profile: Mapping[str, Any] = doc
        self.source = source
        cm = doc["cost_model"]
        coefs = {name: float(cm["coefficients"].get(name, 0.0)) for name in FEATURE_NAMES}
        self.coefficients = coefs
        self.knee_tokens = float(cm.get("knee_tokens", 0) or 0)
        self._c = tuple(coefs[name] for name in FEATURE_NAMES)
        rng = doc.get("range") or {}
        self.range: dict[str, tuple[float, float]] = {
            name: (float(rng[name][0]), float(rng[name][1])) for name in RANGE_FIELDS if name in rng}
        inf = math.inf
        self._max = tuple(self.range.get(name, (0.0, inf))[1] for name in RANGE_FIELDS)
        self.check_range = check_range and bool(self.range)
        self.num_out_of_range = 0
        self._warned = False

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> ProfileCostModel:
        return cls(path, **kwargs)

    # ------------------------------------------------------------------------------------------------ hot path
    def step_time_s(self, step: StepShape) -> float:
        nn = step.num_new_tokens
        seqs = len(nn)
        if not seqs:
            return 0.0
        cc = step.num_computed_before
        context = sum(cc)
        if nn.count(1) == seqs:                    # pure decode: n = 1 everywhere
            tokens = seqs
            pairs = context + seqs
            max_len = max(cc) + 1
        else:
            tokens = sum(nn)
            pairs = sum(map(mul, nn, cc)) + 0.5 * (sum(map(mul, nn, nn)) + tokens)
            max_len = max(map(add, nn, cc))
        kv = context + tokens
        padded = seqs * max_len
        c_step, c_seqs, c_tok, c_knee, c_pairs, c_kv, c_pad = self._c
        t = c_step + c_seqs * seqs + c_tok * tokens + c_pairs * pairs + c_kv * kv + c_pad * padded
        if tokens > self.knee_tokens:
            t += c_knee * (tokens - self.knee_tokens)
        if self.check_range:
            m_seqs, m_tok, m_pairs, m_kv, m_len, m_pad = self._max
            if seqs > m_seqs or tokens > m_tok or pairs > m_pairs or kv > m_kv or max_len > m_len or padded > m_pad:
                self._out_of_range(seqs, tokens, pairs, kv, max_len, padded)
        return t

    def _out_of_range(self, *values: float) -> None:
        self.num_out_of_range += 1
        if self._warned:
            return
        self._warned = True
        over = [f"{name}={v:g} (fitted up to {hi:g})"
                for name, v, hi in zip(RANGE_FIELDS, values, self._max) if v > hi]
        warnings.warn(
            f"cost model profile {self.source}: a step lies outside the fitted range ({'; '.join(over)}); "
            f"its time is extrapolated. Calibrate over larger steps for trustworthy predictions. "
            f"(Warned once; ProfileCostModel.num_out_of_range counts such steps.)",
            ProfileRangeWarning, stacklevel=3)

    # ------------------------------------------------------------------------------------------------ reports
    def features(self, step: StepShape) -> dict[str, float]:
        seqs, tokens, pairs, kv, max_len, padded = step_features(list(step.num_new_tokens),
                                                                 list(step.num_computed_before))
        return {"step": 1.0 if seqs else 0.0, "seqs": seqs, "tokens": tokens,
                "tokens_over_knee": max(0.0, tokens - self.knee_tokens) if seqs else 0.0,
                "attn_pairs": pairs, "kv_read_tokens": kv, "padded_kv_tokens": padded, "max_seq_len": max_len}

    def explain(self, step: StepShape) -> dict[str, float]:
        """The step's time by term: ``<feature>_s`` = coefficient x feature, plus ``total_s``."""
        f = self.features(step)
        parts = {f"{name}_s": self.coefficients[name] * f[name] for name in FEATURE_NAMES}
        parts["total_s"] = self.step_time_s(step)
        return parts

    def in_range(self, step: StepShape) -> bool:
        f = self.features(step)
        return all(f[name] <= hi for name, (_, hi) in self.range.items())

    def parameters(self) -> dict[str, object]:
        doc = self.profile
        return {"kind": self.name, "source": self.source, "model": (doc.get("model") or {}).get("name"),
                "device": (doc.get("device") or {}).get("name"), "dtype": doc.get("dtype"),
                "knee_tokens": self.knee_tokens, **{f"coef_{k}": v for k, v in self.coefficients.items()}}

    def __repr__(self) -> str:
        return f"ProfileCostModel({self.source})"


# ---------------------------------------------------------------------------------------------------- builder

def _shape_of(model: Any) -> dict[str, int]:
    return {name: getattr(model, name) for name in MODEL_SHAPE_FIELDS}


def build_profile_cost_model(model: Any, gpu: Any, tp: int, weight_dtype: str, kv_dtype: str,
                   params: dict[str, Any]) -> ProfileCostModel:
    unknown = [k for k in params if k not in ("path",)]
    if unknown:
        raise TwinInputError(f"cost_model.params.{unknown[0]}: unknown parameter for kind 'profile'; allowed: "
                             f"path (set by cost_model.profile)")
    if not params.get("path"):
        raise TwinInputError("cost_model.profile: is required when kind is 'profile' (a calibrated profile JSON "
                             "path, e.g. calibration/profiles/tiny-llama-cpu.json)")
    cm = ProfileCostModel(str(params["path"]))
    prof_model = cm.profile.get("model") or {}
    want = _shape_of(model)
    for name, value in want.items():
        got = prof_model.get(name)
        if got is not None and got != value:
            raise TwinInputError(
                f"cost_model.profile {cm.source}: model.{name} = {got} but the deployment's model "
                f"{model.name} has {value}; a profile only predicts the model it was calibrated on")
    prof_tp = int(cm.profile.get("tensor_parallel_size", 1) or 1)
    if tp != prof_tp:
        raise TwinInputError(f"deployment.tensor_parallel_size = {tp}: the profile {cm.source} was calibrated "
                             f"at tensor_parallel_size {prof_tp}")
    device = cm.profile.get("device") or {}
    if device.get("type") == "cpu" and getattr(gpu, "name", None) == "CPU":
        # a CPU deployment is this machine's CPU: a profile from another CPU model predicts that one's times
        from twin.hardware.host import cpu_name

        warn_if_foreign(cm.profile, cpu_name(), cm.source)
    catalog_gpu = device.get("catalog_gpu")
    if catalog_gpu and getattr(gpu, "name", None) and catalog_gpu != gpu.name:
        warnings.warn(f"cost model profile {cm.source} was measured on {catalog_gpu} "
                      f"({device.get('name', '?')}); the deployment says {gpu.name}", ProfileWarning,
                      stacklevel=2)
    return cm
