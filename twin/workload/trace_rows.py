"""Reading a trace file's rows with checks: CSV and JSONL row iteration (header and field count checked),
cell values (token counts, seconds, wall-clock timestamps), and ``TraceRows``, which applies the zero-length
and monotone-time policies to the rows and builds the ``Trace``. Every problem raises
``TwinInputError("path:line: ...")``."""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import re
from pathlib import Path

import numpy as np

from twin.errors import TwinInputError, counted
from twin.json_input import STRICT_JSON, DuplicateKeyError, duplicate_key
from twin.workload.trace_data import Trace
from twin.yaml_input import open_text, stream_decode_error

MAX_TRACE_ROWS = 5_000_000        # data rows in one trace file
MAX_TOKEN_COUNT = 2**31 - 1       # tokens in one prompt or output (vLLM counts positions in int32)
MAX_TRACE_FIELDS = 256            # fields in one CSV row
MAX_LINE_CHARS = 16 << 20         # characters in one line of a CSV or JSONL trace (a Mooncake row with hash ids
                                  # is ~1 KB): a longer line is an error before it is held in memory


# ---- value parsing -----------------------------------------------------------------------------------------
def _where(path: Path, line: int) -> str:
    return f"{path}:{line}"


def token_count(raw, path: Path, line: int, column: str) -> int:
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
        except (TypeError, ValueError, OverflowError):   # OverflowError: a float infinity
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
    if v > MAX_TOKEN_COUNT:
        raise TwinInputError(f"{_where(path, line)}: column {column!r} must be <= {MAX_TOKEN_COUNT:,} tokens "
                             f"(got {v:,})")
    return v


def seconds(raw, path: Path, line: int, column: str) -> float:
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


class WallClock:
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
class TraceRows:
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
        if len(self.lines) >= MAX_TRACE_ROWS:
            raise TwinInputError(f"{_where(self.path, line)}: more than {MAX_TRACE_ROWS:,} rows; a trace may have "
                                 f"at most {MAX_TRACE_ROWS:,} (split the file)")
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
            out.append(f"{self.path}: {counted(self.zero_mapped, 'row')} with {self.output_col} == 0 served as 1-token "
                       f"outputs (zero_output: one)")
        if self.zero_skipped:
            out.append(f"{self.path}: {counted(self.zero_skipped, 'row')} with {self.output_col} == 0 left out "
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
            prompt_tokens=frozen(np.asarray(self.prompts, dtype=np.int64)),
            output_tokens=frozen(np.asarray(self.outputs, dtype=np.int64)),
            arrival_s=arrival, lines=frozen(np.asarray(self.lines, dtype=np.int64)),
            notes=self.notes(), **extra,
        )
        return trace


def frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


# ---- CSV ---------------------------------------------------------------------------------------------------
def _read_rows(path: Path, reader, f):
    """``reader``'s rows, with undecodable bytes, NUL characters and broken quoting as one-line errors."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise stream_decode_error(path, f.encoding, exc) from None
        except csv.Error as exc:
            raise TwinInputError(f"{path}:{reader.line_num}: not a CSV row ({exc})") from None
        if len(row) > MAX_TRACE_FIELDS:
            raise TwinInputError(f"{path}:{reader.line_num}: {len(row):,} fields; a trace row may have at most "
                                 f"{MAX_TRACE_FIELDS}")
        yield row


def _csv_reader(path: Path, f):
    """A strict CSV reader over ``f``'s lines, each read with a length limit (``lines``)."""
    return csv.reader((text for _, text in lines(path, f)), strict=True)


def csv_rows(path: Path, required: tuple[str, ...]):
    """Yield ``(line, row, header index)`` for each data row, checking the header and the field count."""
    f = open_text(path, newline="")
    try:
        reader = _csv_reader(path, f)
        rows = _read_rows(path, reader, f)
        header = None
        for row in rows:
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
        for row in rows:
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


def csv_header(path: Path) -> list[str]:
    with open_text(path, newline="") as f:
        for row in _read_rows(path, _csv_reader(path, f), f):
            if row:
                return [h.strip() for h in row]
    return []


# ---- JSONL -------------------------------------------------------------------------------------------------
def lines(path: Path, f):
    """``(line number, text)`` of each line of ``f``; a line over ``MAX_LINE_CHARS`` or with a NUL character is
    an error."""
    line = 0
    while True:
        try:
            text = f.readline(MAX_LINE_CHARS + 1)
        except UnicodeDecodeError as exc:
            raise stream_decode_error(path, f.encoding, exc) from None
        if not text:
            return
        line += 1
        if len(text) > MAX_LINE_CHARS:
            raise TwinInputError(f"{path}:{line}: longer than {MAX_LINE_CHARS:,} characters; a trace line "
                                 f"may be at most that long")
        if "\x00" in text:
            raise TwinInputError(f"{path}:{line}: a NUL character; not a text file")
        yield line, text


def jsonl_rows(path: Path):
    with open_text(path) as f:
        for line, text in lines(path, f):
            if not text.strip():
                continue
            try:
                obj = STRICT_JSON.decode(text)
            except DuplicateKeyError as e:
                raise duplicate_key(f"{path}:{line}", e) from None
            except json.JSONDecodeError as e:
                raise TwinInputError(f"{path}:{line}: not valid JSON ({e.msg} at column {e.colno})") from None
            except RecursionError:
                raise TwinInputError(f"{path}:{line}: not valid JSON (nested too deeply)") from None
            except ValueError as e:     # an integer past Python's digit limit
                raise TwinInputError(f"{path}:{line}: not valid JSON ({str(e).split(';')[0]})") from None
            if not isinstance(obj, dict):
                raise TwinInputError(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
            yield line, obj
