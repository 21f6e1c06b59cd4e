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

import csv
import datetime as _dt
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from twin.errors import TwinInputError

FORMATS = ("azure", "mooncake", "burstgpt", "lengths")
MOONCAKE_BLOCK = 512
LENGTH_COLUMN_DEFAULTS = ("num_prefill_tokens", "num_decode_tokens")


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


# ---- value parsing -----------------------------------------------------------------------------------------
def _where(path: Path, line: int) -> str:
    return f"{path}:{line}"


def _count(raw, path: Path, line: int, column: str) -> int:
    """A non-negative integer token count (``"12"``, ``12``, ``"12.0"``)."""
    if isinstance(raw, bool):
        raise TwinInputError(f"{_where(path, line)}: column {column!r} must be a token count (got {raw!r})")
    if isinstance(raw, int):
        v = raw
    else:
        text = raw.strip() if isinstance(raw, str) else raw
        if text == "" or text is None:
            raise TwinInputError(f"{_where(path, line)}: column {column!r} is empty")
        try:
            v = int(text)
        except (TypeError, ValueError):
            try:
                f = float(text)
            except (TypeError, ValueError):
                f = math.nan
            if not (math.isfinite(f) and f.is_integer()):
                raise TwinInputError(f"{_where(path, line)}: column {column!r} must be a whole number "
                                     f"of tokens (got {raw!r})") from None
            v = int(f)
    if v < 0:
        raise TwinInputError(f"{_where(path, line)}: column {column!r} must be >= 0 (got {v})")
    return v


def _seconds(raw, path: Path, line: int, column: str) -> float:
    if isinstance(raw, bool):
        raise TwinInputError(f"{_where(path, line)}: column {column!r} must be a number (got {raw!r})")
    try:
        v = float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        raise TwinInputError(f"{_where(path, line)}: column {column!r} must be a number (got {raw!r})") from None
    if not math.isfinite(v):
        raise TwinInputError(f"{_where(path, line)}: column {column!r} must be finite (got {raw!r})")
    return v


_WALL = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2}):(\d{2}(?:\.\d+)?)")


class _WallClock:
    """Seconds of a ``YYYY-MM-DD HH:MM:SS.fffffff`` timestamp (any number of decimals) since midnight of the
    first timestamp's day (kept small so float64 keeps sub-microsecond resolution)."""

    def __init__(self) -> None:
        self._days: dict[str, int] = {}
        self._day0: int | None = None

    def __call__(self, raw: str, path: Path, line: int, column: str) -> float:
        m = _WALL.fullmatch(raw.strip())
        try:
            if m is None:
                raise ValueError
            date, hh, mm, ss = m.groups()
            day = self._days.get(date)
            if day is None:
                day = _dt.date.fromisoformat(date).toordinal()
                if self._day0 is None:
                    self._day0 = day
                day = self._days[date] = day - self._day0
            h, mi, s = int(hh), int(mm), float(ss)
            if h > 23 or mi > 59 or s >= 61:
                raise ValueError
        except ValueError:
            raise TwinInputError(f"{_where(path, line)}: column {column!r} must be a timestamp like "
                                 f"'2023-11-16 18:15:46.6805900' (got {raw!r})") from None
        return day * 86400.0 + h * 3600.0 + mi * 60.0 + s


# ---- shared row checks -------------------------------------------------------------------------------------
class _Rows:
    """Accumulates rows and applies the zero-length and monotone-time policies."""

    def __init__(self, path: Path, prompt_col: str, output_col: str, time_col: str | None,
                 zero_output: str) -> None:
        if zero_output not in ("error", "one", "skip"):
            raise ValueError(f"zero_output must be error, one or skip (got {zero_output!r})")
        self.path, self.prompt_col, self.output_col, self.time_col = path, prompt_col, output_col, time_col
        self.zero_output = zero_output
        self.prompts: list[int] = []
        self.outputs: list[int] = []
        self.times: list[float] = []
        self.lines: list[int] = []
        self.kept = 0
        self.zero_mapped = 0
        self.zero_skipped = 0
        self._last_t = -math.inf

    def add(self, line: int, prompt: int, output: int, t: float | None) -> bool:
        """Check and store one row; False if ``zero_output: skip`` left it out."""
        if t is not None:
            if t < self._last_t:
                raise TwinInputError(f"{_where(self.path, line)}: column {self.time_col!r} goes back in time "
                                     f"(timestamps must not decrease)")
            self._last_t = t
        if prompt == 0:
            raise TwinInputError(f"{_where(self.path, line)}: column {self.prompt_col!r} is 0; a prompt needs "
                                 f">= 1 token")
        if output == 0:
            if self.zero_output == "error":
                raise TwinInputError(f"{_where(self.path, line)}: column {self.output_col!r} is 0; outputs must be "
                                     f">= 1 token (set workload.trace.zero_output: one to serve such rows as "
                                     f"1 token, or skip to leave them out)")
            if self.zero_output == "skip":
                self.zero_skipped += 1
                return False
            self.zero_mapped += 1
            output = 1
        self.prompts.append(prompt)
        self.outputs.append(output)
        if t is not None:
            self.times.append(t)
        self.lines.append(line)
        return True

    def notes(self) -> list[str]:
        out = []
        if self.zero_mapped:
            out.append(f"{self.path}: {self.zero_mapped} row(s) with {self.output_col} == 0 served as 1-token "
                       f"outputs (zero_output: one)")
        if self.zero_skipped:
            out.append(f"{self.path}: {self.zero_skipped} row(s) with {self.output_col} == 0 left out "
                       f"(zero_output: skip)")
        return out

    def build(self, fmt: str, *, timed: bool, **extra) -> Trace:
        if not self.lines:
            raise TwinInputError(f"{self.path}: no data rows")
        arrival = None
        if timed:
            t = np.asarray(self.times, dtype=np.float64)
            arrival = t - t[0]
            arrival.flags.writeable = False
        trace = Trace(
            path=self.path, format=fmt,
            prompt_tokens=_frozen(np.asarray(self.prompts, dtype=np.int64)),
            output_tokens=_frozen(np.asarray(self.outputs, dtype=np.int64)),
            arrival_s=arrival, lines=_frozen(np.asarray(self.lines, dtype=np.int64)),
            notes=self.notes(), **extra,
        )
        return trace


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


# ---- CSV ---------------------------------------------------------------------------------------------------
def _csv_rows(path: Path, required: tuple[str, ...]):
    """Yield ``(line, row_dict_getter)`` for each data row, checking the header and the field count."""
    f = open(path, newline="", encoding="utf-8-sig")
    try:
        reader = csv.reader(f)
        header = None
        for row in reader:
            if row:
                header = [h.strip() for h in row]
                break
        if header is None:
            raise TwinInputError(f"{path}:1: empty file (expected a header with {', '.join(required)})")
        index = {name: i for i, name in enumerate(header)}
        for col in required:
            if col not in index:
                raise TwinInputError(f"{path}:{reader.line_num}: missing column {col!r} "
                                     f"(header has {', '.join(header)})")
        width = len(header)
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line is not a row
            line = reader.line_num
            if len(row) < width:
                missing = header[len(row)]
                raise TwinInputError(f"{path}:{line}: column {missing!r} is missing "
                                     f"(row has {len(row)} of {width} fields)")
            if len(row) > width:
                raise TwinInputError(f"{path}:{line}: row has {len(row)} fields, the header has {width}")
            yield line, row, index
    finally:
        f.close()


def _csv_header(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        for row in csv.reader(f):
            if row:
                return [h.strip() for h in row]
    return []


def read_azure(path: Path, *, zero_output: str = "error") -> Trace:
    """Azure LLM inference trace 2023/2024: ``TIMESTAMP, ContextTokens, GeneratedTokens``."""
    rows = _Rows(path, "ContextTokens", "GeneratedTokens", "TIMESTAMP", zero_output)
    clock = _WallClock()
    ti = ci = gi = None
    for line, row, index in _csv_rows(path, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")):
        if ti is None:
            ti, ci, gi = index["TIMESTAMP"], index["ContextTokens"], index["GeneratedTokens"]
        rows.add(line, _count(row[ci], path, line, "ContextTokens"),
                 _count(row[gi], path, line, "GeneratedTokens"),
                 clock(row[ti], path, line, "TIMESTAMP"))
    return rows.build("azure", timed=True)


def read_burstgpt(path: Path, *, zero_output: str = "error") -> Trace:
    """BurstGPT: ``Timestamp, Session ID, Elapsed time, Model, Request tokens, Response tokens, ...``.

    ``Session ID`` values (when the column is there and the cell is not empty) are numbered 0, 1, ... in
    order of first appearance."""
    rows = _Rows(path, "Request tokens", "Response tokens", "Timestamp", zero_output)
    sessions: list[int | None] = []
    session_index: dict[str, int] = {}
    for line, row, index in _csv_rows(path, ("Timestamp", "Request tokens", "Response tokens")):
        t = _seconds(row[index["Timestamp"]], path, line, "Timestamp")
        kept = rows.add(line, _count(row[index["Request tokens"]], path, line, "Request tokens"),
                        _count(row[index["Response tokens"]], path, line, "Response tokens"), t)
        if kept:
            sid = row[index["Session ID"]].strip() if "Session ID" in index else ""
            sessions.append(session_index.setdefault(sid, len(session_index)) if sid else None)
    has_sessions = any(s is not None for s in sessions)
    return rows.build("burstgpt", timed=True, session_ids=sessions if has_sessions else None)


def read_lengths(path: Path, *, zero_output: str = "error", prompt_column: str | None = None,
                 output_column: str | None = None) -> Trace:
    """A length-only CSV (no timestamps), by default ``num_prefill_tokens, num_decode_tokens``."""
    pc = prompt_column or LENGTH_COLUMN_DEFAULTS[0]
    oc = output_column or LENGTH_COLUMN_DEFAULTS[1]
    rows = _Rows(path, pc, oc, None, zero_output)
    pi = oi = None
    for line, row, index in _csv_rows(path, (pc, oc)):
        if pi is None:
            pi, oi = index[pc], index[oc]
        rows.add(line, _count(row[pi], path, line, pc), _count(row[oi], path, line, oc), None)
    return rows.build("lengths", timed=False)


# ---- JSONL -------------------------------------------------------------------------------------------------
def _jsonl(path: Path):
    with open(path, encoding="utf-8") as f:
        for line, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                raise TwinInputError(f"{path}:{line}: not valid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(obj, dict):
                raise TwinInputError(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
            yield line, obj


def read_mooncake(path: Path, *, zero_output: str = "error", block_size: int = MOONCAKE_BLOCK) -> Trace:
    """Mooncake JSONL: ``timestamp`` (ms), ``input_length``, ``output_length``, ``hash_ids``.

    ``timestamp`` may be absent from every row (then the trace is length-only); ``hash_ids`` may be absent
    (then that row's prompt is unique)."""
    rows = _Rows(path, "input_length", "output_length", "timestamp", zero_output)
    hashes: list[tuple[int, ...]] = []
    any_hash = False
    timed: bool | None = None
    for line, obj in _jsonl(path):
        for key in ("input_length", "output_length"):
            if key not in obj:
                raise TwinInputError(f"{path}:{line}: column {key!r} is missing")
        has_t = "timestamp" in obj
        if timed is None:
            timed = has_t
        elif has_t != timed:
            raise TwinInputError(f"{path}:{line}: column 'timestamp' is "
                                 f"{'missing' if timed else 'present'} here but not in earlier rows")
        t = _seconds(obj["timestamp"], path, line, "timestamp") / 1000.0 if has_t else None
        prompt = _count(obj["input_length"], path, line, "input_length")
        ids = obj.get("hash_ids")
        if ids is not None:
            if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
                raise TwinInputError(f"{path}:{line}: column 'hash_ids' must be a list of integers")
            need = -(-prompt // block_size)
            if len(ids) != need:
                raise TwinInputError(f"{path}:{line}: column 'hash_ids' has {len(ids)} ids but input_length "
                                     f"{prompt} needs ceil({prompt}/{block_size}) = {need} (block_size "
                                     f"{block_size}; set workload.trace.block_size if the trace uses another)")
            any_hash = any_hash or bool(ids)
        if rows.add(line, prompt, _count(obj["output_length"], path, line, "output_length"), t):
            hashes.append(tuple(ids) if ids else ())
    return rows.build("mooncake", timed=bool(timed), hash_ids=hashes if any_hash else None,
                      block_size=block_size)


# ---- dispatch ----------------------------------------------------------------------------------------------
def detect_format(path: Path) -> str:
    """``mooncake`` for .jsonl/.json; for CSV by header: azure (TIMESTAMP), burstgpt (Timestamp + Request
    tokens), lengths (anything else with the length columns)."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "mooncake"
    header = _csv_header(path)
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
        for line, obj in _jsonl(p):
            if column not in obj:
                raise TwinInputError(f"{p}:{line}: column {column!r} is missing")
            values.append(_count(obj[column], p, line, column))
            lines.append(line)
    else:
        ci = None
        for line, row, index in _csv_rows(p, (column,)):
            if ci is None:
                ci = index[column]
            values.append(_count(row[ci], p, line, column))
            lines.append(line)
    return _frozen(np.asarray(values, dtype=np.int64)), _frozen(np.asarray(lines, dtype=np.int64))
