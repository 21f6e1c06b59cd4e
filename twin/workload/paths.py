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


def missing_path_hint(raw: str | os.PathLike, path: Path) -> str:
    """Why a trace path ``raw`` (expanded to ``path``, which does not exist) was looked for there, and the
    closest file beside it: ``"; did you mean 'azure_conv.csv'? ('{traces}' is TWIN_TRACES_DIR=/data)"``."""
    from twin.errors import did_you_mean

    beside = sorted(p.name for p in path.parent.iterdir() if p.is_file()) if path.parent.is_dir() else []
    hint = did_you_mean(path.name, beside)
    text = os.fspath(raw)
    if TRACES_TOKEN in text:
        where = f"{TRACES_ENV}={os.environ[TRACES_ENV]}" if os.environ.get(TRACES_ENV) else \
            f"the shared/traces folder beside the checkout: {TRACES_ENV} is unset"
        return f"{hint} ('{TRACES_TOKEN}' is {where})"
    if not Path(text).expanduser().is_absolute():
        return f"{hint} (a relative path is read from the scenario file's folder)"
    return hint
