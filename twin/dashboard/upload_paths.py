"""What a scenario uploaded to the dashboard may name: catalog GPUs and models, bundled profiles, and files
under `allowed_roots` (the shared traces, the bundled scenarios and profiles, the uploads); never another
file on the server.

Two checks, both before anything opens a file the scenario names:

- ``confine_upload_paths`` on the parsed upload (the YAML was read with every tag refused, so its scalars are
  plain text, numbers, booleans, null or dates): every value of a file-naming key (``PATH_KEYS``) that is not a
  catalog name is resolved (``{traces}`` and ``~`` expanded, relative paths inside the upload folder, links
  followed) and refused outside the allowed roots; a relative path is rewritten to its absolute location, so
  nothing later falls back to the server's working directory (``.git/config`` would otherwise be read from
  there); a bundled profile's name is rewritten to its file for the same reason.
- ``check_scenario_paths`` on the validated scenario (every variant, after pydantic's type coercion): every
  file-naming field holds a catalog name or an absolute path inside the allowed roots.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from twin.errors import TwinInputError
from twin.workload.paths import TRACES_TOKEN, expand_path, traces_dir

PATH_KEYS = ("path", "profile", "gpu", "model", "draft_model")  # scenario fields that may name a file
_MODEL_KEYS = ("model", "draft_model")
UPLOAD_DIR_NAME = "twin-dashboard-uploads"
ALLOWED = ("may name only catalog GPUs and models, bundled data ('{traces}/...', the bundled scenarios and "
           "profiles) or a file uploaded in the sidebar")


def upload_dir() -> Path:
    import tempfile

    d = Path(tempfile.gettempdir()) / UPLOAD_DIR_NAME
    d.mkdir(parents=True, exist_ok=True)
    return d


def allowed_roots() -> list[Path]:
    """Where an uploaded scenario may point: the shared traces, the bundled scenarios and profiles, the uploads."""
    from twin.cost.profile_file import bundled_profiles_dir
    from twin.scenario import scenarios_dir

    roots = [traces_dir(), scenarios_dir(), upload_dir()]
    profiles = bundled_profiles_dir()
    if profiles is not None:
        roots.append(profiles)
    return [r.resolve() for r in roots]


def _catalog_name(key: str, value: str) -> bool:
    """Whether ``value`` is a catalog GPU (key ``gpu``) or model (``model``, ``draft_model``) name or alias:
    those are looked up in the catalog before any file."""
    from twin.hardware.dtypes import norm_name
    from twin.hardware.gpus import _gpu_index
    from twin.hardware.model_catalog import _model_index

    if key == "gpu":
        return norm_name(value) in _gpu_index()
    if key in _MODEL_KEYS:
        return norm_name(value) in _model_index()
    return False


def _bundled_profile(value: str) -> Path | None:
    from twin.cost.profile_file import bundled_profiles_dir

    bundled = bundled_profiles_dir()
    if bundled is None or Path(value).parent != Path(".") or value in ("", ".", ".."):
        return None
    for cand in (bundled / value, bundled / f"{value}.json"):
        if cand.is_file():
            return cand.resolve()
    return None


def _refuse(source: str, field: str, value: Any, why: str = "is not allowed") -> TwinInputError:
    return TwinInputError(f"{source}: {field} {value!r} {why}: a scenario uploaded to the dashboard {ALLOWED}")


def _inside(target: Path) -> bool:
    return any(target.is_relative_to(root) for root in allowed_roots())


def confine_path(key: str, value: str, source: str, field: str) -> str:
    """The value the run should see for file-naming field ``field`` (key ``key``): a catalog name as it is,
    a bundled profile's file, or the file's absolute location inside the allowed roots; else refused."""
    if "\x00" in value:
        raise _refuse(source, field, value)
    if _catalog_name(key, value):
        return value
    if key == "profile":
        bundled = _bundled_profile(value)
        if bundled is not None:
            return str(bundled)
    target = expand_path(value, upload_dir())
    try:
        resolved = target.resolve()
    except (OSError, RuntimeError):  # a link loop, a name too long
        raise _refuse(source, field, value) from None
    if not _inside(resolved):
        raise _refuse(source, field, value)
    if TRACES_TOKEN in value or Path(value).is_absolute():
        return value
    if not resolved.exists():  # a stat, not an open
        raise _refuse(source, field, value, "names no uploaded file")
    return str(resolved)


def confine_upload_paths(data: Any, source: str, where: str = "") -> Any:
    """``data`` (an upload's parsed YAML) with every file-naming value confined (``confine_path``); refused
    when one points outside the allowed roots."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            field = f"{where}.{key}" if where else str(key)
            if key in PATH_KEYS and isinstance(value, str):
                out[key] = confine_path(key, value, source, field)
            elif key in PATH_KEYS and isinstance(value, (bytes, bytearray, os.PathLike)):
                raise _refuse(source, field, value, "is not plain text")
            else:
                out[key] = confine_upload_paths(value, source, field)
        return out
    if isinstance(data, list):
        return [confine_upload_paths(v, source, f"{where}.{i}") for i, v in enumerate(data)]
    return data


def _validated_paths(node: Any, where: str = ""):
    """``(key, field, value)`` for every file-naming field of a validated scenario's dump."""
    if isinstance(node, dict):
        for key, value in node.items():
            field = f"{where}.{key}" if where else str(key)
            if key in PATH_KEYS and not isinstance(value, (dict, list)):
                yield key, field, value
            else:
                yield from _validated_paths(value, field)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _validated_paths(value, f"{where}.{i}")


def check_scenario_paths(scenario: Any, source: str) -> None:
    """Every variant of the validated ``scenario`` names only catalog entries or files inside the allowed
    roots, by absolute path (after type coercion: whatever reached a file-naming field)."""
    for name in scenario.names():
        dump = scenario.body(name).model_dump()
        prefix = "" if name == "baseline" else f"variants.{name}."
        for key, field, value in _validated_paths(dump):
            if value is None:
                continue
            if not isinstance(value, str):
                raise _refuse(source, prefix + field, value, "is not plain text")
            if "\x00" in value:
                raise _refuse(source, prefix + field, value)
            if _catalog_name(key, value):
                continue
            target = expand_path(value)
            if not target.is_absolute():
                raise _refuse(source, prefix + field, value, "is a relative path")
            try:
                resolved = target.resolve()
            except (OSError, RuntimeError):
                raise _refuse(source, prefix + field, value) from None
            if not _inside(resolved):
                raise _refuse(source, prefix + field, value)
