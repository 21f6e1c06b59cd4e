"""What one draw of an inference-perf stage's fit window gives (round 23, issue 33): every stage simulated over the
folds' fit window (``REFIT_FIT_SIM_S``, 30 s) at the embedded defaults, once per seed; per stage the signed error
of its mean TTFT, p90 TTFT, median TTFT and TPOT against the whole stage's measurement, per seed, and the range over
seeds. A stage whose mean TTFT swings by tens of points between draws is the term the fold fits trade against the
per-sequence time (docs/fidelity.md "Round 23: a seed-robust fit for the GPU and family folds").

    python benchmarks/stage_window_draws.py --seeds 0,1,2,1000004,2000005 [--window-s 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, positive_float, positive_int  # noqa: E402
from benchmarks.fidelity_real import FOLD_TERMS, REFIT_FIT_SIM_S, REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.seed_scatter import _seeds  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import all_cases, default_start  # noqa: E402

KEYS = ("mean_ttft_ms", "p90_ttft_ms", "median_ttft_ms", "mean_tpot_ms")


def stage_errors(cases, results_by_seed: dict[int, list]) -> list[dict]:
    """Per stage: its name, whether it queued, and per metric the signed errors per seed and their range."""
    out = []
    for i, c in enumerate(cases):
        row = {"name": c.run.name, "queueing": c.run.queueing, "errors": {}}
        for key in KEYS:
            meas = c.run.metrics.get(key)
            errs = {s: r[i].metrics[key] / meas - 1 for s, r in results_by_seed.items()
                    if meas and r[i].metrics.get(key) is not None}
            row["errors"][key] = {"by_seed": errs, "range": (max(errs.values()) - min(errs.values())) if errs else None}
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--window-s", type=positive_float, default=REFIT_FIT_SIM_S)
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    check_out_path(args.json, "--json")
    seeds = _seeds(args.seeds)
    stages = [c for c in all_cases(args.ground_truth, silicon_every=REFIT_SILICON_EVERY) if not c.run.closed_loop]
    start = default_start(FOLD_TERMS)
    results = {s: simulate_cases(stages, start, seed=s, max_sim_s=args.window_s, workers=args.workers) for s in seeds}
    rows = stage_errors(stages, results)
    print(f"signed error (%) over the first {args.window_s:g} s, at the embedded defaults: mean TTFT / TPOT per seed")
    print(f"{'stage':52s} " + " ".join(f"{'seed ' + str(s):>16s}" for s in seeds) + "  mean TTFT range")
    for r in rows:
        e = r["errors"]
        cells = " ".join(f"{100 * e['mean_ttft_ms']['by_seed'][s]:+7.1f}/{100 * e['mean_tpot_ms']['by_seed'][s]:+6.1f}"
                         for s in seeds)
        print(f"{r['name'][:52]:52s} {cells}  {100 * e['mean_ttft_ms']['range']:6.1f} pp"
              + ("  (queued)" if r["queueing"] else ""))
    if args.json:
        args.json.write_text(json.dumps({"window_s": args.window_s, "seeds": seeds, "stages": rows}, indent=1))


if __name__ == "__main__":
    run_script(main)
