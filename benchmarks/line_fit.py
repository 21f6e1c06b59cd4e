"""A straight line y = a + b x fitted by least squares, with the rms of its residuals: the readings' shared fit
(issue 33, round 16: the light-load rows' per-layer split, the a + b / TP split, a stream rate's slope). Callers
check that their points hold two distinct x (each says which quantity is then not identified)."""

from __future__ import annotations

import numpy as np


def line_fit(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(a, b, rms) of y = a + b x over ``points`` ((x, y)) by least squares."""
    x = np.array([[1.0, u] for u, _ in points])
    y = np.array([v for _, v in points])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(beta[0]), float(beta[1]), float(np.sqrt(np.mean((x @ beta - y) ** 2)))
