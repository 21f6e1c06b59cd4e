"""This machine's processor, by name: what a calibrated profile records as the place it was measured, and what
a CPU profile is checked against when it is used (pure Python; no torch)."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s ``model name``; else the platform's processor or machine)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def same_device(a: str | None, b: str | None) -> bool:
    """Whether two recorded device names are the same model (case and runs of spaces ignored)."""
    norm = lambda s: " ".join(str(s).lower().split())  # noqa: E731
    return a is not None and b is not None and norm(a) == norm(b)


__all__ = ["cpu_name", "same_device"]
