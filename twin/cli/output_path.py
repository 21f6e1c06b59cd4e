"""The one check of a path a command will write a file to, shared by the twin's click options
(``twin.cli.option_types.OutputFile``) and the benchmark scripts' argparse options
(``benchmarks.cli_checks.check_out_path``): both adapters call `output_path_problem` and only word its answer,
so what they refuse cannot drift apart.

Refused, in this order: a folder (``DIRECTORY``), a symbolic-link loop (``LINK_LOOP``), a parent folder that does
not exist (``NO_FOLDER``), a parent folder the process may not write into or an existing file it may not write
(``NOT_WRITABLE``). Checked when the option is read, so a bad path is one line before the work, not a traceback
after it."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

DIRECTORY = "directory"
LINK_LOOP = "link loop"
NO_FOLDER = "no folder"
NOT_WRITABLE = "not writable"


def output_path_problem(path: Path) -> tuple[str, Path] | None:
    """None if a file can be written at ``path``; else (the problem, the path it is about: ``path`` itself, or
    its parent folder for ``NO_FOLDER``)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return LINK_LOOP, path
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        return DIRECTORY, path
    folder = path.parent
    if not folder.is_dir():
        return NO_FOLDER, folder
    if not os.access(folder, os.W_OK | os.X_OK) or (mode is not None and not os.access(path, os.W_OK)):
        return NOT_WRITABLE, path
    return None
