"""Export a what-if table (``benchmarks/whatif_fidelity.py --json``) as the packaged per-knob file
``twin/results/data/whatif_bands.json`` (``twin.results.whatif_bands``) that a later ``twin compare`` can show beside a
change (issue 33, round 22; docs/fidelity.md "Round 22: what-if fidelity: predicted changes held out").

Per fold kind (``--kinds``, default GPU and family: the folds the user's error bands come from) x knob x metric: the
pairs, the median |ratio error| and its signed median, the pairs' median absolute error, and the share of pairs with
the measured direction; a knob x metric with fewer than ``--min-pairs`` pairs is left out. Stamped with the held-out
report's commit and date and the commands that made the table. No simulation; under a second.

    python benchmarks/whatif_export.py WHATIF.json --report-commit SHA --report-date YYYY-MM-DD \\
        --command "python benchmarks/whatif_fidelity.py ..." [--kinds GPU,family] [--min-pairs 3] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, positive_int  # noqa: E402
from benchmarks.fold_report import read_json  # noqa: E402
from benchmarks.heldout_bands_export import _commit, _date, _kinds  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.results.whatif_bands import CELL_KEYS, DATA_FILE, KINDS, SCHEMA, check_whatif  # noqa: E402

MIN_PAIRS = 3


def export(table: dict, *, commit: str, date: str, command: str, kinds=KINDS, min_pairs: int = MIN_PAIRS) -> dict:
    """The packaged document of ``table`` ({kind: {knob: {metric: summary}}}, whatif_pairs.table), validated."""
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
    doc = {"schema": SCHEMA, "report": {"commit": commit, "date": date, "command": command},
           "errors": "ratio error = (1 + e_larger) / (1 + e_smaller) - 1, e = predicted / measured - 1 on each "
                     "held-out case; pairs of one fold one knob apart, oriented from the smaller knob value",
           "min_pairs": min_pairs, "kinds": out}
    return check_whatif(doc, "the exported what-if table")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("whatif", type=Path, help="a whatif_fidelity.py --json output")
    ap.add_argument("--report-commit", type=_commit, required=True, help="the commit the held-out report was made at")
    ap.add_argument("--report-date", type=_date, required=True, help="the day it was made (YYYY-MM-DD)")
    ap.add_argument("--command", required=True, help="the commands that made the what-if table (stamped in the file)")
    ap.add_argument("--kinds", type=_kinds, default=KINDS, help="fold kinds to export (GPU,family)")
    ap.add_argument("--min-pairs", type=positive_int, default=MIN_PAIRS, help="fewest pairs for a cell to be kept")
    ap.add_argument("--out", type=Path, default=DATA_FILE, help="the file to write (the packaged one)")
    args = ap.parse_args()
    check_out_path(args.out, "--out")
    if not args.command.strip():
        raise TwinInputError("--command: empty (the commands that made the table)")
    data = read_json(args.whatif)
    if not isinstance(data.get("summary"), dict):
        raise TwinInputError(f"{args.whatif}: no summary object (a whatif_fidelity.py --json output)")
    doc = export(data["summary"], commit=args.report_commit, date=args.report_date, command=args.command.strip(),
                 kinds=args.kinds, min_pairs=args.min_pairs)
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    for kind, knobs in doc["kinds"].items():
        print(f"{kind:7s} " + ", ".join(f"{k} ({max(c['n'] for c in m.values())} pairs)" for k, m in knobs.items()))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    run_script(main)
