"""Reading catalog and user spec input: quantities with units, positive numbers, one-line validation messages."""

from __future__ import annotations

import math
import re
from typing import Any

from pydantic import ValidationError

_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15,
           "ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40}
_QTY = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z/]*)\s*$")


MAX_QUANTITY = 1e21   # bytes, bytes/s or FLOPS: a thousand times any accelerator's (an absurd value is a typo)


def parse_quantity(value: Any, unit_kind: str) -> float:
    """A number, or a string with a unit: '3.35 TB/s', '80 GB', '80GiB', '989 TFLOPS', '989e12'; at most
    ``MAX_QUANTITY`` and finite."""
    x = _parse_quantity(value, unit_kind)
    if math.isnan(x) or abs(x) > MAX_QUANTITY:
        raise ValueError(f"{value!r} is not a plausible amount (at most {MAX_QUANTITY:g})")
    return x


def _parse_quantity(value: Any, unit_kind: str) -> float:
    if isinstance(value, bool):
        raise ValueError("must be a number")
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        raise ValueError("must be a number or a string with a unit")
    m = _QTY.match(value)
    if not m:
        raise ValueError(f"cannot read {value!r} as a quantity")
    number, unit = float(m.group(1)), m.group(2).lower()
    if not unit:
        return number
    suffixes = {"bytes": ("b",), "bytes_per_s": ("b/s", "bps"), "flops": ("flops", "flop/s", "tops", "ops")}
    for suffix in suffixes[unit_kind]:
        if unit.endswith(suffix) and unit[: -len(suffix)] in _PREFIX:
            return number * _PREFIX[unit[: -len(suffix)]]
    examples = {"bytes": "'80 GB' or '80 GiB'", "bytes_per_s": "'3.35 TB/s'", "flops": "'989 TFLOPS'"}
    raise ValueError(f"unit {m.group(2)!r} does not fit here; write e.g. {examples[unit_kind]} or a plain number")


class SubfieldError(ValueError):
    """A problem with one entry of a mapping field, so the message can name `field.key`."""

    def __init__(self, key: Any, value: Any, reason: str) -> None:
        super().__init__(reason)
        self.key, self.value, self.reason = key, value, reason


def positive(x: float) -> float:
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"must be a positive number, got {x:g}")
    return x


def validation_message(err: ValidationError, source: str, allowed_fields: Any = ()) -> str:
    """One line: the first problem, naming the field, the value and what is allowed."""
    e = err.errors()[0]
    loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
    msg = str(e["msg"]).removeprefix("Value error, ")
    if e["type"] == "extra_forbidden":
        return f"{source}: unknown field '{loc}'; allowed fields: {', '.join(allowed_fields)}"
    if e["type"] == "missing":
        return f"{source}: field '{loc}' is required"
    sub = (e.get("ctx") or {}).get("error")
    if isinstance(sub, SubfieldError):
        return f"{source}: field '{loc}.{sub.key}' = {sub.value!r}: {sub.reason}"
    return f"{source}: field '{loc}' = {e.get('input')!r}: {msg}"
