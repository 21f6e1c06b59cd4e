"""What every result reader checks: the file is readable UTF-8 text and not empty, the JSON parses, a field is
present, a number is finite and in range, a per-request list is as long as its siblings. Each failure is one
``TwinInputError`` line naming the file and the field."""

from __future__ import annotations

import math
import stat
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from twin.errors import TwinInputError
from twin.json_input import JsonSyntaxError, parse_json
from twin.yaml_input import MAX_INPUT_BYTES, decode_text, parse_yaml

YAML_SUFFIXES = (".yaml", ".yml")
MAX_YAML_RESULT_BYTES = 8 << 20     # ~16 s of parsing


def read_text(path: Path) -> str:
    """The file's text; an error for an unreadable, too large, empty or undecodable file (``decode_text``: UTF-8,
    or UTF-16 / UTF-32 with a byte-order mark; no NUL character)."""
    try:
        st = path.stat()
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):  # a device never ends; a pipe cannot be
            # read twice (to recognise the format, then to read it)
            raise TwinInputError(f"{path}: not a regular file; give the result file itself")
        size = st.st_size
        if size > MAX_INPUT_BYTES:
            raise TwinInputError(f"{path}: {size:,} bytes; a result file may be at most {MAX_INPUT_BYTES:,} bytes")
        raw = path.read_bytes()
    except OSError as exc:
        raise TwinInputError(f"{path}: cannot read ({exc.strerror or exc.__class__.__name__})") from None
    text = decode_text(raw, str(path))     # UTF-8, or UTF-16 / UTF-32 with their byte-order mark, as every reader
    if not text.strip():
        raise TwinInputError(f"{path}: empty file")
    return text


@lru_cache(maxsize=8)
def _parsed(path: str, mtime_ns: int, size: int) -> Any:
    p = Path(path)
    text = read_text(p)
    if p.suffix.lower() in YAML_SUFFIXES:    # GuideLLM writes its report as YAML when asked (--output-path *.yaml)
        if size > MAX_YAML_RESULT_BYTES:
            raise TwinInputError(f"{p}: {size:,} bytes of YAML; a YAML result file may be at most "
                                 f"{MAX_YAML_RESULT_BYTES:,} bytes (the YAML parser reads ~0.5 MB/s): give the "
                                 f"client's JSON output instead")
        return parse_yaml(text, str(p), tags=False)
    try:
        return parse_json(text, str(p))
    except JsonSyntaxError as exc:
        if exc.msg == "Extra data":      # several documents, one per line (vllm bench serve --append-result)
            return json_lines(p, text)
        raise TwinInputError(f"{p}, line {exc.lineno}: not valid JSON ({exc.msg})") from None


def load_json(path: Path) -> Any:
    """The parsed document (cached by path, size and modification time, so that recognising a format and
    reading it parse once). A file of one JSON document per line comes back as ``JsonLines``; a ``.yaml`` /
    ``.yml`` file is parsed as YAML (plain data, no tags)."""
    try:
        st = path.stat()
    except OSError as exc:
        raise TwinInputError(f"{path}: cannot read ({exc.strerror or exc.__class__.__name__})") from None
    return _parsed(str(path), st.st_mtime_ns, st.st_size)


class JsonLines(list):
    """The documents of a JSON Lines file, in file order, each with ``line_numbers[i]`` for error messages."""

    def __init__(self, docs: list[Any], line_numbers: list[int]) -> None:
        super().__init__(docs)
        self.line_numbers = line_numbers


def json_lines(path: Path, text: str | None = None) -> JsonLines:
    text = read_text(path) if text is None else text
    docs, lines = [], []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            docs.append(parse_json(line, f"{path}, line {i}"))
        except JsonSyntaxError as exc:
            raise TwinInputError(f"{path}, line {i}: not valid JSON ({exc.msg})") from None
        lines.append(i)
    return JsonLines(docs, lines)


def try_json(path: Path) -> Any:
    """The parsed document for a recogniser, or None when the file is not readable JSON."""
    if not path.is_file():
        return None
    try:
        return load_json(path)
    except TwinInputError:
        return None


def get(d: Any, dotted: str, where: str, *, required: bool = True) -> Any:
    """``d["a"]["b"]`` for ``"a.b"``; a missing field is an error (or None when not required)."""
    cur = d
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if not isinstance(cur, dict):
            raise TwinInputError(f"{where}: {'.'.join(parts[:i]) or 'the file'}: expected an object")
        if part not in cur:
            if required:
                raise TwinInputError(f"{where}: missing field {dotted}")
            return None
        cur = cur[part]
    return cur


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (a 5,000-digit cell stays one readable line)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def number(value: Any, field: str, where: str, *, low: float = 0.0) -> float:
    """A finite number >= ``low``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
        raise TwinInputError(f"{where}: {field} = {shown(value)}: must be a finite number >= {low:g}")
    return float(value)


def whole(value: Any, field: str, where: str, *, low: int = 0) -> int:
    """A whole number >= ``low`` (an integral float such as 3.0 is accepted; a numeric string is, for values
    that pass through ``--metadata KEY=VALUE``)."""
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value != int(value) or value < low:
        raise TwinInputError(f"{where}: {field} = {shown(value)}: must be a whole number >= {low}")
    return int(value)


def number_list(values: Any, field: str, where: str, *, length: int | None = None,
                allow_none: bool = False) -> np.ndarray:
    """A list of finite numbers >= 0 as an array (``None`` entries become NaN when ``allow_none``)."""
    if not isinstance(values, list):
        raise TwinInputError(f"{where}: {field} must be a list (got {type(values).__name__})")
    if length is not None and len(values) != length:
        raise TwinInputError(f"{where}: {field} has {len(values)} entries, expected {length} (one per request)")
    out = np.empty(len(values))
    for i, v in enumerate(values):
        if v is None and allow_none:
            out[i] = np.nan
            continue
        out[i] = number(v, f"{field}[{i}]", where)
    return out


def first_present(d: dict[str, Any], keys: Sequence[str]) -> str | None:
    return next((k for k in keys if k in d), None)
