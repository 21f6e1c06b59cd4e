"""Does the held-out report's prediction window flatter or penalise the twin on the inference-perf stages?

``benchmarks/fidelity_real.py`` predicts each inference-perf stage's first ``--eval-sim-s`` seconds (60 s) while the
measured means cover the whole stage (600-1,200 s of constant-rate load). This reading simulates the 21 stages at
two windows, the report's and the whole stage, at the embedded defaults and, from a saved report JSON, at each named
fold's parameters (the fold's own point: ``report["folds"][kind]["folds"][i]["params"]``, so no refit), and prints
per stage the signed error of TTFT mean / p50, TPOT, E2E and throughput at both windows, then the pooled median
|error| and signed median per variant and window, the simulation's wall time, and, with ``--report``, each fold
kind's pooled held-out medians with the report's inference-perf errors replaced by this reading's (``spliced``).

    python benchmarks/eval_window_reading.py [--ground-truth DIR] [--report REPORT.json]
        [--variants defaults,source:inference-perf,GPU:H100-SXM] [--windows 60,whole] [--workers 2] [--json F]

A variant ``KIND:GROUP`` needs ``--report``; its stages are the held-out group's inference-perf cases.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import WHOLE_RUN as WHOLE, check_out_path, positive_int, seconds_or_whole  # noqa: E402
from benchmarks.error_medians import error_medians  # noqa: E402
from benchmarks.fold_report import FoldReport, load_report  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import FOLDS, METRICS, all_cases, default_start, errors, summarize  # noqa: E402


def parse_windows(text: str) -> list[float | None]:
    """``60,whole`` -> [60.0, None] (None: the whole stage), each item as ``cli_checks.seconds_or_whole`` reads
    it; one-line errors for anything else."""
    out: list[float | None] = []
    for item in (t.strip() for t in text.split(",")):
        try:
            out.append(seconds_or_whole(item))
        except argparse.ArgumentTypeError as exc:
            raise TwinInputError(f"--windows {item!r}: {exc}") from None
    if not out or len(set(out)) != len(out):
        raise TwinInputError(f"--windows {text!r}: give distinct windows, e.g. 60,{WHOLE}")
    return out


def fold_params(report: dict, variant: str) -> tuple[str, str, dict[str, float]]:
    """(kind, group, params) of ``KIND:GROUP`` in a saved report (read through ``fold_report.FoldReport``);
    one-line errors when it is not there."""
    kind, _, group = variant.partition(":")
    if kind not in FOLDS or not group:
        raise TwinInputError(f"--variants {variant!r}: 'defaults' or KIND:GROUP with KIND one of {', '.join(FOLDS)}")
    rep = FoldReport(report, "--report")
    return kind, group, rep.params(rep.fold(kind, group))


def label(window: float | None) -> str:
    return WHOLE if window is None else f"{window:g} s"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--report", type=Path, default=None, help="a fidelity_real.py --json report (fold variants)")
    ap.add_argument("--variants", default="defaults")
    ap.add_argument("--windows", default=f"60,{WHOLE}")
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    return ap


def main() -> None:
    args = parser().parse_args()
    check_out_path(args.json, "--json")
    windows = parse_windows(args.windows)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants:
        raise TwinInputError("--variants: give at least one (defaults or KIND:GROUP)")
    report = None
    if any(v != "defaults" for v in variants):
        if args.report is None:
            raise TwinInputError("--variants KIND:GROUP needs --report REPORT.json")
        rep = load_report(args.report)
        for kind in rep.kinds():        # round 23: spliced() reads the errors raw; checked before the simulations
            for fold in rep.folds(kind):
                rep.errors(fold)
        report = rep.data
    stages = [c for c in all_cases(args.ground_truth, silicon_every=10**9) if FOLDS["source"](c) == "inference-perf"]
    out: dict = {"windows": [label(w) for w in windows], "variants": {}}
    for variant in variants:
        if variant == "defaults":
            cases, params = stages, default_start(())
        else:
            kind, group, params = fold_params(report, variant)
            cases = [c for c in stages if FOLDS[kind](c) == group]
            if not cases:
                raise TwinInputError(f"--variants {variant!r}: holds out no inference-perf stage")
        doc: dict = {"cases": [c.run.name for c in cases], "errors": {}, "pooled": {}, "wall_s": {}}
        for w in windows:
            t0 = time.perf_counter()
            sims = simulate_cases(cases, params, max_sim_s=w, workers=args.workers)
            doc["wall_s"][label(w)] = round(time.perf_counter() - t0, 1)
            preds = [r.metrics for r in sims]
            doc["errors"][label(w)] = {c.run.name: errors(c, p) for c, p in zip(cases, preds)}
            doc["pooled"][label(w)] = summarize(list(zip(cases, preds)))
            print(f"{variant}: {label(w)} simulated in {doc['wall_s'][label(w)]:.0f} s", flush=True)
        out["variants"][variant] = doc
        print_variant(variant, doc, windows)
    if report is not None:
        out["spliced"] = spliced(report, out["variants"], [label(w) for w in windows])
        print_spliced(out["spliced"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


def pooled_of(errs: list[dict[str, float]]) -> dict[str, dict]:
    """Per metric: count, median |error| and median signed error over error dicts (``joint.summarize``'s keys;
    ``error_medians``)."""
    out = {}
    for m, _ in METRICS:
        abs_med, signed, n = error_medians(errs, m) or (None, None, 0)
        out[m] = {"n": n, "abs": abs_med, "signed": signed}
    return out


def pooled_cell(pooled: dict, metric: str) -> str:
    """One metric of ``pooled_of`` as ``|error| (signed)`` in percent, ``-`` where no case has it."""
    if not pooled.get(metric, {}).get("n"):
        return "-"
    return f"{100 * pooled[metric]['abs']:.1f} ({100 * pooled[metric]['signed']:+.1f})"


def spliced(report: dict, variants: dict, windows: list[str]) -> dict:
    """Each fold kind's pooled held-out medians in ``report`` with its inference-perf stages' errors replaced by
    this reading's at each window (the silicon rows' errors kept as the report has them); a kind is left out
    unless every fold of it that holds out an inference-perf stage was read here."""
    stages = {n for doc in variants.values() for n in doc["cases"]}
    out = {}
    for kind, body in report.get("folds", {}).items():
        errs_by_window: dict[str, list] = {w: [] for w in windows}
        complete = True
        for f in body.get("folds", []):
            errs = f.get("errors", {})
            mine = [n for n in errs if n in stages]
            doc = variants.get(f"{kind}:{f.get('held_out')}")
            if mine and doc is None:
                complete = False
                break
            for w in windows:
                errs_by_window[w] += [doc["errors"][w][n] if n in mine else e for n, e in errs.items()]
        if complete:
            out[kind] = {"report": body.get("pooled"), **{w: pooled_of(e) for w, e in errs_by_window.items()}}
    return out


def print_spliced(doc: dict) -> None:
    """The report's pooled medians per fold kind, the inference-perf stages at each window."""
    print("\npooled held-out |error| (signed) %, the report's silicon errors kept, its inference-perf stages at "
          "each window\n| fold kind | window | " + " | ".join(t for _, t in METRICS) + " |")
    print("|---" * (len(METRICS) + 2) + "|")
    for kind, by_window in doc.items():
        for w, pooled in by_window.items():
            if w == "report" or pooled is None:
                continue
            print(f"| {kind} | {w} | " + " | ".join(pooled_cell(pooled, m) for m, _ in METRICS) + " |")


def print_variant(variant: str, doc: dict, windows: list[float | None]) -> None:
    """Per stage the signed errors at each window, then the pooled median |error| (signed)."""
    names = [m for m, _ in METRICS]
    heads = " | ".join(f"{t} " + "/".join(label(w) for w in windows) for _, t in METRICS)
    print(f"\n{variant}: signed error (predicted / measured - 1, %) per window\n| stage | {heads} |")
    print("|---" * (len(names) + 1) + "|")
    for name in doc["cases"]:
        cells = []
        for m in names:
            vals = [doc["errors"][label(w)][name].get(m) for w in windows]
            cells.append(" / ".join("-" if v is None else f"{100 * v:+.1f}" for v in vals))
        print(f"| {name} | " + " | ".join(cells) + " |")
    for w in windows:
        pooled = doc["pooled"][label(w)]
        print(f"| pooled, {label(w)} ({len(doc['cases'])}) | " + " | ".join(pooled_cell(pooled, m) for m in names)
              + " |")


if __name__ == "__main__":
    run_script(main)
