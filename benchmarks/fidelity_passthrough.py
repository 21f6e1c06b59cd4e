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


def run_fidelity_real(args: Sequence[str]) -> None:
    """``fidelity_real.py args`` in this process (so whatever the caller patched on applies to every fold); its
    ``sys.argv`` for this call only (restored after it)."""
    from benchmarks import fidelity_real
    with mock.patch.object(sys, "argv", ["fidelity_real.py", *args]):
        fidelity_real.main()
