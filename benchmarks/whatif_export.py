"""Export a what-if table (``benchmarks/whatif_fidelity.py --json``) as the packaged per-knob file
``twin/results/data/whatif_bands.json`` (``twin.results.whatif_bands``) that a later ``twin compare`` can show beside a
change (issue 33, round 22; docs/fidelity.md "Round 22: what-if fidelity: predicted changes held out").

Per fold kind (``--kinds``, default GPU and family: the folds the user's error bands come from) x knob x metric: the
pairs, the median |ratio error| and its signed median, the pairs' median absolute error, and the share of pairs with
the measured direction; a knob x metric with fewer than ``--min-pairs`` pairs is left out. Stamped with the held-out
report's commit and date and the commands that made the table. No simulation; under a second.

``--loose LOOSE.json`` (a ``whatif_fidelity.py --ignore release,server --json`` output of the same report) adds the
loose pairs' cells as the file's separate ``loose`` section (schema 2, round 22, 33zA), else ``loose`` is null.

    python benchmarks/whatif_export.py WHATIF.json --report-commit SHA --report-date YYYY-MM-DD \\
        --command "python benchmarks/whatif_fidelity.py ..." [--loose LOOSE.json] [--kinds GPU,family] \\
        [--min-pairs 3] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, positive_int  # noqa: E402
from benchmarks.fold_report import read_json_value  # noqa: E402
from benchmarks.heldout_bands_export import _commit, _date, _kinds  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.results.heldout_bands import cut, finite, shown  # noqa: E402
from twin.results.whatif_bands import (  # noqa: E402
    CELL_KEYS, DATA_FILE, KINDS, LOOSE_ATTRIBUTES, SCHEMA, check_whatif)

MIN_PAIRS = 3


def _cells(table: dict, kinds, min_pairs: int) -> dict:
    """{kind: {knob: {metric: cell}}} of a what-if ``table``, the cells with ``min_pairs`` pairs or more."""
    out = {}
    for kind in kinds:
        if kind not in table:
            raise TwinInputError(f"no {kind} pairs in the what-if table (it has: {', '.join(table) or 'none'})")
        knobs = {}
        for knob, metrics in table[kind].items():
            cells = {m: {k: s[k] for k in CELL_KEYS} for m, s in metrics.items() if s["n"] >= min_pairs}
            if cells:
                knobs[knob] = cells
        out[kind] = knobs
    return out


def export(table: dict, *, commit: str, date: str, command: str, kinds=KINDS, min_pairs: int = MIN_PAIRS,
           loose: dict | None = None, ignore: list | None = None) -> dict:
    """The packaged document of ``table`` ({kind: {knob: {metric: summary}}}, whatif_pairs.table) and of the loose
    pairs' table ``loose`` (made with ``ignore``; ``None``: no loose section), validated."""
    if (loose is None) != (ignore is None):
        raise TwinInputError("a loose table needs the attributes its pairs may differ in (ignore), and the reverse")
    out = _cells(table, kinds, min_pairs)
    doc = {"schema": SCHEMA, "report": {"commit": commit, "date": date, "command": command},
           "errors": "ratio error = (1 + e_larger) / (1 + e_smaller) - 1, e = predicted / measured - 1 on each "
                     "held-out case; pairs of one fold one knob apart, oriented from the smaller knob value",
           "min_pairs": min_pairs, "kinds": out,
           "loose": None if loose is None else {"ignore": list(ignore), "kinds": _cells(loose, kinds, min_pairs)}}
    return check_whatif(doc, "the exported what-if table")


def _cell_value(key: str, value: object) -> bool:
    """A summary cell's ``key`` holds a value of its form: the counts whole numbers (``n`` >= 1), the share right
    a finite number or null (no pair judged), the medians finite numbers."""
    if key in ("n", "direction_judged"):
        return isinstance(value, int) and not isinstance(value, bool) and value >= (key == "n")
    return finite(value) or (key == "direction_right" and value is None)


def _check_summary(path: Path, summary: dict) -> None:
    """The shape ``_cells`` reads: {kind: {knob: {metric: cell}}}, each cell an object with every ``CELL_KEYS``
    key of its form (round 23, 33zG: a list or a cell without ``n`` was a traceback, ``n`` NaN dropped the cell
    silently); the kept cells' ranges are ``check_whatif``'s."""
    for kind, knobs in summary.items():
        for knob, metrics in (knobs.items() if isinstance(knobs, dict) else [(None, None)]):
            for metric, cell in (metrics.items() if isinstance(metrics, dict) else [(None, None)]):
                where = ".".join(cut(str(k)) for k in ("summary", kind, knob, metric) if k is not None)
                if not isinstance(cell, dict):
                    raise TwinInputError(f"{path}: {where} is not an object (a whatif_fidelity.py --json output)")
                bad = next((k for k in CELL_KEYS if k not in cell or not _cell_value(k, cell[k])), None)
                if bad is None:
                    continue
                found = shown(cell[bad]) if bad in cell else "missing"
                form = {"n": "a whole number >= 1", "direction_judged": "a whole number >= 0",
                        "direction_right": "a finite number or null"}.get(bad, "a finite number")
                raise TwinInputError(f"{path}: {where}.{bad} is {found}, not {form} (a whatif_fidelity.py --json "
                                     "output)")


def _whatif(path: Path) -> dict:
    """A whatif_fidelity.py --json output: its summary object (``_check_summary``) and its ``ignore`` list,
    checked."""
    data = read_json_value(path)
    if not isinstance(data, dict) or not isinstance(data.get("summary"), dict):
        raise TwinInputError(f"{path}: no summary object (a whatif_fidelity.py --json output)")
    _check_summary(path, data["summary"])
    ignore = data.get("ignore")
    if not isinstance(ignore, list) or any(not isinstance(a, str) or a not in LOOSE_ATTRIBUTES for a in ignore):
        raise TwinInputError(f"{path}: ignore is {shown(ignore)}, not a list of {', '.join(LOOSE_ATTRIBUTES)} "
                             "(a whatif_fidelity.py --json output)")
    return data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("whatif", type=Path, help="a whatif_fidelity.py --json output")
    ap.add_argument("--report-commit", type=_commit, required=True, help="the commit the held-out report was made at")
    ap.add_argument("--report-date", type=_date, required=True, help="the day it was made (YYYY-MM-DD)")
    ap.add_argument("--command", required=True, help="the commands that made the what-if table (stamped in the file)")
    ap.add_argument("--loose", type=Path, help="a whatif_fidelity.py --ignore ... --json output of the same report "
                    "(its cells become the file's loose section)")
    ap.add_argument("--kinds", type=_kinds, default=KINDS, help="fold kinds to export (GPU,family)")
    ap.add_argument("--min-pairs", type=positive_int, default=MIN_PAIRS, help="fewest pairs for a cell to be kept")
    ap.add_argument("--out", type=Path, default=DATA_FILE, help="the file to write (the packaged one)")
    args = ap.parse_args()
    check_out_path(args.out, "--out")
    if not args.command.strip():
        raise TwinInputError("--command: empty (the commands that made the table)")
    data = _whatif(args.whatif)
    if data["ignore"]:
        raise TwinInputError(f"{args.whatif}: made with --ignore {','.join(data['ignore'])} (loose pairs): give the "
                             "strict table first and the loose one as --loose")
    loose = None if args.loose is None else _whatif(args.loose)
    if loose is not None:
        if not loose["ignore"]:
            raise TwinInputError(f"--loose {args.loose}: made without --ignore (strict pairs), not a loose table")
        for key in ("report", "floor_scale", "kinds"):
            if loose.get(key) != data.get(key):
                raise TwinInputError(f"--loose {args.loose}: its {key} is {loose.get(key)!r}, the strict table's "
                                     f"{data.get(key)!r} (both must read one report alike)")
    doc = export(data["summary"], commit=args.report_commit, date=args.report_date, command=args.command.strip(),
                 kinds=args.kinds, min_pairs=args.min_pairs, loose=None if loose is None else loose["summary"],
                 ignore=None if loose is None else loose["ignore"])
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    for label, kinds in (("", doc["kinds"]), ("loose ", (doc["loose"] or {}).get("kinds", {}))):
        for kind, knobs in kinds.items():
            print(f"{label}{kind:7s} " + ", ".join(f"{k} ({max(c['n'] for c in m.values())} pairs)"
                                                    for k, m in knobs.items()))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    run_script(main)
