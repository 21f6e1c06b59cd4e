"""The reading scripts that run ``benchmarks/fidelity_real.py`` in their own process, with a trial term patched on
(issue 33): their own options before ``--``, fidelity_real's after it, and the one way to hand those over."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from unittest import mock


def split_at_dashes(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the script's own arguments: those before the first ``--``; fidelity_real's: those after it, [] without)."""
    argv = list(argv)
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1:]


def workers_given(args: Sequence[str]) -> list[str]:
    """The values ``args`` (fidelity_real's) gives ``--workers``: ``--workers N``, ``--workers=N`` and the prefixes
    argparse accepts for it (``--work N``); a trailing option without its value gives "" (a script whose patch stays in
    this process refuses any but "1")."""
    args = list(args)
    out = []
    for i, a in enumerate(args):
        option, eq, value = a.partition("=")
        if len(option) > 2 and "--workers".startswith(option):
            out.append(value if eq else (args[i + 1] if i + 1 < len(args) else ""))
    return out


def run_fidelity_real(args: Sequence[str]) -> None:
    """``fidelity_real.py args`` in this process (so whatever the caller patched on applies to every fold); its
    ``sys.argv`` for this call only (restored after it)."""
    from benchmarks import fidelity_real
    with mock.patch.object(sys, "argv", ["fidelity_real.py", *args]):
        fidelity_real.main()
