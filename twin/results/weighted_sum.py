"""Weighted sums for the results, without BLAS.

``np.dot`` hands long float vectors to BLAS, whose threads keep spinning on the other cores after the call: a
summary run folding its ITL every 64 Ki emissions used twice its CPU time on 2 cores, and the processes of a
parallel sweep stole each other's cores. numpy's own multiply and sum stay on the calling thread.
"""

from __future__ import annotations

import numpy as np


def weighted_sum(values: np.ndarray, weights: np.ndarray) -> float:
    """Sum of ``values * weights``."""
    return float((values * weights).sum())
