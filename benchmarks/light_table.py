"""A checked reader of a ``ttft_light_load.py --csv`` table (issue 33, round 18): the table ``ttft_intercept.py
--csv`` and ``ttft_tp_split.py`` read, in place of two unchecked ``csv.DictReader`` loops."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from benchmarks.cli_checks import bounded
from twin.errors import TwinInputError
from twin.yaml_input import read_text

TABLE_FLOATS = ("gap_ms", "prefill_ms", "measured_ms", "twin_ms", "tpot_meas_ms", "tpot_twin_ms")
TABLE_COUNTS = ("conc", "isl", "tp", "layers")
TABLE_TEXT = ("set", "family", "gpu", "month", "version", "precision")


def read_table(path: Path, floats: tuple[str, ...] = TABLE_FLOATS, counts: tuple[str, ...] = TABLE_COUNTS,
               text: tuple[str, ...] = TABLE_TEXT) -> list[dict]:
    """The rows of a ``ttft_light_load.py --csv`` table, checked (the project's text reader: size, UTF-8; the
    columns a caller reads present: ``floats`` finite numbers, ``counts`` whole numbers >= 1, ``text``); a defect
    is one ``TwinInputError`` line naming the file, the line and the field."""
    try:
        rows = list(csv.DictReader(read_text(path, "table").splitlines()))
    except csv.Error as exc:
        raise TwinInputError(f"{path}: not a CSV table ({exc})") from None
    if not rows:
        raise TwinInputError(f"{path}: no rows (a ttft_light_load.py --csv table)")
    for line, r in enumerate(rows, start=2):
        missing = [k for k in floats + counts + text if r.get(k) is None]
        if missing:
            raise TwinInputError(f"{path}: line {line}: no {missing[0]} (a ttft_light_load.py --csv table)")
        for keys, parse in ((floats, bounded(False)), (counts, bounded(True, 1))):
            for k in keys:
                try:
                    r[k] = parse(r[k])
                except argparse.ArgumentTypeError as exc:
                    raise TwinInputError(f"{path}: line {line}: {k} {exc}") from None
    return rows
