"""Grid axes for sweeps and plan searches: ``key=v1,v2,...`` options parsed into ``[(key, [values])]`` and
checked (dotted scenario paths, the ``rate_scale`` / ``rate`` axes, ``groups``)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from twin.errors import TwinInputError
from twin.yaml_input import parse_option_value

RATE_KEYS = ("rate_scale", "rate")
MAX_GRID_POINTS = 10_000          # configurations x rates in one sweep or plan search
GROUPS_KEY = "groups"




def parse_grid_options(items: Sequence[str], option: str = "--grid") -> list[tuple[str, list[Any]]]:
    """``key=v1,v2,...`` (or ``key=[v1, {a: 1}]``, a YAML list) options -> ``[(key, [values])]`` (``option`` names
    them in errors: ``twin plan`` reads the same form from ``--search``)."""
    grid: list[tuple[str, list[Any]]] = []
    seen: set[str] = set()
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise TwinInputError(f"{option} {item!r}: expected key.path=v1,v2,...")
        if key in seen:
            raise TwinInputError(f"{option} {item!r}: {key} is given twice")
        seen.add(key)
        raw = raw.strip()
        if raw.startswith("["):
            values = parse_option_value(raw, f"{option} {key}")
            if not isinstance(values, list):
                raise TwinInputError(f"{option} {item!r}: the bracketed value is not a YAML list")
        else:
            values = [parse_option_value(v.strip(), f"{option} {key}") for v in raw.split(",")]
        if not values:
            raise TwinInputError(f"{option} {item!r}: no values")
        grid.append((key, values))
    return check_grid(grid)


def check_grid(grid: Sequence[tuple[str, Sequence[Any]]]) -> list[tuple[str, list[Any]]]:
    out = []
    rate_axes = [k for k, _ in grid if k in RATE_KEYS]
    if len(rate_axes) > 1:
        raise TwinInputError("--grid: give one of rate_scale and rate, not both")
    for key, values in grid:
        values = list(values)
        if not values:
            raise TwinInputError(f"grid {key}: no values")
        if key in RATE_KEYS:
            for v in values:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                    unit = "a multiple of the scenario's rate" if key == "rate_scale" else "req/s"
                    raise TwinInputError(f"grid {key}: {v!r} is not a rate; give numbers > 0 ({unit}, the number "
                                         "alone)")
        elif key != GROUPS_KEY and any(not part for part in key.split(".")):
            raise TwinInputError(f"grid {key!r}: not a dotted scenario path like server.max_num_seqs")
        out.append((key, values))
    points = math.prod(len(v) for _, v in out)
    if points > MAX_GRID_POINTS:
        sizes = " x ".join(str(len(v)) for _, v in out)
        raise TwinInputError(f"grid: {sizes} = {points:,} points; a sweep or plan search may have at most "
                             f"{MAX_GRID_POINTS:,}")
    for key, values in out:       # the same value twice: a point run twice, or a typo for another value
        shown = [json.dumps(v, sort_keys=True, default=repr) for v in values]
        twice = [v for i, v in enumerate(values) if shown[i] in shown[:i]]
        if twice:
            raise TwinInputError(f"grid {key}: {twice[0]!r} is given twice")
    return out
