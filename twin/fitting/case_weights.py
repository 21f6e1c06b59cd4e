"""How much each case weighs in the joint fit: the share of the fit's cost a source, and inside it a cell, carries
(issue 33, docs/fidelity.md "Round 19: the fit's case weights").

``source`` (the default since round 4): each source's cases together weigh in proportion to the square root of
their number, shared equally by its cases; so inside the silicon source a (family, GPU) cell weighs in proportion
to its count (MiniMax-M2.5 on B200 about a third of the source's rows, Llama on H100 a few per cent).

``cell``: each source keeps the same total, but shares it among its (family, GPU) cells in proportion to the square
root of each cell's count, equally among a cell's cases. The hypothesis it tests: the shared terms (the client's
request path, the step and per-sequence overheads, the memory efficiencies, the Blackwell terms) are then set by
the server rather than by whichever cell has most rows, so they carry to a held-out family or GPU.

``silicon-cell``: ``cell`` inside the silicon source only (the inference-perf runs, one client on one H100 and
one release, keep the source rule): the imbalance the hypothesis is about is the silicon source's.

Every way a case's own ``weight`` (a silicon row without a published client weighs half) multiplies its share,
and a fold that holds cells out keeps the others' weights as they are (whole cells leave; none is re-balanced).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from twin.errors import TwinInputError

WEIGHTINGS: tuple[str, ...] = ("source", "cell", "silicon-cell")
DEFAULT_WEIGHTING = "source"
# the sources whose total is shared among cells, by weighting (None: every source)
CELLED_SOURCES: dict[str, tuple[str, ...] | None] = {"source": (), "cell": None, "silicon-cell": ("silicon",)}


def case_divisors(cases: Sequence[Any], source_of: Callable[[Any], Hashable],
                  cell_of: Callable[[Any], Hashable], weighting: str = DEFAULT_WEIGHTING) -> list[float]:
    """What each case's own weight is divided by (see the module docstring): sqrt(its source's count) with
    ``source``; with ``cell``, sqrt(its cell's count) x (the sum over its source's cells of sqrt(count)) / sqrt(its
    source's count). ``cell_of``: the case's cell inside its source (read by ``cell`` and ``silicon-cell``)."""
    if weighting not in WEIGHTINGS:
        raise TwinInputError(f"case weighting {weighting!r}: allowed: {', '.join(WEIGHTINGS)}")
    sources = [source_of(c) for c in cases]
    per_source = Counter(sources)
    if weighting == "source":
        return [math.sqrt(per_source[s]) for s in sources]
    celled = CELLED_SOURCES[weighting]
    cells = [(s, cell_of(c) if celled is None or s in celled else None) for s, c in zip(sources, cases)]
    per_cell = Counter(cells)
    roots: Counter = Counter()
    for (s, _), n in per_cell.items():
        roots[s] += math.sqrt(n)
    # a source's total sqrt(n_source); a cell's part of it sqrt(n_cell) / (the source's sum of sqrt(n_cell))
    return [math.sqrt(per_cell[(s, k)]) * roots[s] / math.sqrt(per_source[s]) for s, k in cells]
