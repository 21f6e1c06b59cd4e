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
      + mixed_step        x [some n > 1]        a step that is not a pure decode (a prefill chunk in it): it
                                                cannot replay a captured decode graph, so it pays its kernel
                                                launches (vLLM likewise keeps full graphs for uniform decode)

with n a sequence's new tokens and c its tokens already computed. A profile of an engine that runs decode steps
as padded CUDA graphs (the calibration engine with graphs on) records that padding as ``decode_padding``
(``{"batch_buckets": [1, 2, 4, ...], "block_size": 16}``): a pure decode step of ``seqs`` sequences then reads
``bucket(seqs) x pow2(blocks of the longest) x block_size`` padded KV slots, the rows and the context its graph
was captured for (a batch past the largest bucket runs unpadded). Every coefficient is physically
non-negative and fitted so (NNLS). The profile also carries the fit's held-out error and residuals and the
range of each feature it was fitted on; a step outside that range is predicted by extrapolation, and the
model says so once (a ``ProfileRangeWarning``) and counts such steps.

This module is pure Python on the simulator's hot path (no numpy, no torch): ``step_time_s`` costs a few
microseconds. ``twin.cost.profile_features.step_features`` is the one definition of the features; the fitting code
imports it. Reading and checking a profile file: ``twin.cost.profile_file``.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping
from operator import add, mul
from pathlib import Path
from typing import Any

from twin.cost.base import StepShape
from twin.cost.profile_features import (FEATURE_NAMES, MODEL_SHAPE_FIELDS, RANGE_FIELDS, decode_padded_slots,
                                        step_features)
from twin.cost.profile_file import read_decode_padding, read_profile, resolve_profile_path, validate_profile
from twin.errors import TwinInputError
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
        self.decode_padding = read_decode_padding(doc, source)
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
        c_step, c_seqs, c_tok, c_knee, c_pairs, c_kv, c_pad, c_mixed = self._c
        if nn.count(1) == seqs:                    # pure decode: n = 1 everywhere
            tokens = seqs
            pairs = context + seqs
            max_len = max(cc) + 1
            padded = seqs * max_len if self.decode_padding is None else decode_padded_slots(
                seqs, max_len, self.decode_padding)
        else:
            tokens = sum(nn)
            pairs = sum(map(mul, nn, cc)) + 0.5 * (sum(map(mul, nn, nn)) + tokens)
            max_len = max(map(add, nn, cc))
            c_step += c_mixed
            padded = seqs * max_len
        kv = context + tokens
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
                                                                 list(step.num_computed_before), self.decode_padding)
        return {"step": 1.0 if seqs else 0.0, "seqs": seqs, "tokens": tokens,
                "tokens_over_knee": max(0.0, tokens - self.knee_tokens) if seqs else 0.0,
                "attn_pairs": pairs, "kv_read_tokens": kv, "padded_kv_tokens": padded, "max_seq_len": max_len,
                "mixed_step": 1.0 if tokens > seqs else 0.0}

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
