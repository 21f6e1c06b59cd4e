"""Where traces live: ``TWIN_TRACES_DIR`` or ``<repo root>/../shared/traces``, and ``{traces}`` expansion."""

from __future__ import annotations

import os
from pathlib import Path

TRACES_ENV = "TWIN_TRACES_DIR"
TRACES_TOKEN = "{traces}"


def traces_dir() -> Path:
    """The trace folder: env var ``TWIN_TRACES_DIR`` if set, else ``<repo root>/../shared/traces``.

    The repo root is the parent of the ``twin`` package directory.
    """
    env = os.environ.get(TRACES_ENV)
    if env:
        return Path(env).expanduser()
    repo_root = Path(__file__).resolve().parent.parent.parent
    return repo_root.parent / "shared" / "traces"


def expand_path(path: str | os.PathLike, base_dir: str | os.PathLike | None = None) -> Path:
    """Expand ``{traces}`` and ``~``; a relative result is taken relative to ``base_dir`` (if given)."""
    text = os.fspath(path)
    if TRACES_TOKEN in text:
        text = text.replace(TRACES_TOKEN, str(traces_dir()))
    p = Path(text).expanduser()
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    return p
