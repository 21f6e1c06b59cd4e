"""Trace readers: Azure LLM inference 2023 CSV, Mooncake JSONL, BurstGPT CSV, length-only CSV.

Every reader returns a ``Trace`` of plain numpy arrays (one entry per data row, file order) and never drops a
row silently. A row that cannot be read (missing column, non-numeric or negative value, a timestamp that is
malformed or goes back in time, a line that is not JSON) raises ``TwinInputError("path:line: column 'X' ...")``.

Policies:

* A prompt of 0 tokens is an error (a server needs at least one prompt token).
* An output of 0 tokens follows ``zero_output``: ``"error"`` (default: refuse the file, naming the first such
  line), ``"one"`` (serve it as a 1-token output: prefill plus one token, the nearest thing a server does) or
  ``"skip"`` (leave the row out). ``one`` and ``skip`` emit one ``TraceWarning`` with the count and record it
  in ``Trace.notes``. (None of the shared Azure/Mooncake/Vidur files has such rows; BurstGPT marks failed
  requests with 0 response tokens.)
* Mooncake ``hash_ids`` name the prompt's ``block_size``-token blocks (512 in the published traces); the
  prompt becomes one segment per id, key ``("mc", id)``, each ``block_size`` tokens except the last, which
  takes the remainder. A row whose id count is not ceil(input_length / block_size) is an error (a trace with
  another block size needs ``block_size`` set); a row without ``hash_ids`` gets a unique prompt.
* Arrivals are seconds since the first row (Azure: wall clock; Mooncake: ms; BurstGPT: s). Timestamps must
  not decrease.
"""

from __future__ import annotations

import os
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np

from twin.errors import TwinInputError
from twin.workload.trace_data import MOONCAKE_BLOCK, Trace, TraceWarning
from twin.workload.trace_formats import (
    LENGTH_COLUMN_DEFAULTS,
    read_azure,
    read_burstgpt,
    read_lengths,
    read_mooncake,
)
from twin.workload.trace_rows import csv_header, csv_rows, frozen, jsonl_rows, token_count

FORMATS = ("azure", "mooncake", "burstgpt", "lengths")


# ---- dispatch ----------------------------------------------------------------------------------------------
def detect_format(path: Path) -> str:
    """``mooncake`` for .jsonl/.json; for CSV by header: azure (TIMESTAMP), burstgpt (Timestamp + Request
    tokens), lengths (anything else with the length columns)."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "mooncake"
    header = csv_header(path)
    if "TIMESTAMP" in header and "ContextTokens" in header:
        return "azure"
    if "Timestamp" in header and "Request tokens" in header:
        return "burstgpt"
    if all(c in header for c in LENGTH_COLUMN_DEFAULTS):
        return "lengths"
    raise TwinInputError(f"{path}:1: cannot tell the trace format from the header ({', '.join(header) or 'empty'});"
                         f" set workload.trace.format to one of {', '.join(FORMATS)}")


def read_trace(path: str | os.PathLike, format: str = "auto", *, zero_output: str = "error",
               block_size: int = MOONCAKE_BLOCK, prompt_column: str | None = None,
               output_column: str | None = None) -> Trace:
    """Read a trace file (cached by path, size, mtime and options; the arrays are read-only)."""
    p = Path(path)
    if not p.is_file():
        raise TwinInputError(f"{p}: trace file not found")
    st = p.stat()
    trace = _read_cached(str(p.resolve()), st.st_size, st.st_mtime_ns, format, zero_output, block_size,
                         prompt_column, output_column)
    for note in trace.notes:
        warnings.warn(note, TraceWarning, stacklevel=2)
    return trace


@lru_cache(maxsize=16)
def _read_cached(path: str, size: int, mtime_ns: int, format: str, zero_output: str, block_size: int,
                 prompt_column: str | None, output_column: str | None) -> Trace:
    p = Path(path)
    fmt = detect_format(p) if format == "auto" else format
    if fmt == "azure":
        return read_azure(p, zero_output=zero_output)
    if fmt == "mooncake":
        return read_mooncake(p, zero_output=zero_output, block_size=block_size)
    if fmt == "burstgpt":
        return read_burstgpt(p, zero_output=zero_output)
    if fmt == "lengths":
        return read_lengths(p, zero_output=zero_output, prompt_column=prompt_column, output_column=output_column)
    raise TwinInputError(f"workload.trace.format: must be one of auto, {', '.join(FORMATS)} (got {format!r})")


def read_column(path: str | os.PathLike, column: str) -> tuple[np.ndarray, np.ndarray]:
    """One column of token counts from a CSV or JSONL file: ``(values int64, line numbers)``, read-only."""
    p = Path(path)
    if not p.is_file():
        raise TwinInputError(f"{p}: file not found")
    st = p.stat()
    return _read_column_cached(str(p.resolve()), st.st_size, st.st_mtime_ns, column)


@lru_cache(maxsize=16)
def _read_column_cached(path: str, size: int, mtime_ns: int, column: str) -> tuple[np.ndarray, np.ndarray]:
    p = Path(path)
    values: list[int] = []
    lines: list[int] = []
    if p.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        for line, obj in jsonl_rows(p):
            if column not in obj:
                raise TwinInputError(f"{p}:{line}: column {column!r} is missing")
            values.append(token_count(obj[column], p, line, column))
            lines.append(line)
    else:
        ci = None
        for line, row, index in csv_rows(p, (column,)):
            if ci is None:
                ci = index[column]
            values.append(token_count(row[ci], p, line, column))
            lines.append(line)
    return frozen(np.asarray(values, dtype=np.int64)), frozen(np.asarray(lines, dtype=np.int64))
