"""Samplers for token-count and duration distributions, and a buffered per-quantity random stream.

Continuous token draws are rounded to the nearest integer and clipped to the distribution's [min, max]
(min defaults to 1). ``empirical`` resamples (with replacement) the values of a trace column.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from twin.errors import TwinInputError
from twin.workload.distribution_config import LengthDist, TimeDist
from twin.workload.paths import expand_path
from twin.yaml_input import not_a_file

_INT_CAP = 1 << 40  # a guard against int64 overflow of absurd lognormal tails, not a modelling limit


class LengthSampler:
    """Draws integer token counts from a ``LengthDist``.

    ``field`` names the config field in error messages; ``min_value`` is the least value the use allows
    (1 for outputs): an empirical column holding less is an error, not a clamp.
    """

    def __init__(self, dist: LengthDist, *, field: str, min_value: int = 0,
                 base_dir: str | Path | None = None) -> None:
        self.dist = dist
        self.field = field
        self._values: np.ndarray | None = None
        if dist.empirical is not None:
            from twin.workload.traces import read_column  # local: traces imports nothing from here

            path = expand_path(dist.empirical.path, base_dir)
            kind = not_a_file(path)
            if kind is not None:
                raise TwinInputError(f"{field}.empirical.path: {path} is {kind}; the lengths must be a file")
            if not path.is_file():
                raise TwinInputError(f"{field}.empirical.path: file not found: {path}")
            values, lines = read_column(path, dist.empirical.column)
            if len(values) == 0:
                raise TwinInputError(f"{field}.empirical: {path} has no rows in column "
                                     f"{dist.empirical.column!r}")
            bad = np.flatnonzero(values < min_value)
            if len(bad):
                i = int(bad[0])
                raise TwinInputError(f"{path}:{int(lines[i])}: column {dist.empirical.column!r} is "
                                     f"{int(values[i])}, but {field} must be >= {min_value}")
            self._values = values

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """``n`` draws as int64 (``n=None``: one draw, still an array of shape ())."""
        d = self.dist
        if d.fixed is not None:
            return np.full(() if n is None else n, d.fixed, dtype=np.int64)
        if d.uniform is not None:
            lo, hi = d.uniform
            return rng.integers(lo, hi + 1, size=n, dtype=np.int64)
        if d.lognormal is not None:
            p = d.lognormal
            x = rng.lognormal(math.log(p.median), p.sigma, size=n)
            return _round_clip(x, p.min, p.max)
        if d.normal is not None:
            p = d.normal
            x = rng.normal(p.mean, p.std, size=n)
            return _round_clip(x, p.min, p.max)
        assert self._values is not None
        idx = rng.integers(0, len(self._values), size=n)
        return self._values[idx]


def _round_clip(x: np.ndarray, lo: int, hi: int | None) -> np.ndarray:
    top = _INT_CAP if hi is None else hi
    return np.clip(np.rint(x), lo, top).astype(np.int64)


class TimeSampler:
    """Draws non-negative durations (seconds) from a ``TimeDist``."""

    def __init__(self, dist: TimeDist) -> None:
        self.dist = dist

    @property
    def always_zero(self) -> bool:
        return self.dist.fixed == 0

    def sample(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        d = self.dist
        if d.fixed is not None:
            return np.full(() if n is None else n, float(d.fixed))
        if d.uniform is not None:
            return rng.uniform(d.uniform[0], d.uniform[1], size=n)
        if d.exponential is not None:
            return rng.exponential(d.exponential.mean, size=n)
        p = d.lognormal
        x = rng.lognormal(math.log(p.median), p.sigma, size=n)
        return np.clip(x, p.min, np.inf if p.max is None else p.max)


class Buffered:
    """One quantity's draws, made ``chunk`` at a time from its own generator and handed out in order.

    Drawing in fixed chunks keeps the sequence a pure function of the seed and the number of values taken,
    and keeps per-request draws cheap."""

    __slots__ = ("_draw", "_rng", "_chunk", "_buf", "_pos")

    def __init__(self, draw, rng: np.random.Generator, chunk: int = 1024) -> None:
        self._draw = draw  # draw(rng, n) -> array of n values
        self._rng = rng
        self._chunk = chunk
        self._buf: list = []
        self._pos = 0

    def take(self):
        if self._pos >= len(self._buf):
            self._buf = self._draw(self._rng, self._chunk).tolist()
            self._pos = 0
        v = self._buf[self._pos]
        self._pos += 1
        return v
