"""Plan files: a YAML file with a ``scenario:`` key (and the plan's settings) rather than a scenario."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from twin.errors import TwinInputError

PLAN_FIELDS = ("scenario", "variant", "overrides", "target_rate_per_s", "slo", "goodput", "prices", "search",
               "candidates", "router", "replications", "rel_tol", "confidence", "max_replicas",
               "frontier_extra_replicas", "prune", "verify_all", "latency_metric", "description", "name")


def is_plan_file(data: Any) -> bool:
    return isinstance(data, Mapping) and "scenario" in data and "workload" not in data


def read_plan_file(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Check a plan file's top level; returns it as a plain dict (fields are validated where they are used)."""
    unknown = [k for k in data if k not in PLAN_FIELDS]
    if unknown:
        raise TwinInputError(f"{source}: unknown field {unknown[0]!r} (allowed: {', '.join(PLAN_FIELDS)})")
    search = data.get("search")
    search = {} if search is None else search
    if not isinstance(search, Mapping) or any(not isinstance(v, list) or not v for v in search.values()):
        raise TwinInputError(f"{source}: search: must map dotted keys to non-empty lists of values")
    cands = data.get("candidates")
    if cands is not None and (not isinstance(cands, list) or any(not isinstance(c, Mapping) for c in cands)):
        raise TwinInputError(f"{source}: candidates: must be a list of mappings of dotted keys to values")
    return dict(data)
