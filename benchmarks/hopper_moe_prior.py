"""A held-out Hopper MoE expert path's per-token prompt cost (issue 33, round 10; docs/fidelity.md "Round 10: MoE
prompt time on Hopper held out"): what ``twin.fitting.path_token_prior`` changes in a held-out report's folds,
without refitting them.

    python benchmarks/hopper_moe_prior.py REPORT.json [--folds family,GPU] [--bench-ms X]

REPORT.json: a ``fidelity_real.py --json`` report made WITHOUT the prior (its folds' fitted parameters and per-case
errors). The prior acts on held-out Hopper MoE paths only, and no fold trains on a row of a path it holds out (the
path's evidence IS its rows), so a fold's fit is the same with and without it: each held-out case the prior covers
is simulated again at the fold's reported parameters plus the prior (the silicon rows whole, the inference-perf
runs' first 60 s, as the report predicts them); every other case keeps its reported error. ``--bench-ms``: also
hold ``request_path_s@client_vllm_bench`` at X ms in the re-simulated cases (a what-if, not a fold's fit).
Prints, per fold and pooled over each kind, median |error| (signed) of TTFT mean and TPOT, before -> after."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.cli_checks import nonneg_float  # noqa: E402
from benchmarks.fold_report import load_report  # noqa: E402
from benchmarks.error_medians import median_cell  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

KEYS = ("mean_ttft_ms", "mean_tpot_ms")


def _cell(errs: list[dict], key: str) -> str:
    return median_cell([e[key] for e in errs if key in e], "%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--ground-truth", type=Path,
                    default=Path(__file__).resolve().parents[2] / "shared" / "ground-truth")
    ap.add_argument("--folds", default="family,GPU")
    ap.add_argument("--bench-ms", type=nonneg_float, default=None)
    args = ap.parse_args()
    if any(k.strip() not in ("source", "GPU", "family") for k in args.folds.split(",") if k.strip()):
        raise TwinInputError(f"--folds {args.folds!r}: each one of source, GPU, family")
    from fidelity_real import FOLD_TERMS

    from twin.fitting import provenance as pv
    from twin.fitting.fit import simulate_cases
    from twin.fitting.identify import held_at_prior
    from twin.fitting.joint import FOLDS, all_cases, errors, with_deployments
    from twin.fitting.path_token_prior import path_token_prior
    from twin.fitting.scoped import in_scope, split
    report = load_report(args.report)
    made_with = report.data.get("args")
    if not isinstance(made_with, dict):
        raise TwinInputError(f"{args.report}: no args object (the fidelity_real.py options it was made with)")
    every = made_with.get("silicon_every") or 16
    if not isinstance(every, int) or isinstance(every, bool) or every < 1:
        raise TwinInputError(f"{args.report}: args.silicon_every is {every!r}, not a positive integer")
    cases = all_cases(args.ground_truth, silicon_every=every)
    evidence = with_deployments(all_cases(args.ground_truth))
    by_name = {c.run.name: (c, d) for c, d in with_deployments(cases)}
    for kind in [k.strip() for k in args.folds.split(",") if k.strip()]:
        pooled_before, pooled_after = [], []
        print(f"\n== {kind}: held out | n | TTFT mean before -> after | TPOT before -> after | prior")
        for fold in report.folds(kind):
            group = fold["held_out"]
            train = [c for c in cases if FOLDS[kind](c) != group]
            held = held_at_prior(train, FOLD_TERMS)
            plan = pv.fold_plan(group, FOLDS[kind], evidence, tuple(n for n in FOLD_TERMS if n not in held))
            prior = path_token_prior(plan, group, FOLDS[kind], evidence)
            before = report.errors(fold, metrics=("mean_tpot_ms",))
            after = dict(before)
            covered = [n for n in before if any(in_scope(split(k)[1], by_name[n][1]) for k in prior)]
            if covered:
                params = report.params(fold) | prior
                if args.bench_ms is not None:
                    params["request_path_s@client_vllm_bench"] = args.bench_ms * 1e-3
                runs = [by_name[n][0] for n in covered]
                for n, r in zip(covered, simulate_cases(runs, params, max_sim_s=60.0, workers=1)):
                    after[n] = errors(by_name[n][0], r.metrics)
                    print(f"    {n[:78]:78s} TTFT {100 * before[n].get('mean_ttft_ms', float('nan')):+6.1f} -> "
                          f"{100 * after[n].get('mean_ttft_ms', float('nan')):+6.1f} %  TPOT "
                          f"{100 * before[n]['mean_tpot_ms']:+6.1f} -> {100 * after[n]['mean_tpot_ms']:+6.1f} %")
            pooled_before += before.values()
            pooled_after += after.values()
            print(f"  {group:14s} {len(before):3d} | {_cell(list(before.values()), KEYS[0])} -> "
                  f"{_cell(list(after.values()), KEYS[0])} | {_cell(list(before.values()), KEYS[1])} -> "
                  f"{_cell(list(after.values()), KEYS[1])} | "
                  + (", ".join(f"{k} {v * 1e6:.4g} us" if split(k)[0].endswith("_s") else f"{k} {v:g}"
                               for k, v in prior.items()) or "none"))
        print(f"  {'all held out':14s} {len(pooled_before):3d} | {_cell(pooled_before, KEYS[0])} -> "
              f"{_cell(pooled_after, KEYS[0])} | {_cell(pooled_before, KEYS[1])} -> {_cell(pooled_after, KEYS[1])}")


if __name__ == "__main__":
    run_script(main)
