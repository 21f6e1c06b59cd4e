"""Pydantic validation errors as one line: ``describe_error`` words one error as ``path: message (got value)``,
``format_validation_error`` a whole ``ValidationError`` (the first problem spelled out, the others counted)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from twin.errors import counted
from twin.workload.arrival_config import ARRIVAL_PROCESSES
from twin.workload.datasets import DATASET_KINDS


_TEMPLATES = {
    "greater_than": "must be > {gt}",
    "greater_than_equal": "must be >= {ge}",
    "less_than": "must be < {lt}",
    "less_than_equal": "must be <= {le}",
    "missing": "is required",
    "extra_forbidden": "unknown field",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "string_too_short": "must not be empty",
}


def _loc_text(parts: list[Any]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


def _sub_path_parts(sub: str) -> list[Any]:
    """A validator's ``.field.sub`` (or ``.list[3]``) as path parts: list positions as ints (printed ``[3]``), a
    statistic's decimals kept in one key (``slo.ttft_ms.p99.9``, not ``p99[9]``)."""
    parts: list[Any] = []
    for piece in sub[1:].replace("]", "").replace("[", ".").split("."):
        if piece.isdigit() and parts and isinstance(parts[-1], str) and re.fullmatch(r"p\d+", parts[-1]):
            parts[-1] += "." + piece
        elif piece:
            parts.append(int(piece) if piece.isdigit() else piece)
    return parts


def _clean_loc(loc: tuple) -> list[Any]:
    parts: list[Any] = []
    for i, p in enumerate(loc):
        # a discriminated union puts the tag into the path: arrivals.poisson.rate_per_s -> arrivals.rate_per_s
        if i > 0 and loc[i - 1] == "arrivals" and p in ARRIVAL_PROCESSES:
            continue
        if i > 0 and loc[i - 1] == "dataset" and p in DATASET_KINDS:
            continue
        parts.append(p)
    return parts


def _plain(v: Any) -> Any:
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _got(value: Any) -> str:
    if isinstance(value, (dict, list, tuple)):
        return ""
    return f" (got {value!r})"


_NUMBER_WITH_UNIT = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)\s*[^\d\s.]")
_UNIT_SUFFIX = re.compile(r"_(per_s|gb_s|ms|us|s|tokens|gib)$")


def _unit_hint(parts: list[Any], value: Any) -> str:
    """``"; write the number alone: its name's _per_s is the unit"`` for a number given with a unit
    (``rate_per_s: 10rps``, ``ttft_ms: 500ms``); ``""`` otherwise."""
    name = next((p for p in reversed(parts) if isinstance(p, str)), "")
    unit = _UNIT_SUFFIX.search(name)
    if not isinstance(value, str) or unit is None or not _NUMBER_WITH_UNIT.match(value):
        return ""
    return f"; write the number alone: its name's _{unit.group(1)} is the unit"


def describe_error(err: dict, root: str | None = None) -> str:
    """One pydantic error (an entry of ``ValidationError.errors()``) as ``path: message (got value)``."""
    parts = ([root] if root else []) + _clean_loc(tuple(err.get("loc", ())))
    etype = err.get("type", "")
    ctx = err.get("ctx") or {}
    value = err.get("input")
    if etype == "value_error":
        msg = str(ctx.get("error", err.get("msg", "")))
        if msg.startswith(".") and ": " in msg:  # ".field.sub: message" -> extend the path
            sub, msg = msg.split(": ", 1)
            parts.extend(_sub_path_parts(sub))
        text = msg if "(got" in msg else msg + _got(value)
        return f"{_loc_text(parts) or 'top level'}: {text}"
    if etype == "union_tag_invalid":
        kinds = DATASET_KINDS if "kind" in str(ctx.get("discriminator", "")) else ARRIVAL_PROCESSES
        tags = ", ".join(kinds)
        parts.append(str(ctx.get("discriminator", "process")).strip("'"))
        return f"{_loc_text(parts)}: must be one of {tags} (got {ctx.get('tag')!r})"
    if etype == "union_tag_not_found":
        discriminator = str(ctx.get("discriminator", "process")).strip("'")
        parts.append(discriminator)
        kinds = DATASET_KINDS if discriminator == "kind" else ARRIVAL_PROCESSES
        return f"{_loc_text(parts)}: is required (one of {', '.join(kinds)})"
    if etype == "literal_error":
        return f"{_loc_text(parts)}: must be one of {ctx.get('expected', '')}{_got(value)}"
    template = _TEMPLATES.get(etype)
    if etype in ("too_short", "too_long") and isinstance(ctx.get("min_length", ctx.get("max_length")), int):
        least = etype == "too_short"
        n = ctx["min_length" if least else "max_length"]
        template = f"must have at {'least' if least else 'most'} {counted(n, 'item')}"
    if template is not None:
        try:
            msg = template.format(**{k: _plain(v) for k, v in ctx.items()})
        except (KeyError, IndexError):
            msg = template
    else:
        msg = str(err.get("msg", "invalid")).replace("Input should be", "must be")
    got = "" if etype == "missing" else _got(value)
    if got and etype in ("float_parsing", "int_parsing"):
        got = got[:-1] + _unit_hint(parts, value) + ")"
    return f"{_loc_text(parts) or 'top level'}: {msg}{got}"


def format_validation_error(exc: ValidationError, root: str | None = None) -> str:
    """A pydantic ``ValidationError`` as ONE line, e.g. ``workload.arrivals.rate_per_s: must be > 0 (got -3)``.

    ``root`` is prefixed to every path (``"workload"`` when validating the section on its own).
    Only the first problem is spelled out; the count of the others is appended."""
    errors = exc.errors(include_url=False)
    if not errors:
        return str(exc).splitlines()[0]
    line = describe_error(errors[0], root)
    if len(errors) > 1:
        more = len(errors) - 1
        line += f" [and {counted(more, 'more problem')}]"
    return line
