"""The values the fuzz cases plant, and the design oracle that says which of them a field must refuse.

A field's spec is ``(kind, lo, hi)`` plus flags: ``int`` (whole numbers in [lo, hi]), ``float`` (numbers in
the range; ``lo_open`` makes the lower bound exclusive, ``finite`` refuses infinities), ``choice`` (one of a
set of names). ``refusal(value, spec)`` names why the value is invalid for the field, or returns None when the
value is valid or when the design leaves it open (the case may then succeed or fail cleanly)."""

from __future__ import annotations

import math
from dataclasses import dataclass

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
