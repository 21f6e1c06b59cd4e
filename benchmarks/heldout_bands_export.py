"""Export a held-out report's errors as the twin's packaged error bands (``twin/results/data/heldout_bands.json``,
read by ``twin.results.heldout_bands`` and shown under ``twin run``'s results).

Issue 33, round 19: per fold kind (``GPU``: a GPU generation predicted with none of its rows in the fit; ``family``:
a model family predicted with none of its rows in the fit), per (GPU generation, MoE or dense) group of held-out
cases, per metric: the count, the median |error|, the median signed error and an 80 % range of the signed errors
(its ends stored as ``p10`` / ``p90``; a group of fewer than ``--min-cases`` cases keeps its medians, no range). Each
case's GPU and model come from the ground truth (``twin.fitting.joint.all_cases``); the file is stamped with the
report's commit and date (``--report-commit``, ``--report-date``: the report does not record them) and the options
it was made with. No simulation; a second or two.

The range's construction (``--construction``; round 20, ``benchmarks/band_coverage.py``):
* ``order`` (the default): the k-th lowest and k-th highest of the n errors, k = floor((n + 1) / 10) and at least 1:
  an unseen case exchangeable with the n falls inside with probability (n + 1 - 2k) / (n + 1) (>= 80 % from n = 9;
  (n - 1) / (n + 1) below, the band's ``coverage``);
* ``linear``: numpy's linear p10..p90 (round 19's bands): inside only ~72 % of the time held out.

    python benchmarks/heldout_bands_export.py REPORT.json --ground-truth ../shared/ground-truth \\
        --report-commit e5697cc --report-date 2026-12-06 [--kinds GPU,family] [--min-cases 5]
        [--construction order|linear] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_folder, check_out_path, name_choices, positive_int  # noqa: E402
from benchmarks.fold_report import FoldReport, load_report  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.hardware.name_probe import quoted  # noqa: E402
from twin.results.heldout_bands import (CONSTRUCTIONS, DATA_FILE, KINDS, METRICS, SCHEMA, check_bands,  # noqa: E402
                                        order_coverage, order_rank)

MIN_CASES = 5                    # fewer held-out cases: no p10..p90 (two cases would make an interval of nothing)
REPORT_OPTIONS = ("folds", "silicon_every", "fit_sim_s", "eval_sim_s", "outer", "fold_loss")


def band_ends(errors: Sequence[float], construction: str) -> tuple[float, float]:
    """The 80 % range of ``errors`` by ``construction`` (``CONSTRUCTIONS``): ``order``: the k-th lowest and k-th
    highest (``order_rank``); ``linear``: numpy's linear p10 and p90."""
    errs = np.sort(np.asarray(errors, dtype=float))
    if construction == "linear":
        return float(np.percentile(errs, 10)), float(np.percentile(errs, 90))
    if construction != "order":
        raise TwinInputError(f"construction {construction!r}: not one of {', '.join(CONSTRUCTIONS)}")
    k = order_rank(len(errs))
    return float(errs[k - 1]), float(errs[len(errs) - k])


def metric_band(errors: Sequence[float], min_cases: int, construction: str = "order") -> dict:
    """Count, median |error|, median signed error, the range's ends ``p10`` / ``p90`` (None below ``min_cases``)
    and, for ``order``, the share of unseen cases it holds (``coverage``)."""
    errs = [float(e) for e in errors]
    ends = band_ends(errs, construction) if len(errs) >= min_cases else (None, None)
    band = {"n": len(errs), "abs_median": float(statistics.median(abs(e) for e in errs)),
            "signed_median": float(statistics.median(errs)), "p10": ends[0], "p90": ends[1]}
    if construction == "order" and ends[0] is not None:
        band["coverage"] = order_coverage(len(errs))
    return band


def kind_groups(report: FoldReport, kind: str, server_of: dict[str, tuple[str, bool]], min_cases: int,
                construction: str = "order") -> list[dict]:
    """The ``kind`` folds' held-out cases grouped by ``server_of[name]`` = (GPU generation, MoE?), each group's
    bands per metric (a metric no case of the group has is absent); groups in first-seen order."""
    cases: dict[tuple[str, bool], dict] = {}
    for fold in report.folds(kind):
        for name, errs in report.errors(fold).items():
            key = server_of.get(name, server_of.get(name.split(" [", 1)[0]))
            if key is None:
                raise report.error(f"case {quoted(name)} is not in the ground truth (--ground-truth?)")
            group = cases.setdefault(key, {"held_out": [], "errors": {}})
            if fold["held_out"] not in group["held_out"]:
                group["held_out"].append(fold["held_out"])
            for metric in METRICS:
                if metric in errs:
                    group["errors"].setdefault(metric, []).append(errs[metric])
    return [{"generation": gen, "moe": moe, "held_out": g["held_out"],
             "metrics": {m: metric_band(g["errors"][m], min_cases, construction) for m in METRICS
                         if m in g["errors"]}}
            for (gen, moe), g in cases.items()]


def report_command(report: FoldReport) -> str:
    """The ``fidelity_real.py`` options the report was made with (its ``args``), as a command line."""
    args = report.data.get("args")
    if not isinstance(args, dict):
        raise report.error("no args object (the options it was made with)")
    opts = [f"--{k.replace('_', '-')} {args[k]}" for k in REPORT_OPTIONS if k in args and args[k] is not None]
    return " ".join(["python benchmarks/fidelity_real.py", *opts, "--json REPORT"])


def export_bands(report: FoldReport, server_of: dict[str, tuple[str, bool]], *, commit: str, date: str,
                 kinds: Sequence[str] = KINDS, min_cases: int = MIN_CASES, construction: str = "order") -> dict:
    """The bands document (``twin.results.heldout_bands.SCHEMA``) of ``report``'s ``kinds`` folds, validated."""
    doc = {"schema": SCHEMA,
           "report": {"commit": commit, "date": date, "command": report_command(report)},
           "errors": "predicted / measured - 1 on each held-out case",
           "interval_percentiles": [10, 90], "construction": construction, "min_cases_for_interval": min_cases,
           "kinds": {kind: kind_groups(report, kind, server_of, min_cases, construction) for kind in kinds}}
    return check_bands(doc, "the exported bands")


def ground_truth_servers(ground_truth: Path) -> dict[str, tuple[str, bool]]:
    """Case name -> (GPU generation, MoE model?) of every ground-truth case."""
    from twin.cost.generations import gpu_generation
    from twin.fitting.joint import all_cases, gpu_of
    from twin.hardware.catalog import resolve_model
    return {c.run.name: (gpu_generation(gpu_of(c)), resolve_model(c.target.model).is_moe)
            for c in all_cases(ground_truth)}


def _commit(text: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{7,40}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a git commit (7-40 lower-case hex digits)")
    return text


def _date(text: str) -> str:
    try:
        return datetime.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (YYYY-MM-DD)") from None


_kinds = name_choices(KINDS, "fold kind")     # --kinds GPU,family


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="a fidelity_real.py --json held-out report")
    ap.add_argument("--ground-truth", type=Path, required=True, help="the ground truth the report was made on")
    ap.add_argument("--report-commit", type=_commit, required=True, help="the commit the report was made at")
    ap.add_argument("--report-date", type=_date, required=True, help="the day the report was made (YYYY-MM-DD)")
    ap.add_argument("--kinds", type=_kinds, default=KINDS, help="fold kinds to export (GPU,family)")
    ap.add_argument("--min-cases", type=positive_int, default=MIN_CASES, help="fewest cases for a p10..p90")
    ap.add_argument("--construction", choices=CONSTRUCTIONS, default="order",
                    help="the 80 %% range: order statistics (the default) or numpy's linear p10..p90 (round 19)")
    ap.add_argument("--out", type=Path, default=DATA_FILE, help="the bands file to write (the packaged one)")
    args = ap.parse_args()
    check_out_path(args.out, "--out")
    check_folder(args.ground_truth)
    report = load_report(args.report)
    doc = export_bands(report, ground_truth_servers(args.ground_truth), commit=args.report_commit,
                       date=args.report_date, kinds=args.kinds, min_cases=args.min_cases,
                       construction=args.construction)
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    for kind, groups in doc["kinds"].items():
        for g in groups:
            n = max(b["n"] for b in g["metrics"].values())
            print(f"{kind:7s} {g['generation']:10s} {'MoE' if g['moe'] else 'dense':6s} {n:3d} cases (held out: "
                  f"{', '.join(g['held_out'])})")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    run_script(main)
