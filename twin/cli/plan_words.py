"""Words ``twin plan`` and ``twin sweep`` print for humans: a count with its noun in the right number
(``1 GPU``, ``3 GPUs``). Text output only: the JSON / CSV keep their keys and values (a file format)."""

from __future__ import annotations


def counted(n: int, noun: str) -> str:
    """``1 GPU``, ``0 GPUs``, ``3 GPUs``: the count and its noun, plural unless the count is exactly one."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
