"""Checked command-line values for the benchmark scripts (issue 33, round 18): argparse ``type=`` callables that
refuse NaN, infinities and out-of-range numbers, and a comma-separated number list read the same way. A bad value
is one line naming the option (argparse's ``error: argument --x: ...`` for a ``type=``; a ``TwinInputError`` for a
list, which ``twin.errors.run_script`` prints as one line)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from twin.cli.output_path import DIRECTORY, LINK_LOOP, NO_FOLDER, NOT_WRITABLE, output_path_problem
from twin.errors import TwinInputError


def _number(text: str, whole: bool) -> float | int:
    try:
        value = int(text) if whole else float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole number' if whole else 'number'}") from None
    if not whole and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def bounded(whole: bool, low: float | None = None, low_open: bool = False,
            high: float | None = None) -> Callable[[str], float | int]:
    """An argparse ``type=``: a whole number (``whole``) or a finite float, at least ``low`` (above it where
    ``low_open``) and at most ``high``, where given."""
    def parse(text: str) -> float | int:
        value = _number(text, whole)
        if low is not None and (value <= low if low_open else value < low):
            raise argparse.ArgumentTypeError(f"{text!r}: must be {'>' if low_open else '>='} {low:g}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{text!r}: must be <= {high:g}")
        return value
    parse.__name__ = "whole number" if whole else "number"      # argparse names the type in its messages
    return parse


positive_int = bounded(True, 1)
nonneg_int = bounded(True, 0)
finite_float = bounded(False)
positive_float = bounded(False, 0.0, low_open=True)
nonneg_float = bounded(False, 0.0)


# round 19 (33s): a simulated window of an open-loop run, in seconds, or "whole" (None: the whole run)
WHOLE_RUN = "whole"


def seconds_or_whole(text: str) -> float | None:
    """An argparse ``type=``: a positive finite number of seconds, or ``whole`` (returned as None)."""
    if text.strip() == WHOLE_RUN:
        return None
    try:
        return positive_float(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (or {WHOLE_RUN!r})") from None


seconds_or_whole.__name__ = f"seconds or {WHOLE_RUN!r}"


def number_list(text: str, flag: str, *, whole: bool = False, low: float | None = None, low_open: bool = False,
                high: float | None = None, allow_empty: bool = False) -> list:
    """``"1,2.5,4"`` -> its numbers, each checked as ``bounded`` checks one (empty items skipped); an item that is
    not such a number, or no item at all unless ``allow_empty``, is one ``TwinInputError`` line naming ``flag``."""
    parse = bounded(whole, low, low_open, high)
    out = []
    for item in text.split(","):
        if not item.strip():
            continue
        try:
            out.append(parse(item.strip()))
        except argparse.ArgumentTypeError as exc:
            raise TwinInputError(f"{flag} {text!r}: {exc}") from None
    if not out and not allow_empty:
        raise TwinInputError(f"{flag} {text!r}: expected one or more comma-separated numbers")
    return out


# the scripts' words for each problem `output_path_problem` finds (after "FLAG PATH: ")
OUT_PATH_MESSAGES = {DIRECTORY: "a directory", LINK_LOOP: "a symbolic link loop",
                     NO_FOLDER: "folder {} does not exist", NOT_WRITABLE: "not writable"}


def name_choices(allowed: Sequence[str], what: str) -> Callable[[str], tuple[str, ...]]:
    """An argparse ``type=``: comma-separated names, each once in the order given, at least one, each one of
    ``allowed`` (``'x': not a WHAT (a, b)`` otherwise)."""
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        bad = [t for t in items if t not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{bad[0] if bad else text!r}: not a {what} ({', '.join(allowed)})")
        return items
    return parse


def check_out_path(path: Path | str | None, flag: str = "--json") -> None:
    """A file the script may write at its end: twin.cli.output_path's check (the twin's own ``OutputFile``
    options make the same one), before the work."""
    found = None if path is None else output_path_problem(Path(path))
    if found is not None:
        problem, where = found
        raise TwinInputError(f"{flag} {path}: " + OUT_PATH_MESSAGES[problem].format(where))


def check_folder(path: Path, flag: str = "--ground-truth") -> None:
    """A folder the script reads (the ground truth), checked before the work."""
    if not path.is_dir():
        raise TwinInputError(f"{flag} {path}: not a folder")


def refuse_given(args: argparse.Namespace, flags: tuple[str, ...], where: str) -> None:
    """Options that cannot apply in the mode the command line chose: each has default None (so "given" is told
    from "not given"); any given is one ``TwinInputError`` line naming them and ``where`` they apply."""
    given = [f for f in flags if getattr(args, f.lstrip("-").replace("-", "_")) is not None]
    if given:
        raise TwinInputError(f"{', '.join(given)}: {'applies' if len(given) == 1 else 'apply'} {where} only")
