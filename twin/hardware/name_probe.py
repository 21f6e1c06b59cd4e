"""A GPU or model given by name or by path (``resolve_gpu``, ``resolve_model``), probed without a traceback: a
name longer than a path may be (``ENAMETOOLONG``: over 255 bytes in one component, or 4,096 in all) or holding a
NUL byte is not a file, and is echoed cut to a readable length in the refusal."""

from __future__ import annotations

from pathlib import Path

MAX_ECHO_CHARS = 512      # a path of ordinary length whole; a 10 MB name cut


def is_file(path: Path) -> bool:
    """``path.is_file()``, False where the name cannot be a path at all."""
    try:
        return path.is_file()
    except (OSError, ValueError):      # ENAMETOOLONG; a NUL byte
        return False


def is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def quoted(text: object) -> str:
    """``repr(str(text))`` cut to ``MAX_ECHO_CHARS`` (a 10 MB name stays one readable line)."""
    shown = repr(str(text))
    return shown if len(shown) <= MAX_ECHO_CHARS else shown[:MAX_ECHO_CHARS - 3] + "..."


__all__ = ["MAX_ECHO_CHARS", "is_dir", "is_file", "quoted"]
