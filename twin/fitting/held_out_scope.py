"""Which cases a restricted held-out report predicts at the embedded defaults (issue 33, round 23: a faster report,
the same numbers).

``benchmarks/fidelity_real.py`` predicts every case at the embedded defaults before its folds: the held-out
figures' "defaults" lines and a fold that fits nothing read those predictions, and only for the cases a fold holds
out. Where ``--groups`` names some groups, the other cases' default predictions are never read, yet each
inference-perf stage among them was simulated whole (its 600-1200 s: most of a restricted run's start). This module
names the cases that are read, so the report simulates those alone; the numbers it prints and writes are the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from twin.errors import TwinInputError


def read_default_indices(cases: Sequence, kinds: str, only: set[str], folds: dict[str, Callable]) -> set[int] | None:
    """The indices of ``cases`` whose embedded-default prediction a report over the fold ``kinds`` (``--folds``:
    comma-separated keys of ``folds``, each a case's group under that fold) restricted to the groups ``only`` reads:
    a case some requested fold kind puts in one of ``only``. ``None`` where ``only`` is empty (every group is held
    out: every case is read)."""
    if not only:
        return None
    kinds = [k.strip() for k in kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in folds]
    if unknown:
        raise TwinInputError(f"--folds: unknown fold kind {unknown[0]!r}; allowed: {', '.join(folds)}")
    return {i for i, c in enumerate(cases) if any(folds[k](c) in only for k in kinds)}


def restricted(indices: Sequence[int], read: set[int] | None) -> list[int]:
    """``indices`` less those a restricted report never reads (``read_default_indices``; ``None``: all kept), in
    their order."""
    return list(indices) if read is None else [i for i in indices if i in read]
