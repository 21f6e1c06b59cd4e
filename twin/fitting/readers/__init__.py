"""Result-file readers: each turns what a benchmark client wrote into ``MeasuredRun`` values.

``read_results(path)`` recognises the format by its content: inference-perf lifecycle metrics (a results folder
or one stage file); more readers register in ``READERS`` as (name, recogniser, reader)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from twin.errors import TwinInputError
from twin.fitting.measured_run import MeasuredRun
from twin.fitting.readers.inference_perf import is_inference_perf, read_inference_perf

Reader = tuple[str, Callable[[Path], bool], Callable[[Path], list[MeasuredRun]]]
READERS: list[Reader] = [
    ("inference-perf", is_inference_perf, read_inference_perf),
]


def read_results(path: str | Path) -> list[MeasuredRun]:
    """Every run in ``path`` (a file or a results folder); a one-line error when no reader knows it."""
    p = Path(path)
    if not p.exists():
        raise TwinInputError(f"--from-results {p}: no such file or folder")
    for name, recognise, read in READERS:
        if recognise(p):
            return read(p)
    raise TwinInputError(f"--from-results {p}: not a result format twin reads ({', '.join(n for n, _, _ in READERS)})")
