"""The silicon rows labelled with attention data parallelism (``attention_dp_size`` > 1) at the embedded defaults:
measured against simulated mean TTFT and mean TPOT, per row and as signed medians per labelled layout.

These are the rows the twin used to run as TP x DP x EP servers of up to 16 GPUs; ``twin.fitting.silicon_layout``
now reads them as the servers the published benchmark scripts launched (``row_layout``; the label is kept in the
``labelled`` column). ``--as-labelled`` runs them as the labels read literally (the old mapping), for the
before/after comparison in docs/fidelity.md ("Round 3").

    python benchmarks/layout_rows.py [--as-labelled] [--max-requests 160] [--workers 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, positive_int  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import JOINT_NAMES, default_start, errors  # noqa: E402
from twin.fitting.silicon import read_silicon, row_layout, silicon_cases, silicon_dir  # noqa: E402
from twin.errors import run_script  # noqa: E402


def _layout_name(lay: dict) -> str:
    s = f"TP{lay['tensor_parallel_size']}"
    if lay["data_parallel_size"] > 1:
        s += f" DP{lay['data_parallel_size']}"
    if lay["enable_expert_parallel"]:
        s += " EP"
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--as-labelled", action="store_true", help="run the labels literally (the old mapping)")
    ap.add_argument("--max-requests", type=positive_int, default=160)
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    check_out_path(args.json, "--json")
    t0 = time.perf_counter()
    folder = silicon_dir(args.ground_truth)
    rows = [r for r in read_silicon(folder) if r.mode == "agg" and r.attention_dp > 1]
    cases, skipped = silicon_cases(args.ground_truth, max_requests=args.max_requests, rows=rows)
    if args.as_labelled:
        cases = [replace(c, target=replace(c.target, tensor_parallel_size=c.row.tp,
                                           data_parallel_size=c.row.attention_dp,
                                           enable_expert_parallel=c.row.moe_ep > 1)) for c in cases]
    print(f"{len(cases)} rows labelled attention DP > 1 ({len(skipped)} not runnable); "
          f"{'labels read literally' if args.as_labelled else 'as launched (row_layout)'}", flush=True)
    results = simulate_cases(cases, default_start(JOINT_NAMES), workers=args.workers)
    recs = []
    for c, r in zip(cases, results):
        row = c.row
        lay = {"tensor_parallel_size": c.target.tensor_parallel_size,
               "data_parallel_size": c.target.data_parallel_size,
               "enable_expert_parallel": c.target.enable_expert_parallel}
        e = errors(c, r.metrics)
        recs.append({"id": row.id, "model": row.model_path.split("/")[-1], "gpu": row.system, "isl": row.isl,
                     "osl": row.osl, "conc": row.concurrency,
                     "labelled": f"TP{row.tp} DP{row.attention_dp} EP{row.moe_ep}", "run_as": _layout_name(lay),
                     "measured_ttft_ms": row.ttft_ms, "measured_tpot_ms": row.tpot_ms,
                     "twin_ttft_ms": r.metrics.get("mean_ttft_ms"), "twin_tpot_ms": r.metrics.get("mean_tpot_ms"),
                     "ttft_err": e.get("mean_ttft_ms"), "tpot_err": e.get("mean_tpot_ms")})
    print(f"{'row':<58} {'run as':<10} {'TTFT meas':>9} {'twin':>8} {'err':>7} | {'TPOT meas':>9} {'twin':>7} "
          f"{'err':>7}")
    for x in recs:
        tt = f"{x['twin_ttft_ms']:8.0f}" if x["twin_ttft_ms"] is not None else "       -"
        te = f"{x['ttft_err']:+7.1%}" if x["ttft_err"] is not None else "      -"
        print(f"{x['id'][:58]:<58} {x['run_as']:<10} {x['measured_ttft_ms']:9.0f} {tt} {te} | "
              f"{x['measured_tpot_ms']:9.2f} {x['twin_tpot_ms']:7.2f} {x['tpot_err']:+7.1%}")
    print(f"\n{'labelled layout':<28} {'n':>4} | {'TTFT signed median':>18} {'TPOT signed median':>18}")
    groups: dict[str, list[dict]] = {}
    for x in recs:
        groups.setdefault(x["labelled"], []).append(x)
    groups["all"] = recs
    for g, xs in groups.items():
        tt = [x["ttft_err"] for x in xs if x["ttft_err"] is not None]
        tp = [x["tpot_err"] for x in xs if x["tpot_err"] is not None]
        print(f"{g:<28} {len(xs):4d} | {statistics.median(tt) if tt else float('nan'):+18.1%} "
              f"{statistics.median(tp) if tp else float('nan'):+18.1%}")
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json),
                                                               "ground_truth": str(args.ground_truth)},
                                         "rows": recs}, indent=1))


if __name__ == "__main__":
    run_script(main)
