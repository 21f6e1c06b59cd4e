"""Named random streams from one seed.

Each consumer (arrivals, class choice, each class's lengths, prefixes, turns, ...) gets its own
``numpy.random.Generator``. Streams are children of ``SeedSequence(seed)`` exactly as ``spawn`` makes them
(a child is ``SeedSequence(seed, spawn_key=(k,))``), but ``k`` is derived from the stream's *name*
(CRC-32) instead of its position, so adding a class or a knob never reshuffles another stream.
"""

from __future__ import annotations

import zlib

import numpy as np


def _key(name: str | int) -> int:
    if isinstance(name, int):
        return name
    return zlib.crc32(name.encode("utf-8"))


def stream(seed: int, *names: str | int) -> np.random.Generator:
    """The generator for stream ``names`` (e.g. ``stream(0, "class", "agent", "output")``)."""
    ss = np.random.SeedSequence(int(seed), spawn_key=tuple(_key(n) for n in names))
    return np.random.Generator(np.random.PCG64(ss))
