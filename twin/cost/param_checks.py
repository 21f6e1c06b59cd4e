"""Checks of a cost model's numeric parameters: a clear one-line ``TwinInputError`` naming the parameter, its
value and the allowed range, never a silent clamp."""

from __future__ import annotations

import math

from twin.errors import TwinInputError


def check_fraction(name: str, v: float) -> float:
    """``v`` as a float, if it is a number in (0, 1] (an efficiency)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 < v <= 1.0):
        raise TwinInputError(f"{name} = {v!r}: must be a number in (0, 1]")
    return float(v)


def check_nonneg(name: str, v: float) -> float:
    """``v`` as a float, if it is a finite number >= 0 (seconds)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise TwinInputError(f"{name} = {v!r}: must be a finite number >= 0 (seconds)")
    return float(v)
