"""The what-if as something to share: URL query parameters that rebuild the page, and a scenario YAML.

The URL holds where the what-if starts (``scenario``, ``start``, ``seed``) and only the explicit changes, one
``w.<setting>=<value>`` each; opening it gives the same sidebar and the same runs. Values are typed by the
setting's default (a flag, a whole number, a number or a name); one that does not parse is an error naming it.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import yaml

from twin.errors import TwinInputError

CHANGE_PREFIX = "w."


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def encode(scenario: str, start: str, seed: int, changes: Mapping[str, Any]) -> dict[str, str]:
    """Query parameters for a what-if (``changes``: setting key -> value, the explicit changes only)."""
    out = {"scenario": scenario, "start": start, "seed": str(int(seed))}
    out.update({CHANGE_PREFIX + key: _text(value) for key, value in sorted(changes.items())})
    return out


def parse_value(key: str, text: str, default: Any) -> Any:
    """``text`` typed like ``default``; a TwinInputError naming the URL parameter when it does not fit."""
    where = f"URL parameter {CHANGE_PREFIX}{key}={text!r}"
    if text.lower() == "none" and not isinstance(default, bool):
        return None
    try:
        if isinstance(default, bool):
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if isinstance(default, int) or (default is None and text.strip().lstrip("+-").isdigit()):
            return int(text)
        if isinstance(default, float) or default is None:
            v = float(text)
            if not math.isfinite(v):
                raise ValueError
            return v
    except ValueError:
        kind = "true or false" if isinstance(default, bool) else "a number"
        raise TwinInputError(f"{where}: expected {kind}") from None
    return text


def decode(params: Mapping[str, str], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The explicit changes a URL carries, typed by ``defaults``; a setting the page does not offer for this
    scenario is an error naming it."""
    changes: dict[str, Any] = {}
    for name, text in params.items():
        if not name.startswith(CHANGE_PREFIX):
            continue
        key = name[len(CHANGE_PREFIX):]
        if key not in defaults:
            raise TwinInputError(f"URL parameter {name}: not a setting of this scenario "
                                 f"(settings: {', '.join(sorted(defaults))})")
        changes[key] = parse_value(key, str(text), defaults[key])
    return changes


def scenario_yaml(raw: Mapping[str, Any], name: str | None = None) -> bytes:
    """The what-if as a scenario file `twin run` accepts (no variants: it is one configuration)."""
    data = {k: v for k, v in raw.items() if k != "variants"}
    if name:
        data["name"] = name
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")
