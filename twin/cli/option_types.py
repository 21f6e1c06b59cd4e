"""Click parameter types the twin's commands share, so that a bad value is one line before any work starts:

- ``FiniteFloatRange``: click's ``FloatRange`` lets NaN through (every comparison with NaN is false, so no bound
  refuses it) and, without a maximum, infinity too; a NaN or infinite budget, rate or fraction then hangs a
  measurement loop or fails deep inside it. This one refuses both, and a number given with a unit (``16rps``)
  says to write the number alone.
- ``OutputFile``: a file the command writes. A folder, a symbolic-link loop, a missing or read-only parent folder
  or a read-only file are refused when the option is read, not met as a traceback after the simulation.
- ``refuse_outside_mode``: an option given where it cannot apply is an error, not silently ignored."""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from twin.cli.output_path import DIRECTORY, LINK_LOOP, NO_FOLDER, NOT_WRITABLE, output_path_problem
from twin.errors import TwinInputError


_NUMBER_WITH_UNIT = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)\s*[^\d\s.eE]")


class FiniteFloatRange(click.FloatRange):
    """``click.FloatRange`` that also refuses NaN and infinities."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and _NUMBER_WITH_UNIT.match(value):    # 16rps, 500ms, 0.9 GiB
            self.fail(f"{value!r} is not a number: write the number alone.", param, ctx)
        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


# the click options' words for each problem `output_path_problem` finds (the path or folder quoted; a folder is
# refused by click.Path itself first, in the same words)
OUTPUT_FILE_MESSAGES = {DIRECTORY: "File {} is a directory.", LINK_LOOP: "{} is a symbolic link loop.",
                        NO_FOLDER: "folder {} does not exist.", NOT_WRITABLE: "{} is not writable."}


class OutputFile(click.Path):
    """A path the command writes a file to (``click.Path(dir_okay=False)`` plus the checks above)."""

    def __init__(self) -> None:
        super().__init__(dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        rv = super().convert(value, param, ctx)     # click's own words for a folder: "File '...' is a directory."
        found = output_path_problem(Path(os.fsdecode(rv)))
        if found is not None:
            problem, where = found
            self.fail(OUTPUT_FILE_MESSAGES[problem].format(repr(str(where))), param, ctx)
        return rv


def refuse_outside_mode(mode: str, active: bool, names: tuple[str, ...]) -> None:
    """Options (by parameter name) that apply only in ``mode``, given on the command line while it is not
    ``active``: a one-line error instead of an option silently ignored."""
    ctx = click.get_current_context()
    for name in names:
        if not active and ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT):
            option = next(p for p in ctx.command.params if p.name == name).opts[0]
            raise TwinInputError(f"{option}: applies only with {mode}")
