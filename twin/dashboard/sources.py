"""Where the dashboard's scenarios come from: the bundled ones, an uploaded scenario YAML, an uploaded trace.

An uploaded scenario is read with every YAML tag refused and may name only catalog entries, uploaded content
or bundled data (`twin.dashboard.upload_paths`), never another path on the server.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any

from twin.errors import TwinInputError
from twin.dashboard.upload_paths import (UPLOAD_DIR_NAME, allowed_roots, check_scenario_paths,  # noqa: F401
                                        confine_upload_paths, upload_dir)
from twin.scenario import BASELINE, Scenario, ScenarioBody, list_scenarios, load_scenario
from twin.yaml_input import decode_text, parse_yaml

DEFAULT_SCENARIO = "chat_shared_prompt"


def bundled_scenarios() -> dict[str, Path]:
    """Bundled scenario files by name (file stem), the dashboard's default first."""
    found = {p.stem: p for p in list_scenarios()}
    if DEFAULT_SCENARIO in found:
        found = {DEFAULT_SCENARIO: found.pop(DEFAULT_SCENARIO), **found}
    return found


def load_bundled(name: str) -> Scenario:
    paths = bundled_scenarios()
    if name not in paths:
        raise TwinInputError(f"scenario {name!r}: not bundled (bundled: {', '.join(paths) or 'none'})")
    return load_scenario(paths[name])


def scenario_from_yaml(text: str | bytes, source: str = "uploaded scenario") -> Scenario:
    """A scenario from YAML text (an upload); malformed YAML is a one-line error with line and column."""

    if isinstance(text, bytes):
        text = decode_text(text, source)
    data = parse_yaml(text, source, tags=False)
    if data is None:
        raise TwinInputError(f"{source}: the file is empty; a scenario needs at least a workload section")
    data = confine_upload_paths(data, source)
    scenario = Scenario(data, source=source, base_dir=upload_dir())
    check_scenario_paths(scenario, source)
    return scenario


def save_upload(data: bytes, filename: str) -> Path:
    """Store uploaded bytes under a content-addressed name (same bytes, same path: cache keys stay stable),
    keeping the file's suffix so format detection still works."""
    suffix = "".join(Path(filename).suffixes[-2:]) or ".dat"
    digest = hashlib.sha256(data).hexdigest()[:16]
    path = upload_dir() / f"{digest}{suffix}"
    if not path.exists():
        path.write_bytes(data)
    return path


def trace_scenario(path: str | Path, name: str | None = None) -> Scenario:
    """A scenario replaying a trace file on the default deployment; a trace without timestamps (length-only)
    gets Poisson arrivals at 4 req/s, which the rate setting changes."""
    from twin.workload.traces import read_trace

    from twin.dashboard.messages import upload_error

    path = Path(path)
    try:
        trace = read_trace(path)
    except TwinInputError as exc:   # name the user's file, not the server's copy of it
        raise TwinInputError(upload_error(str(exc), path, name)) if name else exc from None
    workload: dict[str, Any] = {"trace": {"path": str(path)}}
    if not trace.has_timestamps:
        workload["arrivals"] = {"process": "poisson", "rate_per_s": 4.0}
    data = {"name": name or path.stem, "description": f"Replay of {name or path.name} ({len(trace):,} requests).",
            "workload": workload}
    return Scenario(data, source=name or str(path))


def profile_supported() -> bool:
    """Calibrated profiles need `twin.cost.profile` (importing it registers the 'profile' cost-model kind)."""
    try:
        found = importlib.util.find_spec("twin.cost.profile") is not None
    except (ImportError, ValueError):
        return False
    if found:
        importlib.import_module("twin.cost.profile")
    return found


def speculative_supported() -> bool:
    return "speculative_decoding" in ScenarioBody.model_fields


def start_points(scenario: Scenario) -> list[str]:
    """Where a what-if can start: the baseline or one of the scenario's variants (not a mixed-cluster variant,
    ``deployment.groups``: the page edits one deployment)."""
    return [n for n in scenario.names() if n == BASELINE or scenario.body(n).deployment.groups is None]


def default_start(scenario: Scenario) -> str:
    """The first variant when there is one (so the page opens on a comparison), else the baseline."""
    names = start_points(scenario)
    return names[1] if len(names) > 1 else BASELINE


