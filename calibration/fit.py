"""Fit a per-step cost model to measured steps and write it as a versioned profile (no torch here).

The model (``twin.cost.profile``) is linear in features the roofline reasons with::

    t = step + seqs * S + tokens * T + max(0, T - K) * knee + attn_pairs * P + kv_read_tokens * R
          + padded_kv_tokens * D + [not a pure decode] * M

* every coefficient is a time per unit of real work (or the fixed per-step overhead), so it is non-negative:
  the fit is non-negative least squares (``scipy.optimize.nnls``); ``nonnegative=False`` gives plain least
  squares for comparison;
* rows are weighted by 1 / measured time, so the fit minimises *relative* error: step times span three orders
  of magnitude (a decode of one sequence to a prefill of thousands of tokens) and a 1 ms error matters on the
  first, not on the second;
* the knee K (where the GEMMs turn from weight-read-bound to compute-bound, the roofline's ridge point in
  tokens) is chosen from a grid of candidate token counts by the training error; 0 means no knee;
* the samples are split, per kind, into a training and a held-out set (seeded); the shipped coefficients are
  the training fit, and the held-out error (MAPE, p90 absolute and relative error) is what the profile reports.

``fit_samples`` returns a :class:`Fit`; ``make_profile`` turns it into the profile document
(``{"format": "twin-profile", "version": 1, ...}``) that ``twin.cost.profile.ProfileCostModel`` reads.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import nnls

from calibration.samples import StepSample, timing_noise
from twin.cost.profile_features import (FEATURE_NAMES, FEATURE_UNITS, PROFILE_FORMAT, PROFILE_VERSION,
                                        RANGE_FIELDS, DecodePadding, step_features)

KNEE = FEATURE_NAMES.index("tokens_over_knee")


# ---------------------------------------------------------------------------------------------------- features

def base_features(samples: Sequence[StepSample], decode_padding: DecodePadding | None = None) -> np.ndarray:
    """``[N, len(RANGE_FIELDS)]``: seqs, tokens, attn_pairs, kv_read_tokens, max_seq_len, padded_kv_tokens of
    each sample (pure decodes padded as ``decode_padding`` says, when given)."""
    return np.array([step_features(s.num_new_tokens, s.num_computed_before, decode_padding) for s in samples],
                    dtype=float).reshape(len(samples), len(RANGE_FIELDS))


def design_matrix(base: np.ndarray, knee_tokens: float) -> np.ndarray:
    """``[N, len(FEATURE_NAMES)]`` in ``FEATURE_NAMES`` order (the knee column is zero when ``knee_tokens`` is
    0: then it would only duplicate ``tokens``)."""
    seqs, tokens, pairs, kv, padded = base[:, 0], base[:, 1], base[:, 2], base[:, 3], base[:, 5]
    hinge = np.maximum(tokens - knee_tokens, 0.0) if knee_tokens > 0 else np.zeros_like(tokens)
    mixed = (tokens > seqs).astype(float)         # some sequence computes more than one token
    return np.column_stack([np.ones_like(seqs), seqs, tokens, hinge, pairs, kv, padded, mixed])


def solve(X: np.ndarray, y: np.ndarray, *, relative: bool = True, nonnegative: bool = True,
          weights: np.ndarray | None = None) -> np.ndarray:
    """Coefficients of ``y ~ X @ coef``: non-negative least squares (or plain least squares), on relative
    residuals ``(X @ coef - y) / y`` when ``relative``, each squared residual multiplied by ``weights``.
    Columns are rescaled for conditioning; an all-zero column gets coefficient 0."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    w = 1.0 / y if relative else np.ones_like(y)
    if weights is not None:
        w = w * np.sqrt(np.asarray(weights, dtype=float))
    A = X * w[:, None]
    b = y * w
    scale = np.abs(A).max(axis=0)
    live = scale > 0
    coef = np.zeros(X.shape[1])
    As = A[:, live] / scale[live]
    if nonnegative:
        sol, _ = nnls(As, b, maxiter=50 * X.shape[1] + 100)
    else:
        sol = np.linalg.lstsq(As, b, rcond=None)[0]
    coef[live] = sol / scale[live]
    return coef


# ---------------------------------------------------------------------------------------------------- metrics

def error_metrics(measured: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """MAPE and percentiles of absolute percentage error, p90 absolute error (seconds), RMSE."""
    y = np.asarray(measured, dtype=float)
    p = np.asarray(predicted, dtype=float)
    if not len(y):
        return {"n": 0}
    ape = np.abs(p - y) / y * 100.0
    ae = np.abs(p - y)
    return {"n": int(len(y)), "mape_pct": float(ape.mean()), "median_ape_pct": float(np.median(ape)),
            "p90_ape_pct": float(np.percentile(ape, 90)), "max_ape_pct": float(ape.max()),
            "p90_abs_error_s": float(np.percentile(ae, 90)), "rmse_s": float(np.sqrt(np.mean((p - y) ** 2))),
            "bias_pct": float(np.mean((p - y) / y) * 100.0)}


def split_indices(kinds: Sequence[str], test_fraction: float, seed: int) -> np.ndarray:
    """Boolean test mask: per kind, ``round(test_fraction * count)`` samples (at least one where the kind has
    five or more), chosen by a seeded permutation."""
    rng = np.random.default_rng(seed)
    kinds_arr = np.asarray(kinds)
    test = np.zeros(len(kinds_arr), dtype=bool)
    if test_fraction <= 0:
        return test
    for kind in sorted(set(kinds)):
        idx = np.flatnonzero(kinds_arr == kind)
        k = int(round(test_fraction * len(idx)))
        if k == 0 and len(idx) >= 5:
            k = 1
        k = min(k, len(idx) - 1)
        if k > 0:
            test[rng.permutation(idx)[:k]] = True
    return test


def knee_candidates(tokens: np.ndarray, max_candidates: int = 48) -> list[float]:
    """0 (no knee) and up to ``max_candidates`` distinct token counts of the data, spread over its quantiles."""
    uniq = np.unique(tokens[tokens > 1])
    if len(uniq) > max_candidates:
        uniq = np.unique(np.quantile(uniq, np.linspace(0, 1, max_candidates), method="nearest"))
    return [0.0] + [float(u) for u in uniq[:-1]]   # a knee at the largest count would fit nothing


# ---------------------------------------------------------------------------------------------------- the fit

@dataclass
class Fit:
    coefficients: dict[str, float]
    knee_tokens: float
    metrics: dict[str, Any]
    range: dict[str, list[float]]
    residuals: dict[str, list]
    options: dict[str, Any] = field(default_factory=dict)
    decode_padding: DecodePadding | None = None

    def predict(self, samples: Sequence[StepSample]) -> np.ndarray:
        X = design_matrix(base_features(samples, self.decode_padding), self.knee_tokens)
        return X @ np.array([self.coefficients[n] for n in FEATURE_NAMES])

    @property
    def test(self) -> dict[str, float]:
        return self.metrics["test"] if self.metrics["test"].get("n") else self.metrics["train"]


REPLAY_SHARE = 0.5


def kind_weights(kinds: Sequence[str], replay_share: float = REPLAY_SHARE) -> np.ndarray:
    """Per-sample weights: steps recorded while serving a replay (the steps the twin predicts) carry
    ``replay_share`` of the total weight, and the sweep kinds (which cover the range) share the rest equally,
    so that a long replay does not drown the sweeps nor the sweeps' synthetic batches bias serving steps."""
    kinds_arr = np.asarray(kinds)
    uniq, counts = np.unique(kinds_arr, return_counts=True)
    n = len(kinds_arr)
    has_replay = "replay" in uniq
    sweep_kinds = [k for k in uniq if k != "replay"]
    if not has_replay or not sweep_kinds:
        per = {k: n / (len(uniq) * c) for k, c in zip(uniq, counts)}
    else:
        count = dict(zip(uniq, counts))
        per = {k: (1.0 - replay_share) * n / (len(sweep_kinds) * count[k]) for k in sweep_kinds}
        per["replay"] = replay_share * n / count["replay"]
    return np.array([per[k] for k in kinds_arr])


def fit_samples(samples: Sequence[StepSample], *, target: str = "wall", test_fraction: float = 0.2, seed: int = 0,
                relative: bool = True, nonnegative: bool = True, knees: Sequence[float] | None = None,
                balance_kinds: bool = True, min_train: int | None = None,
                decode_padding: DecodePadding | None = None) -> Fit:
    """Fit the profile cost model to ``samples`` (see the module docstring). ``balance_kinds`` weighs every
    kind of sample (prefill, decode, mixed, random, replay) equally in the loss. ``decode_padding``: the
    engine's decode-graph padding (``twin.cost.profile_features.decode_padded_slots``), None for an unpadded engine."""
    samples = [s for s in samples if s.num_new_tokens]
    if not samples:
        raise ValueError("no samples to fit")
    y = np.array([s.target_s(target) for s in samples])
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("measured step times must be finite and > 0")
    base = base_features(samples, decode_padding)
    kinds = [s.kind for s in samples]
    test = split_indices(kinds, test_fraction, seed)
    train = ~test
    need = min_train if min_train is not None else 2 * len(FEATURE_NAMES)
    if train.sum() < need:
        raise ValueError(f"only {int(train.sum())} training samples; the fit needs at least {need} "
                         f"(give the profiler a larger time budget)")
    w = kind_weights([k for k, t in zip(kinds, train) if t]) if balance_kinds else np.ones(int(train.sum()))
    best = None
    for knee in (knees if knees is not None else knee_candidates(base[train, 1])):
        X = design_matrix(base[train], knee)
        coef = solve(X, y[train], relative=relative, nonnegative=nonnegative, weights=w)
        r = (X @ coef - y[train]) / (y[train] if relative else 1.0)
        loss = float(r @ (w * r))
        if best is None or loss < best[0] - 1e-12 * max(1.0, best[0]):
            best = (loss, knee, coef)
    _, knee, coef = best
    if knee > 0 and coef[KNEE] <= 0:
        knee = 0.0   # the hinge did not help: no knee
        coef = solve(design_matrix(base[train], 0.0), y[train], relative=relative, nonnegative=nonnegative,
                     weights=w)
    pred = design_matrix(base, knee) @ coef
    metrics: dict[str, Any] = {
        "train": error_metrics(y[train], pred[train]),
        "test": error_metrics(y[test], pred[test]),
        "all": error_metrics(y, pred),
        "test_by_kind": {}, "all_by_kind": {},
    }
    kinds_arr = np.asarray(kinds)
    for kind in sorted(set(kinds)):
        m = kinds_arr == kind
        metrics["all_by_kind"][kind] = error_metrics(y[m], pred[m])
        if (m & test).any():
            metrics["test_by_kind"][kind] = error_metrics(y[m & test], pred[m & test])
    noise = timing_noise(samples)
    metrics["timing_noise_pct"] = None if noise is None else noise * 100.0
    rng = {name: [float(base[:, j].min()), float(base[:, j].max())] for j, name in enumerate(RANGE_FIELDS)}
    residuals = {"kind": kinds, "split": ["test" if t else "train" for t in test],
                 "measured_s": [float(v) for v in y], "predicted_s": [float(v) for v in pred]}
    return Fit({name: float(c) for name, c in zip(FEATURE_NAMES, coef)}, float(knee), metrics, rng, residuals,
               {"target": target, "test_fraction": test_fraction, "split_seed": seed,
                "weighting": ("relative" if relative else "absolute")
                + (f", replay {REPLAY_SHARE:.0%} and sweep kinds balanced" if balance_kinds else ""),
                "method": "nnls" if nonnegative else "lstsq", "num_samples": len(samples),
                "num_train": int(train.sum()), "num_test": int(test.sum())}, decode_padding)


# ---------------------------------------------------------------------------------------------------- profile

def make_profile(fit: Fit, *, model: Mapping[str, Any], device: Mapping[str, Any], dtype: str,
                 environment: Mapping[str, Any] | None = None, plan: Mapping[str, Any] | None = None,
                 samples_file: str | None = None, tensor_parallel_size: int = 1,
                 extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The versioned profile document (JSON-able)."""
    doc: dict[str, Any] = {
        "format": PROFILE_FORMAT,
        "version": PROFILE_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "model": dict(model),
        "device": dict(device),
        "dtype": dtype,
        "tensor_parallel_size": tensor_parallel_size,
        "cost_model": {
            "form": "t = step + seqs*S + tokens*T + max(0, tokens - knee_tokens)*K + attn_pairs*P "
                    "+ kv_read_tokens*R + padded_kv_tokens*D + mixed_step*M  (seconds; attn_pairs = "
                    "sum(n*c + n(n+1)/2), kv_read_tokens = sum(c+n), padded_kv_tokens = seqs*max(c+n), "
                    "mixed_step = 1 when some n > 1)",
            "coefficients": fit.coefficients,
            "knee_tokens": fit.knee_tokens,
            "units": dict(FEATURE_UNITS),
        },
        "fit": {**fit.options, "metrics": fit.metrics, "residuals": fit.residuals},
        "decode_padding": None if fit.decode_padding is None else {
            "batch_buckets": list(fit.decode_padding[0]), "block_size": fit.decode_padding[1]},
        "range": fit.range,
        "environment": dict(environment or {}),
        "plan": dict(plan or {}),
        "samples_file": samples_file,
    }
    if extra:
        doc.update(extra)
    return doc


def save_profile(path: str | Path, profile: Mapping[str, Any]) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(dumps(profile) + "\n", encoding="utf-8")
    return p


def dumps(obj: Any, indent: int = 0) -> str:
    """JSON with objects indented one key per line and lists kept on one line (residual columns stay short)."""
    if isinstance(obj, Mapping) and obj:
        pad = " " * (indent + 1)
        items = [f"{pad}{json.dumps(str(k))}: {dumps(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    return json.dumps(obj, default=_json_default, separators=(", ", ": "))


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return None if not math.isfinite(o) else float(o)
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")


def summarize(fit: Fit) -> str:
    """One line of fit quality."""
    t = fit.test
    return (f"held-out MAPE {t['mape_pct']:.1f}%, p90 |error| {t['p90_abs_error_s'] * 1e3:.3g} ms "
            f"({t['p90_ape_pct']:.1f}%), {t['n']} held-out of {fit.options['num_samples']} steps")
