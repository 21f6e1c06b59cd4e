"""A checked reader of the per-row JSON that a reading script ``--save``s and reads back with ``--from`` /
``--load`` (issue 33, round 18): a list of objects, each with the counts, numbers and flags the script computes
with, in place of a bare ``json.loads``. A defect is one ``TwinInputError`` line naming the file and the row."""

from __future__ import annotations

from pathlib import Path

from benchmarks.fold_report import finite_number, read_json_value
from twin.errors import TwinInputError


def check_rows(rows: object, where: str, counts: tuple[str, ...] = (), positive: tuple[str, ...] = (),
               numbers: tuple[str, ...] = (), flags: tuple[str, ...] = (), text: tuple[str, ...] = ()) -> list[dict]:
    """``rows``: a non-empty list of objects, each with ``counts`` whole numbers >= 1, ``positive`` finite numbers
    > 0, ``numbers`` finite numbers, ``flags`` booleans and ``text`` strings; else one line naming ``where``."""
    if not isinstance(rows, list) or not rows:
        raise TwinInputError(f"{where}: expected a non-empty list of rows (a --save file)")
    for i, r in enumerate(rows):
        for keys, ok, allowed in (
                (counts, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a whole number >= 1"),
                (positive, lambda v: finite_number(v) and v > 0, "a finite number > 0"),
                (numbers, finite_number, "a finite number"),
                (flags, lambda v: isinstance(v, bool), "true or false"),
                (text, lambda v: isinstance(v, str), "text")):
            for key in keys:
                value = r.get(key) if isinstance(r, dict) else None
                if not ok(value):
                    raise TwinInputError(f"{where}: row {i}: {key} is {value!r}, not {allowed} (a --save file)")
    return rows


def read_rows(path: Path, **kinds: tuple[str, ...]) -> list[dict]:
    """The checked rows (``check_rows``) of the JSON file ``path`` (the project's JSON checks first)."""
    return check_rows(read_json_value(path), str(path), **kinds)
