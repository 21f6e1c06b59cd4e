"""Are the held-out error bands honest? (issue 33, round 20): how often a held-out case's signed error falls inside
an error band built WITHOUT it, per fold kind x (GPU generation, MoE?) cell x metric and pooled, for each band
construction of ``benchmarks/heldout_bands_export.py`` (``order``: order statistics; ``linear``: numpy's p10..p90,
round 19's) and, as a reading, ``weibull`` (numpy's p10..p90 at the (n + 1) plotting positions: the order range
interpolated, ~80 % expected rather than >= 80 %). A user reads a band's range as "80 % of servers like mine land in
here": held out, ~80 % should.

What "without it" means (``--leave``):
* ``case``: the band from the cell's other cases (the case's own fold kind): a new configuration of a kind of server
  the evidence holds;
* ``family``: the band from the cell's cases of the other model families (the case's family out of the evidence:
  a new model). A cell with one family has no band here (counted as ``no band``, not as a miss);
* ``kind``: the band from the other fold kind's cell, all its cases (GPU-fold bands checked against the family
  folds' errors of the same cell, and the reverse).

A case's cell comes from the ground truth (``heldout_bands_export.ground_truth_servers``), its family from the
report's family folds (the fold that holds it out). No simulation; a second or two.

    python benchmarks/band_coverage.py REPORT.json --ground-truth ../shared/ground-truth
        [--constructions order,linear,weibull] [--leave case,family,kind] [--min-cases 5] [--pool-thin 9] [--cells]
        [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_folder, check_out_path, name_choices, nonneg_int, positive_int  # noqa: E402
from benchmarks.fold_report import FoldReport, load_report  # noqa: E402
from benchmarks.heldout_bands_export import MIN_CASES, band_ends, ground_truth_servers  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.hardware.name_probe import quoted  # noqa: E402
from twin.results.heldout_bands import CONSTRUCTIONS, KINDS, SHOWN  # noqa: E402

LEAVE = ("case", "family", "kind")
POOLED = "pooled"
READING_CONSTRUCTIONS = ("weibull",)     # tested here, not exported


class Case(NamedTuple):
    kind: str                     # the fold kind whose prediction ``errors`` are
    cell: tuple[str, bool]        # (GPU generation, MoE?)
    name: str
    family: str                   # the family fold that holds the case out
    errors: dict[str, float]      # {metric: signed error}


def ends(errors: Sequence[float], construction: str) -> tuple[float, float]:
    """The band's range of ``errors``: the exporter's constructions, or ``weibull`` (numpy's p10 / p90 by the
    (n + 1) plotting positions)."""
    if construction == "weibull":
        return (float(np.percentile(errors, 10, method="weibull")),
                float(np.percentile(errors, 90, method="weibull")))
    return band_ends(errors, construction)


def cell_name(cell: tuple[str, bool] | str) -> str:
    return cell if isinstance(cell, str) else f"{cell[0]} {'MoE' if cell[1] else 'dense'}"


def report_cases(report: FoldReport, server_of: dict[str, tuple[str, bool]],
                 kinds: Sequence[str] = KINDS) -> list[Case]:
    """Every held-out case of ``report``'s ``kinds`` folds, with its cell and family (one line where the report has
    no family folds or a case is in no family fold or not in the ground truth)."""
    family = {name: fold["held_out"] for fold in report.folds("family") for name in report.errors(fold)}
    out = []
    for kind in kinds:
        for fold in report.folds(kind):
            for name, errs in report.errors(fold).items():
                cell = server_of.get(name, server_of.get(name.split(" [", 1)[0]))
                if cell is None:
                    raise report.error(f"case {quoted(name)} is not in the ground truth (--ground-truth?)")
                if name not in family:
                    raise report.error(f"case {quoted(name)} is in no family fold (its model family is unknown)")
                out.append(Case(kind, cell, name, family[name], errs))
    return out


def evidence(case: Case, cases: Sequence[Case], leave: str, generation: bool = False) -> list[Case]:
    """The cases a band for ``case`` is built from when ``leave`` is out: the same cell (``generation``: the same GPU
    generation, MoE and dense together), and the same fold kind without the case itself (``case``) or its family
    (``family``), or the other fold kind (``kind``)."""
    if leave not in LEAVE:
        raise TwinInputError(f"--leave {leave!r}: not one of {', '.join(LEAVE)}")
    same = [c for c in cases if (c.cell[0] == case.cell[0] if generation else c.cell == case.cell)]
    if leave == "kind":
        return [c for c in same if c.kind != case.kind]
    if leave == "family":
        return [c for c in same if c.kind == case.kind and c.family != case.family]
    return [c for c in same if c.kind == case.kind and c.name != case.name]


def coverage(cases: Sequence[Case], metric: str, construction: str, leave: str, min_cases: int = MIN_CASES,
             pool_thin: int = 0) -> dict[str, dict]:
    """Per fold kind, {cell name or ``pooled``: {inside, tested, no_band, share, width_median}}: how many of the
    kind's cases with ``metric`` fall inside (ends included) the ``construction`` band of their ``evidence``
    (where the cell's has fewer than ``pool_thin`` errors, its GPU generation's); a case whose evidence has fewer
    than ``min_cases`` errors has no band (``no_band``, not tested)."""
    out: dict[str, dict] = {}
    for case in cases:
        if metric not in case.errors:
            continue
        errs = [c.errors[metric] for c in evidence(case, cases, leave) if metric in c.errors]
        if len(errs) < pool_thin:
            errs = [c.errors[metric] for c in evidence(case, cases, leave, generation=True) if metric in c.errors]
        for key in (cell_name(case.cell), POOLED):
            row = out.setdefault(case.kind, {}).setdefault(key, {"inside": 0, "tested": 0, "no_band": 0,
                                                                 "widths": []})
            if len(errs) < min_cases:
                row["no_band"] += 1
                continue
            lo, hi = ends(errs, construction)
            row["tested"] += 1
            row["inside"] += int(lo <= case.errors[metric] <= hi)
            row["widths"].append(hi - lo)
    for rows in out.values():
        for row in rows.values():
            widths = row.pop("widths")
            row["share"] = row["inside"] / row["tested"] if row["tested"] else None
            row["width_median"] = float(np.median(widths)) if widths else None
    return {kind: dict(sorted(rows.items(), key=lambda kv: kv[0] == POOLED)) for kind, rows in out.items()}


def coverage_table(cases: Sequence[Case], constructions: Sequence[str], leaves: Sequence[str],
                   min_cases: int = MIN_CASES, metrics: Sequence[str] = tuple(m for m, _ in SHOWN),
                   pool_thin: int = 0) -> list[dict]:
    """One row per (construction, leave, fold kind, cell or pooled, metric) of ``coverage``."""
    return [{"construction": con, "leave": leave, "kind": kind, "cell": cell, "metric": metric, **row}
            for con in constructions for leave in leaves for metric in metrics
            for kind, rows in coverage(cases, metric, con, leave, min_cases, pool_thin).items()
            for cell, row in rows.items()]


def _share(row: dict) -> str:
    if not row["tested"]:
        return f"- ({row['no_band']} no band)"
    extra = f", {row['no_band']} no band" if row["no_band"] else ""
    return f"{row['inside']}/{row['tested']} = {100 * row['share']:.0f}%{extra}"


def markdown(rows: Sequence[dict], pooled_only: bool = False) -> str:
    """A table: a line per (construction, leave, fold kind, cell), a column per metric (inside / tested = share)."""
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    titles = dict(SHOWN)
    lines = ["| construction | leave out | fold kind | cell | " + " | ".join(titles.get(m, m) for m in metrics) + " |",
             "|---|---|---|---|" + "---|" * len(metrics)]
    keyed: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        if not pooled_only or r["cell"] == POOLED:
            keyed.setdefault((r["construction"], r["leave"], r["kind"], r["cell"]), {})[r["metric"]] = r
    for key, by_metric in keyed.items():
        cells = [_share(by_metric[m]) if m in by_metric else "-" for m in metrics]
        lines.append("| " + " | ".join(key) + " | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="a fidelity_real.py --json held-out report with GPU and family folds")
    ap.add_argument("--ground-truth", type=Path, required=True, help="the ground truth the report was made on")
    ap.add_argument("--constructions", type=name_choices(CONSTRUCTIONS + READING_CONSTRUCTIONS, "band construction"),
                    default=CONSTRUCTIONS, help="band constructions to test (order,linear; weibull)")
    ap.add_argument("--leave", type=name_choices(LEAVE, "way to leave a case out"), default=LEAVE,
                    help="what a band is built without (case,family,kind)")
    ap.add_argument("--min-cases", type=positive_int, default=MIN_CASES, help="fewest evidence cases for a band")
    ap.add_argument("--pool-thin", type=nonneg_int, default=0,
                    help="a cell with fewer evidence cases borrows its GPU generation's (MoE and dense together)")
    ap.add_argument("--cells", action="store_true", help="print every cell, not only the pooled rows")
    ap.add_argument("--json", type=Path, help="write every row here")
    args = ap.parse_args()
    if args.json:
        check_out_path(args.json, "--json")
    check_folder(args.ground_truth)
    cases = report_cases(load_report(args.report), ground_truth_servers(args.ground_truth))
    rows = coverage_table(cases, args.constructions, args.leave, args.min_cases, pool_thin=args.pool_thin)
    print(markdown(rows, pooled_only=not args.cells))
    if args.json:
        args.json.write_text(json.dumps({"report": str(args.report), "min_cases": args.min_cases,
                                         "pool_thin": args.pool_thin, "rows": rows},
                                        indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    run_script(main)
