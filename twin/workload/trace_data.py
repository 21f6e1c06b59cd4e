"""A trace read into memory: ``Trace`` (one numpy array per column, file order, read-only) and
``TraceWarning``, the warning a lenient read (rows changed or left out) emits."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MOONCAKE_BLOCK = 512


class TraceWarning(UserWarning):
    """A trace was read under a lenient policy (rows changed or left out); the message has the count."""


@dataclass(eq=False)
class Trace:
    """A trace's requests as arrays (file order). ``arrival_s`` is None when the file has no timestamps."""

    path: Path
    format: str
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    arrival_s: np.ndarray | None
    lines: np.ndarray
    hash_ids: list[tuple[int, ...]] | None = None
    block_size: int = MOONCAKE_BLOCK
    session_ids: list[int | None] | None = None
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.prompt_tokens)

    @property
    def has_timestamps(self) -> bool:
        return self.arrival_s is not None

    def prompt_segments(self, i: int, request_id: int) -> tuple[tuple[tuple, int], ...]:
        """Row ``i``'s prompt as segments: Mooncake hash blocks, else one unique ``("u", request_id)``."""
        n = int(self.prompt_tokens[i])
        ids = self.hash_ids[i] if self.hash_ids is not None else None
        if not ids:
            return ((("u", request_id), n),)
        b = self.block_size
        segs = [(("mc", h), b) for h in ids[:-1]]
        segs.append((("mc", ids[-1]), n - b * (len(ids) - 1)))
        return tuple(segs)
