"""What every fuzz category shares: ``Case`` (files, command line, and why the design must refuse it), the
values the cases plant, the design oracle that says which of them a field must refuse, and ``encoded``, which
writes a text in another encoding, truncated or with a stray byte.

A ``Case``'s command line writes ``{d}`` for the folder its files are in; ``must_fail`` is the reason the
input is invalid, or None when either outcome (exit 0, or exit 2 with one line) is allowed.

A field's spec is ``(kind, lo, hi)`` plus flags: ``int`` (whole numbers in [lo, hi]), ``float`` (numbers in
the range; ``lo_open`` makes the lower bound exclusive, ``finite`` refuses infinities), ``choice`` (one of a
set of names). ``refusal(value, spec)`` names why the value is invalid for the field, or returns None when the
value is valid or when the design leaves it open (the case may then succeed or fail cleanly)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hypothesis import strategies as st

INTS = [-1, 0, 1, 2, 3, 7, 64, 4097, 10**7, 2**63, 10**30]
FLOATS = [-0.5, 0.0, 1e-300, 0.5, 1.5, 1e6, 1e308, math.inf, -math.inf, math.nan]
OTHERS = ["", "abc", "1e3", True, False, None, [], {}, [1, 2], {"a": 1}, "/etc/passwd", "ÿ\u2028x"]
VALUES = INTS + FLOATS + OTHERS


@dataclass(frozen=True)
class Spec:
    kind: str                    # int | float | choice
    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    finite: bool = True
    nullable: bool = False
    choices: tuple[str, ...] = ()
    mapping_ok: bool = False     # a mapping is another valid form (a length distribution)


def refusal(value, spec: Spec) -> str | None:
    if value is None:
        return None if spec.nullable else "null for a required field"
    if isinstance(value, bool):
        return None if spec.kind == "bool" else "a boolean for a number"
    if isinstance(value, dict) and spec.mapping_ok:
        return None
    if isinstance(value, (list, dict)):
        return "a list or mapping for a scalar"
    if spec.kind == "choice":
        return None if value in spec.choices else "not one of the allowed names"
    if isinstance(value, str):
        if value == "1e3":
            return None  # a numeric string: parsing it as a number is fine, refusing it too
        return "text for a number"
    if spec.kind == "int" and isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return "a fraction for a whole number"
    if math.isnan(value):
        return "NaN"
    if spec.finite and math.isinf(value):
        return "an infinity"
    if value < spec.lo or (spec.lo_open and value == spec.lo):
        return "below the minimum"
    if value > spec.hi:
        return "above the maximum"
    return None


def yaml_scalar(value) -> str:
    """How a user would type ``value`` after ``--set key=``."""
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True).strip()
    return text.removesuffix("...").strip()


class Special(str):
    """A file entry that is not bytes: a folder, a named pipe, a sparse file, or a symbolic link (to itself: a
    loop; or to a device)."""


DIR = Special("dir")
LOOP = Special("link:")
FIFO = Special("fifo")                    # a named pipe nothing writes to
SPARSE_2G = Special("sparse:2147483648")  # a 2 GiB file of NUL bytes that uses no disk


def link(target: str) -> Special:
    return Special("link:" + target)


def place(path, data) -> None:
    """Write one of a case's files: bytes, or a ``Special`` entry."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, Special):
        if data == DIR:
            path.mkdir()
        elif data == FIFO:
            os.mkfifo(path)
        elif data.startswith("sparse:"):
            with open(path, "wb") as f:
                f.truncate(int(data[len("sparse:"):]))
        else:
            os.symlink(data[len("link:"):] or path, path)
    else:
        path.write_bytes(data)


@dataclass
class Case:
    category: str
    args: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    must_fail: str | None = None

    def refuse(self, reason: str | None) -> None:
        if reason and self.must_fail is None:
            self.must_fail = reason


@st.composite
def encoded(draw, text: str) -> tuple[bytes, str | None, bool]:
    """``text`` as bytes, maybe in another encoding, truncated or with a stray byte: ``(data, why the design
    must refuse it or None, whether the content survives unchanged)``."""
    how = draw(st.sampled_from(["utf8", "utf8", "utf8", "utf8-bom", "utf16", "latin1-byte", "truncate",
                                "empty", "nul"]))
    data = text.encode()
    if how == "utf8-bom":
        return b"\xef\xbb\xbf" + data, None, True
    if how == "utf16":
        return text.encode("utf-16"), None, True
    if how == "latin1-byte":
        at = draw(st.integers(0, len(data)))
        at = data.rfind(b"\n", 0, at) + 1
        return data[:at] + b"# caf\xe9\n" + data[at:], "a byte that is not UTF-8", False
    if how == "truncate":
        return data[:draw(st.integers(0, len(data)))], None, False
    if how == "empty":
        return b"", "an empty file", False
    if how == "nul":
        at = draw(st.integers(0, len(data)))
        return data[:at] + b"\x00" + data[at:], None, False
    return data, None, True
