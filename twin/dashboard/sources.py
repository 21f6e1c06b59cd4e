"""Where the dashboard's scenarios come from: the bundled ones, an uploaded scenario YAML, an uploaded trace.

An uploaded file may name only uploaded content or bundled data (see `check_upload_paths`), never an
arbitrary path on the server.
"""

from __future__ import annotations

import hashlib
import importlib.util
import tempfile
from pathlib import Path
from typing import Any

from twin.errors import TwinInputError
from twin.workload.paths import TRACES_TOKEN, expand_path, traces_dir
from twin.scenario import BASELINE, Scenario, ScenarioBody, list_scenarios, load_scenario
from twin.yaml_input import decode_text, parse_yaml

DEFAULT_SCENARIO = "chat_shared_prompt"
UPLOAD_DIR_NAME = "twin-dashboard-uploads"
PATH_KEYS = ("path", "profile", "gpu", "model", "draft_model")  # scenario fields that may name a file
PATH_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl", ".csv", ".gz", ".txt")


def allowed_roots() -> list[Path]:
    """Where an uploaded scenario may point: the shared traces, the bundled scenarios and the uploads."""
    from twin.scenario import scenarios_dir

    return [traces_dir().resolve(), scenarios_dir().resolve(), upload_dir().resolve()]


def _looks_like_path(text: str) -> bool:
    return ("/" in text or "\\" in text or text.startswith("~") or TRACES_TOKEN in text
            or text.lower().endswith(PATH_SUFFIXES))


def check_upload_paths(data: Any, source: str = "uploaded scenario", where: str = "") -> None:
    """Refuse an uploaded mapping that names a file outside `allowed_roots` (``/etc/passwd`` as a trace, a
    GPU file in someone's home): one line naming the field and what is allowed."""
    if isinstance(data, dict):
        for key, value in data.items():
            field = f"{where}.{key}" if where else str(key)
            if key in PATH_KEYS and isinstance(value, str) and _looks_like_path(value):
                target = expand_path(value, upload_dir()).resolve()
                if not any(target.is_relative_to(root) for root in allowed_roots()):
                    raise TwinInputError(
                        f"{source}: {field} {value!r} is not allowed: a scenario uploaded to the dashboard may name "
                        "only bundled data ('{traces}/...', the bundled scenarios) or a file uploaded in the sidebar")
            else:
                check_upload_paths(value, source, field)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            check_upload_paths(value, source, f"{where}.{i}")


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
    data = parse_yaml(text, source)
    if data is None:
        raise TwinInputError(f"{source}: the file is empty; a scenario needs at least a workload section")
    check_upload_paths(data, source)
    return Scenario(data, source=source)


def upload_dir() -> Path:
    d = Path(tempfile.gettempdir()) / UPLOAD_DIR_NAME
    d.mkdir(parents=True, exist_ok=True)
    return d


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


