"""Dotted-key overrides of a raw scenario mapping (``server.max_num_seqs: 4`` -> ``{server: {max_num_seqs: 4}}``,
merged in order), and ``label``, the text a grid or override value is shown as."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from twin.scenario import deep_merge


def nested(key: str, value: Any) -> dict[str, Any]:
    """``"server.max_num_seqs", 4`` -> ``{"server": {"max_num_seqs": 4}}``."""
    node: dict[str, Any] = {}
    out = node
    parts = key.split(".")
    for part in parts[:-1]:
        node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    return out


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A raw scenario mapping with dotted-key overrides merged in (in order)."""
    out = dict(data)
    for key, value in overrides.items():
        out = deep_merge(out, nested(key, value))
    return out


def label(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return "null" if value is None else str(value)
