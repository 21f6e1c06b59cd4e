"""Summaries over replications: per metric key, the mean and a Student-t confidence interval."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from twin.errors import TwinInputError


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def replicate_summary(runs: Sequence[Mapping[str, Any]], confidence: float = 0.95) -> dict[str, dict]:
    """Per numeric key over replications: ``mean``, ``half_width`` (Student t, ``confidence`` two-sided),
    ``low``/``high``, sample ``std`` (ddof=1) and ``n`` (replications where the key was defined). Keys whose
    values are not numbers (lists, dicts, strings) are skipped; ``None`` values are left out of ``n``;
    with fewer than two values the half-width and std are ``None``."""
    from scipy import stats

    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise TwinInputError(f"confidence: {confidence!r} is not allowed; give a number in (0, 1), e.g. 0.95")
    runs = list(runs)
    keys: list[str] = []
    for run in runs:
        for k, v in run.items():
            if k not in keys and _is_number(v):
                keys.append(k)
    out: dict[str, dict] = {}
    for k in keys:
        vals = [run.get(k) for run in runs]
        if any(v is not None and not _is_number(v) for v in vals):
            continue
        xs = np.array([float(v) for v in vals if v is not None and math.isfinite(float(v))])
        n = int(xs.size)
        mean = float(xs.mean()) if n else None
        if n >= 2:
            sd = float(xs.std(ddof=1))
            half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
        else:
            sd = half = None
        out[k] = {"mean": mean, "half_width": half, "low": None if half is None else mean - half,
                  "high": None if half is None else mean + half, "std": sd, "n": n}
    return out
