"""gpt-oss-120b silicon rows at the embedded defaults and at candidate fused all-reduce latencies on B200 (issue 33,
round 5): signed median error of TTFT mean, TPOT and throughput per GPU x TP x ISL/OSL, and a held-out choice of
the B200 fused all-reduce latency (the value is picked on the other ISL/OSL configurations, or the other TPs, and
judged on the one held out).

    python benchmarks/gptoss_slices.py --gpu B200 --every 2 --grid 9,10,11,12,13 --fp4-rate  # ~25 min shared

``--grid`` values are microseconds per fused all-reduce, applied to the B200 rows (the only fused gpt-oss rows the
value covers; ``twin.cost.mxfp4_path``); ``defaults`` is the embedded state of this checkout; ``--fp4-rate`` adds
the defaults with MXFP4 experts back at Blackwell's FP4 tensor rate (the FP8-rate fact's A/B). Deterministic (one
seed); whole runs, the first 60 s of each as ``benchmarks/fidelity_real.py --eval-sim-s 60`` does.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import nonneg_int, number_list, positive_float, positive_int  # noqa: E402
from twin.cost import mxfp4_path  # noqa: E402
from twin.fitting.carried_patches import Patch, carried  # noqa: E402
from twin.fitting.fit import check_simulation_options, simulate_cases  # noqa: E402
from twin.fitting.joint import JOINT_NAMES, default_start, errors, family_of  # noqa: E402
from twin.fitting.silicon import silicon_cases  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.scoped import parse_scoped_set_options  # noqa: E402

FP8_RATE = mxfp4_path.MXFP4_BLACKWELL_RATE
KEYS = (("TTFT", "mean_ttft_ms"), ("TPOT", "mean_tpot_ms"), ("thr", "request_throughput"))


def med(xs: list[float]) -> str:
    return f"{100 * statistics.median(xs):+6.1f}%" if xs else f"{'-':>7}"


def slice_of(case) -> tuple[str, str, str]:
    r = case.row
    return r.system.split("_")[0].upper(), f"TP{r.tp}", f"{r.isl}/{r.osl}"


def table(cases, errs: dict[str, list[dict]], keyf, title: str) -> None:
    groups: dict = collections.defaultdict(list)
    for i, c in enumerate(cases):
        groups[keyf(c)].append(i)
    labels = list(errs)
    print(f"\n{title}: signed median TTFT / TPOT / throughput\n")
    print("| slice | n | " + " | ".join(labels) + " |")
    print("|---|---|" + "---|" * len(labels))
    for k, idx in sorted(groups.items()):
        cells = [" / ".join(med([errs[lb][i][m] for i in idx if m in errs[lb][i]]) for _, m in KEYS)
                 for lb in labels]
        print(f"| {' '.join(k) if isinstance(k, tuple) else k} | {len(idx)} | " + " | ".join(cells) + " |")


def held_out_choice(cases, errs: dict[str, list[dict]], labels: list[str], fold, metric: str, rows) -> None:
    """Per held-out group of the rows ``rows`` admits: the variant (of ``labels``) whose |median signed
    ``metric`` error| is least on the other groups, and the held-out group's error at it and at the defaults."""
    idx = [i for i, c in enumerate(cases) if rows(c)]
    groups = sorted({fold(cases[i]) for i in idx})
    print(f"\nheld out by {fold.__name__}, {metric}: variant picked on the others (|median signed error|)\n")
    print("| held out | n | picked on the others | held out, defaults | held out, picked |")
    print("|---|---|---|---|---|")
    for g in groups:
        test = [i for i in idx if fold(cases[i]) == g]
        train = [i for i in idx if fold(cases[i]) != g]
        best = min(labels, key=lambda lb: abs(statistics.median(errs[lb][i][metric] for i in train)))

        def cell(lb: str) -> str:
            xs = [errs[lb][i][metric] for i in test if metric in errs[lb][i]]
            return f"{100 * statistics.median(xs):+.1f}% (abs {100 * statistics.median(map(abs, xs)):.1f}%)"
        print(f"| {g} | {len(test)} | {best} | {cell('defaults')} | {cell(best)} |")


def config(case) -> str:
    return f"{case.row.isl}/{case.row.osl}"


def prompt(case) -> str:
    return f"ISL {case.row.isl}"


def tp(case) -> str:
    return f"TP{case.row.tp}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=positive_int, default=1, help="every k-th runnable gpt-oss row")
    ap.add_argument("--grid", default="", help="comma-separated fused all-reduce latencies on B200, us")
    ap.add_argument("--variant", action="append", default=[],
                    help="label:name=value,... (model units) on top of the defaults, "
                         "e.g. lt:layer_token_overhead_s@hopper=2e-7")
    ap.add_argument("--fp4-rate", action="store_true",
                    help="add a variant fp4rate: the defaults with MXFP4 experts at the FP4 rate (before round 5)")
    ap.add_argument("--gpu", default="", help="only this GPU's rows (B200 or H100-SXM)")
    ap.add_argument("--max-conc", type=nonneg_int, default=0, help="only rows with CONC up to this (0: all)")
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--eval-sim-s", type=positive_float, default=60.0)
    args = ap.parse_args()
    grid_us = number_list(args.grid, "--grid", low=0.0, allow_empty=True)
    extras = [(text.partition(":")[0], parse_scoped_set_options(text.partition(":")[2].split(","),
                                                                 f"--variant {text.partition(':')[0]}:"))
              for text in args.variant]
    check_simulation_options(args.eval_sim_s, args.workers, "--eval-sim-s")
    cases = [c for c in silicon_cases()[0] if family_of(c) == "gpt-oss"
             and (not args.gpu or c.target.gpu == args.gpu)
             and (not args.max_conc or c.row.concurrency <= args.max_conc)][::args.every]
    base = default_start(JOINT_NAMES)
    errs: dict[str, list[dict]] = {}
    variants = [("defaults", base)]
    for v, text in zip(grid_us, filter(None, (t.strip() for t in args.grid.split(",")))):
        variants.append((text, base | {"fused_allreduce_latency_s@blackwell": v * 1e-6}))
    for label, extra in extras:
        variants.append((label, base | extra))
    if args.fp4_rate:
        variants.append(("fp4rate", base))
    for label, params in variants:          # the rate for this variant's simulations only (restored after)
        with carried(Patch(mxfp4_path.__name__, "MXFP4_BLACKWELL_RATE", "fp4" if label == "fp4rate" else FP8_RATE)):
            preds = simulate_cases(cases, params, workers=args.workers, max_sim_s=args.eval_sim_s)
        errs[label] = [errors(c, r.metrics) for c, r in zip(cases, preds)]
    print(f"gpt-oss-120b silicon rows: {len(cases)} (every {args.every}th runnable row)")
    table(cases, errs, lambda c: slice_of(c)[0], "by GPU")
    table(cases, errs, lambda c: slice_of(c)[:2], "by GPU x TP")
    table(cases, errs, lambda c: (slice_of(c)[0], slice_of(c)[2]), "by GPU x ISL/OSL")
    grid = [v for v in filter(None, args.grid.split(","))]
    if len(grid) > 1:        # the B200 fused all-reduce latency, judged on TPOT of the fused (TP >= 2) rows
        b200_fused = lambda c: c.row.system == "b200_sxm" and c.row.tp > 1   # noqa: E731
        held_out_choice(cases, errs, grid, config, "mean_tpot_ms", b200_fused)
        held_out_choice(cases, errs, grid, tp, "mean_tpot_ms", b200_fused)
    labels = [t.partition(":")[0] for t in args.variant]
    if len(labels) > 1:      # other variants, judged on TTFT of the rows with a published client
        client = lambda c: c.row.published_client   # noqa: E731
        held_out_choice(cases, errs, labels, prompt, "mean_ttft_ms", client)
        held_out_choice(cases, errs, labels, tp, "mean_ttft_ms", client)


if __name__ == "__main__":
    run_script(main)
