"""The request path's random part: each request's extra front-end delay in units of its mean.

A server's front end (HTTP, tokenisation, the hand-off to the engine core, streaming back) costs a fixed
``request_path_s`` plus a variable part (event-loop contention, garbage collection, the network): an exponential
delay with mean ``request_path_jitter_s``. The k-th request dispatched (in arrival order) draws the k-th value
of one seeded stream, so a replay can regenerate exactly the draws a simulation used."""

from __future__ import annotations

import numpy as np

_STREAM = 0x70617468      # "path": keeps this stream apart from the workload's


class PathDraws:
    """Exponential(1) draws in dispatch order, generated in blocks."""

    def __init__(self, seed: int, block: int = 4096) -> None:
        self._rng = np.random.default_rng([seed, _STREAM])
        self._block = block
        self._buf: list[float] = []
        self._i = 0

    def next(self) -> float:
        if self._i >= len(self._buf):
            self._buf = self._rng.exponential(1.0, self._block).tolist()
            self._i = 0
        v = self._buf[self._i]
        self._i += 1
        return v


def path_draws(seed: int, n: int) -> np.ndarray:
    """The first ``n`` draws ``PathDraws(seed)`` gives."""
    d = PathDraws(seed)
    return np.array([d.next() for _ in range(n)])
