"""gpt-oss-120b H100 prompt steps (issue 33, round 6): the Marlin MXFP4 path's two values on a grid, each picked
on some rows and judged on the rest (by TP, by prompt length, by load), and the light-load gap table.

    python benchmarks/gptoss_h100_prefill.py --eff 0.3,0.35,0.4 --lt 0.1,0.15      # ~1 min per grid point, shared
    python benchmarks/gptoss_h100_prefill.py --eff 0.25,0.3 --lt 0,0.1,0.15,0.2 --no-padding   # without the blocks
    python benchmarks/gptoss_h100_prefill.py --ar 16,18,20,24.7 --metric tpot       # the fused all-reduce, on TPOT
    python benchmarks/gptoss_h100_prefill.py --gaps                                 # the defaults' gaps (ms), 1 min

Rows: the distinct gpt-oss-120b H100 v0.18.0 configurations at CONC <= 64 (``single_node/gptoss_fp4_h100.sh``,
``VLLM_MXFP4_USE_MARLIN=1``; rows listed twice in the ground truth's CSVs are simulated once). Grid values:
``moe_expert_compute_efficiency@hopper+experts_mxfp4`` (fraction of the dense bf16 GEMMs' rate) and
``layer_token_overhead_s@hopper+experts_mxfp4`` (us per token per decoder layer); each on top of this checkout's
embedded defaults (so ``defaults`` is whatever is embedded now). A fold picks the grid point with the least median
|log(predicted / measured)| mean TTFT (``--metric tpot``: the least |median log ratio| of TPOT) on its training
rows and reports the held-out rows' signed median (median |error|) of TTFT and TPOT, at the defaults and at the
pick. Whole runs, the first 60 s as fidelity_real does.
``--no-padding`` takes Marlin's padded token blocks (``twin.cost.marlin_blocks``) out; ``--ar`` grids the path's
fused all-reduce latency (us) at the embedded efficiency and per-token values, judged with ``--metric tpot``
(folds by request shape and TP).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from contextlib import nullcontext
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.cost import marlin_blocks  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import JOINT_NAMES, default_start  # noqa: E402
from twin.fitting.silicon import gptoss_h100_v0180, silicon_cases  # noqa: E402

EFF = "moe_expert_compute_efficiency@hopper+experts_mxfp4"
LT = "layer_token_overhead_s@hopper+experts_mxfp4"
AR = "fused_allreduce_latency_s@hopper+experts_mxfp4"
FOLDS = {"TP": lambda r: f"TP{r.tp}", "ISL": lambda r: f"ISL {r.isl}",
         "load": lambda r: "C <= 8" if r.concurrency <= 8 else "C >= 16", "shape": lambda r: f"{r.isl}/{r.osl}"}


def rows() -> list:
    seen, out = set(), []
    for c in silicon_cases()[0]:
        r = c.row
        key = (r.tp, r.isl, r.osl, r.concurrency, round(r.ttft_ms, 3))
        if gptoss_h100_v0180(r) and r.concurrency <= 64 and key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _err(case, pred: dict, metric: str) -> float:
    return pred[metric] / case.run.metrics[metric] - 1.0


def _cell(cases, preds, idx, metric: str) -> str:
    xs = [_err(cases[i], preds[i], metric) for i in idx]
    return f"{statistics.median(xs):+.1%} ({statistics.median(map(abs, xs)):.1%})"


def _loss(cases, preds, idx, metric: str = "mean_ttft_ms") -> float:
    """TTFT: the median |log ratio|; TPOT: |the median log ratio| (the least signed bias, as round 5 picked the
    B200 all-reduce)."""
    logs = [math.log(preds[i][metric] / cases[i].run.metrics[metric]) for i in idx]
    return abs(statistics.median(logs)) if metric == "mean_tpot_ms" else statistics.median(map(abs, logs))


def without_padding(on: bool):
    """With ``on``: Marlin's padded token blocks off (``twin.cost.marlin_blocks.MARLIN_PATHS`` empty) inside the
    block only; else nothing changes."""
    return mock.patch.object(marlin_blocks, "MARLIN_PATHS", set()) if on else nullcontext()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eff", default="", help="comma-separated expert compute efficiencies")
    ap.add_argument("--lt", default="", help="comma-separated us per token per layer")
    ap.add_argument("--ar", default="", help="comma-separated fused all-reduce latencies, us")
    ap.add_argument("--metric", choices=("ttft", "tpot"), default="ttft", help="what a fold picks on")
    ap.add_argument("--no-padding", action="store_true", help="without Marlin's padded token blocks")
    ap.add_argument("--gaps", action="store_true", help="per row: measured, predicted, gap (ms) at the defaults")
    args = ap.parse_args()
    with without_padding(args.no_padding):
        report(args)


def report(args) -> None:
    """The tables of ``main``'s options (``args``), at this process's Marlin paths."""
    metric = f"mean_{args.metric}_ms"
    cases = rows()
    base = default_start(JOINT_NAMES)
    variants = {"defaults": base}
    for e in filter(None, args.eff.split(",")):
        for b in filter(None, args.lt.split(",")):
            variants[f"{e} / {b} us"] = base | {EFF: float(e), LT: float(b) * 1e-6}
    for a in filter(None, args.ar.split(",")):
        variants[f"all-reduce {a} us"] = base | {AR: float(a) * 1e-6}
    preds = {k: [r.metrics for r in simulate_cases(cases, p, max_sim_s=60.0)] for k, p in variants.items()}
    print(f"gpt-oss-120b H100 v0.18.0 rows: {len(cases)} distinct, CONC <= 64")
    if args.gaps:
        print("\n| TP | ISL/OSL | CONC | TTFT measured | predicted | gap ms | TPOT measured | predicted |")
        print("|---|---|---|---|---|---|---|---|")
        for c, p in sorted(zip(cases, preds["defaults"]), key=lambda x: (x[0].row.tp, x[0].row.isl, x[0].row.osl,
                                                                         x[0].row.concurrency)):
            m, r = c.run.metrics, c.row
            print(f"| {r.tp} | {r.isl}/{r.osl} | {r.concurrency} | {m['mean_ttft_ms']:.1f} | {p['mean_ttft_ms']:.1f}"
                  f" | {m['mean_ttft_ms'] - p['mean_ttft_ms']:+.1f} | {m['mean_tpot_ms']:.2f} | {p['mean_tpot_ms']:.2f} |")
    everyone = list(range(len(cases)))
    print("\n| variant (efficiency / us per token per layer) | TTFT | TPOT | TTFT TP2 | TP4 | TP8 |")
    print("|---|---|---|---|---|---|")
    for k in sorted(preds, key=lambda k: _loss(cases, preds[k], everyone, metric)):
        by_tp = [_cell(cases, preds[k], [i for i in everyone if cases[i].row.tp == t], "mean_ttft_ms") for t in (2, 4, 8)]
        print(f"| {k} | {_cell(cases, preds[k], everyone, 'mean_ttft_ms')} | "
              f"{_cell(cases, preds[k], everyone, 'mean_tpot_ms')} | " + " | ".join(by_tp) + " |")
    grid = [k for k in preds if k != "defaults"]
    if len(grid) < 2:
        return
    for name, fold in FOLDS.items():
        if (name == "shape") != (args.metric == "tpot") and name != "TP":
            continue
        print(f"\nheld out by {name}: the grid point picked on the other rows\n")
        print("| held out | n | picked | TTFT defaults | TTFT picked | TPOT defaults | TPOT picked |")
        print("|---|---|---|---|---|---|---|")
        for g in sorted({fold(c.row) for c in cases}):
            test = [i for i in everyone if fold(cases[i].row) == g]
            train = [i for i in everyone if fold(cases[i].row) != g]
            best = min(grid, key=lambda k: _loss(cases, preds[k], train, metric))
            print(f"| {g} | {len(test)} | {best} | " + " | ".join(
                _cell(cases, preds[k], test, m) for m in ("mean_ttft_ms",) for k in ("defaults", best)) + " | "
                + " | ".join(_cell(cases, preds[k], test, "mean_tpot_ms") for k in ("defaults", best)) + " |")


if __name__ == "__main__":
    run_script(main)
