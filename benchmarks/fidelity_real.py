"""The twin against real vLLM measurements (../shared/ground-truth): held-out figures by source, GPU and model
family (``twin.fitting.joint``).

Sources: the inference-perf runs on one H100 and the vLLM silicon rows (H100/B200) the twin can run today
(the others are counted with their reasons). For each fold kind (leave-one-source-out, leave-one-GPU-out,
leave-one-model-family-out) it fits the cost parameters on all but one group and predicts that group; it prints,
per held-out group and pooled, the median |error| and the median signed error of TTFT mean / p50, TPOT, E2E mean
and throughput, beside the embedded defaults' errors on the same cases, and each fold's parameters with one
standard error and whether the training data identify them.

    python benchmarks/fidelity_real.py [--workers 1] [--silicon-every 1] [--silicon-max-requests N]
        [--fit-sim-s 60] [--eval-sim-s 120] [--outer 2] [--folds source,GPU,family] [--json out.json]

``--silicon-every N`` keeps every N-th runnable silicon row (a bounded subset); ``--silicon-max-requests``
caps the requests simulated per silicon row (never under 3 x its concurrency); inference-perf runs simulate
their first ``--fit-sim-s`` seconds in the fit and ``--eval-sim-s`` in the predictions.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import (FOLDS, JOINT_NAMES, METRICS, all_cases, default_start, errors,  # noqa: E402
                                parameter_table, run_fold, summarize)
from twin.fitting.parameters import PARAMETERS_BY_NAME  # noqa: E402
from twin.fitting.silicon import silicon_cases  # noqa: E402
from twin.hardware.catalog import resolve_model  # noqa: E402

TARGETS = {"mean_ttft_ms": 0.10, "median_ttft_ms": 0.10, "mean_tpot_ms": 0.08, "mean_e2el_ms": 0.08,
           "request_throughput": 0.03}


def _cells(summary: dict) -> str:
    out = []
    for key, _ in METRICS:
        s = summary[key]
        out.append(f"{100 * s['abs']:5.1f}% {100 * s['signed']:+6.1f}%" if s["abs"] is not None else f"{'-':>14}")
    return " | ".join(out)


def _header(first: str) -> str:
    return f"{first:<34} {'n':>4} | " + " | ".join(f"{t:>14}" for _, t in METRICS)


def _case_record(case, predicted: dict) -> dict:
    """One case's attributes (for slicing the errors: GPU, family, format, layout, lengths, load) and its
    signed errors at the predicted metrics."""
    rec = {"name": case.run.name, "source": FOLDS["source"](case), "gpu": FOLDS["GPU"](case),
           "family": FOLDS["family"](case), "moe": resolve_model(case.target.model).is_moe,
           "errors": errors(case, predicted),
           "measured": {k: case.run.metrics.get(k) for k, _ in METRICS}, "predicted": dict(predicted)}
    row = getattr(case, "row", None)
    if row is not None:
        rec.update(model=row.model_path, version=row.vllm_version, gemm_quant=row.gemm_quant,
                   moe_quant=row.moe_quant, isl=row.isl, osl=row.osl, conc=row.concurrency, tp=row.tp,
                   ep=row.moe_ep, dp=row.attention_dp, client=row.published_client, system=row.system)
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--silicon-every", type=int, default=1)
    ap.add_argument("--silicon-max-requests", type=int, default=None)
    ap.add_argument("--fit-sim-s", type=float, default=60.0)
    ap.add_argument("--eval-sim-s", type=float, default=120.0)
    ap.add_argument("--outer", type=int, default=2, help="fit rounds (simulate, fit on the surrogate)")
    ap.add_argument("--folds", default="source,GPU,family")
    ap.add_argument("--defaults-only", action="store_true",
                    help="no folds: the embedded defaults' errors by source, GPU and family (all in-sample for "
                         "the inference-perf runs, which they were fitted on)")
    ap.add_argument("--add-terms", default="", help="comma-separated parameters to fit besides JOINT_NAMES "
                    "(e.g. per_token_overhead_s)")
    ap.add_argument("--drop-terms", default="", help="comma-separated JOINT_NAMES to hold at their defaults")
    ap.add_argument("--terms", default="", help="comma-separated parameters to fit, instead of JOINT_NAMES "
                    "(every other one held at its embedded default), e.g. the scoped terms only")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    drop = {t.strip() for t in args.drop_terms.split(",") if t.strip()}
    base = tuple(t.strip() for t in args.terms.split(",") if t.strip()) or JOINT_NAMES
    names = tuple(n for n in base if n not in drop) + tuple(
        t.strip() for t in args.add_terms.split(",") if t.strip() and t.strip() not in base)
    unknown = [n for n in names + tuple(drop) if n not in PARAMETERS_BY_NAME]
    if unknown:
        raise SystemExit(f"--add-terms/--drop-terms: unknown parameter {unknown[0]!r}; allowed: "
                         + ", ".join(PARAMETERS_BY_NAME))
    _, skipped = silicon_cases(args.ground_truth, max_requests=args.silicon_max_requests)
    cases = all_cases(args.ground_truth, silicon_max_requests=args.silicon_max_requests,
                      silicon_every=args.silicon_every)
    reasons = collections.Counter(r.split(" (")[0] for _, r in skipped)
    print(f"{len(cases)} cases: " + ", ".join(f"{k} {v}" for k, v in collections.Counter(
        FOLDS['source'](c) for c in cases).items()) + f" (silicon every {args.silicon_every}); silicon rows the "
          f"twin cannot run: {len(skipped)} (" + ", ".join(f"{k} {v}" for k, v in reasons.items()) + ")")
    start = default_start(names)
    print("simulating every case at the embedded defaults ...", flush=True)
    first = simulate_cases(cases, start, max_sim_s=args.fit_sim_s, workers=args.workers)
    # a closed loop (a silicon row) is simulated whole either way: its fit simulation is its prediction
    open_loop = [i for i, c in enumerate(cases) if not c.run.closed_loop]
    default_pred = [r.metrics for r in first]
    for i, r in zip(open_loop, simulate_cases([cases[i] for i in open_loop], start, max_sim_s=args.eval_sim_s,
                                              workers=args.workers)):
        default_pred[i] = r.metrics
    default_by_name = {c.run.name: p for c, p in zip(cases, default_pred)}
    print(f"  ({time.perf_counter() - t0:.0f} s)", flush=True)

    report: dict = {"args": vars(args) | {"ground_truth": str(args.ground_truth)}, "folds": {}}
    if args.defaults_only:
        pairs = list(zip(cases, default_pred))
        for kind, group_of in FOLDS.items():
            print(f"\n== embedded defaults by {kind}")
            print(_header(kind))
            for g in dict.fromkeys(group_of(c) for c in cases):
                part = [(c, p) for c, p in pairs if group_of(c) == g]
                print(f"{g[:34]:<34} {len(part):4d} | {_cells(summarize(part))}")
                report["folds"].setdefault(kind, {})[g] = summarize(part)
        for label, moe in (("dense models", False), ("MoE models", True)):
            part = [(c, p) for c, p in pairs if resolve_model(c.target.model).is_moe == moe]
            print(f"{label:<34} {len(part):4d} | {_cells(summarize(part))}")
        print(f"{'all':<34} {len(pairs):4d} | {_cells(summarize(pairs))}")
        print(f"\n({time.perf_counter() - t0:.0f} s)")
        report["cases"] = [_case_record(c, p) for c, p in pairs]
        if args.json:
            args.json.write_text(json.dumps(report, indent=1, default=str))
        return
    print("\nmedian |error| and median signed error (predicted / measured - 1) on held-out cases; "
          "'defaults' = the embedded defaults on the same cases")
    for kind in [k.strip() for k in args.folds.split(",") if k.strip()]:
        group_of = FOLDS[kind]
        groups = list(dict.fromkeys(group_of(c) for c in cases))
        if len(groups) < 2:
            print(f"\nleave-one-{kind}-out: only one {kind} in the data; skipped")
            continue
        print(f"\n== leave-one-{kind}-out")
        print(_header("held out"))
        pooled, pooled_default, fold_docs = [], [], []
        for g in groups:
            fold = run_fold(kind, g, cases, group_of, first, names=names, outer_iterations=args.outer,
                            fit_sim_s=args.fit_sim_s, eval_sim_s=args.eval_sim_s, workers=args.workers)
            pairs = list(zip(fold.cases, fold.predicted))
            dpairs = [(c, default_by_name[c.run.name]) for c in fold.cases]
            pooled += pairs
            pooled_default += dpairs
            print(f"{g[:34]:<34} {len(pairs):4d} | {_cells(summarize(pairs))}")
            print(f"{'  defaults':<34} {'':4} | {_cells(summarize(dpairs))}", flush=True)
            fold_docs.append({"held_out": g, "params": fold.params, "std": fold.std,
                              "identification": fold.identification, "summary": summarize(pairs),
                              "default_summary": summarize(dpairs),
                              "errors": {c.run.name: errors(c, p) for c, p in pairs}})
            for name, value, sd, status in parameter_table(fold):
                print(f"      {name:30s} {value:>34s} +/- {sd:<8s} {status}")
        total = summarize(pooled)
        print(f"{'all held out':<34} {len(pooled):4d} | {_cells(total)}")
        print(f"{'  defaults':<34} {'':4} | {_cells(summarize(pooled_default))}")
        for label, moe in (("dense models", False), ("MoE models", True)):
            part = [(c, p) for c, p in pooled if resolve_model(c.target.model).is_moe == moe]
            if part:
                print(f"{label:<34} {len(part):4d} | {_cells(summarize(part))}")
                report.setdefault("moe_vs_dense", {}).setdefault(kind, {})[label] = summarize(part)
        misses = [t for k, t in METRICS if total[k]["abs"] is not None and (
            total[k]["abs"] > TARGETS[k] or abs(total[k]["signed"]) > 0.05)]
        print("  targets (|err| <= 10% TTFT, 8% TPOT/E2E, 3% throughput; |signed| <= 5%): "
              + ("met" if not misses else "missed on " + ", ".join(misses)))
        report["folds"][kind] = {"pooled": total, "pooled_default": summarize(pooled_default), "folds": fold_docs}
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
