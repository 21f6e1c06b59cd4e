"""The twin against real vLLM measurements (../shared/ground-truth: inference-perf on an H100 SXM).

For every run (one stage of an experiment) it prints measured vs predicted TTFT mean/p50/p99, TPOT, E2E mean/p99
and throughput under three parameter sets:
  * default  - the embedded defaults (what `twin run` uses with no calibration; fitted on these same runs,
               so in-sample),
  * LOEO     - leave-one-experiment-out: parameters fitted on the other experiments,
  * LOMO     - leave-one-model-out: fitted on the other three models (a different model size: the what-if),
and the median |error| of each metric under each. Runs with client timeouts (the reasoning experiments) are
listed and left out. Fits simulate --fit-sim-s of each run per round; predictions simulate --eval-sim-s.

    python benchmarks/fidelity_real.py [--workers 2] [--fit-sim-s 60] [--eval-sim-s 300] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.fitting.fit import identifiable_parameters, simulate_cases  # noqa: E402
from twin.fitting.ground_truth import ground_truth_dir, h100_cases  # noqa: E402
from twin.fitting.holdout import by_experiment, by_model, leave_one_group_out  # noqa: E402

METRICS = (("mean_ttft_ms", "TTFT mean"), ("median_ttft_ms", "TTFT p50"), ("p99_ttft_ms", "TTFT p99"),
           ("mean_tpot_ms", "TPOT"), ("mean_e2el_ms", "E2E mean"), ("p99_e2el_ms", "E2E p99"),
           ("request_throughput", "throughput"))


def _err(pred: dict, meas: dict, key: str) -> float | None:
    if key not in meas or not meas[key] or pred.get(key) is None:
        return None
    return pred[key] / meas[key] - 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None, help="folder holding h100-vllm-inference-perf/")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fit-sim-s", type=float, default=60.0)
    ap.add_argument("--eval-sim-s", type=float, default=300.0)
    ap.add_argument("--skip", choices=("loeo", "lomo"), action="append", default=[])
    ap.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = ap.parse_args()
    t0 = time.perf_counter()
    cases, aside = h100_cases(args.ground_truth or ground_truth_dir())
    print(f"{len(cases)} runs of {len({c.run.group for c in cases})} experiments; set aside for client timeouts: "
          + ", ".join(f"{r.name} ({int(r.metrics['failed'])}/{r.num_requests} failed)" for r in aside))
    predictions: dict[str, list[dict]] = {}
    params: dict[str, object] = {}
    predictions["default"] = [r.metrics for r in simulate_cases(cases, {}, max_sim_s=args.eval_sim_s,
                                                               workers=args.workers)]
    for label, group_of in (("LOEO", by_experiment), ("LOMO", by_model)):
        if label.lower() in args.skip:
            continue
        folds = leave_one_group_out(cases, group_of, names=identifiable_parameters(cases), max_sim_s=args.fit_sim_s,
                                    eval_sim_s=args.eval_sim_s, workers=args.workers,
                                    progress=lambda g: print(f"  {label} fold done: {g}", flush=True))
        by_name = {c.run.name: p for f in folds for c, p in zip(f.cases, f.predicted)}
        predictions[label] = [by_name[c.run.name] for c in cases]
        params[label] = {f.held_out: f.params for f in folds}

    labels = list(predictions)
    print(f"\n{'run':<44} {'metric':<10} {'measured':>10} " + " ".join(f"{lab:>15}" for lab in labels))
    errors: dict[str, dict[str, list[float]]] = {lab: {k: [] for k, _ in METRICS} for lab in labels}
    rows = []
    for i, case in enumerate(cases):
        for key, title in METRICS:
            meas = case.run.metrics.get(key)
            if meas is None:
                continue
            cells = []
            for lab in labels:
                pred = predictions[lab][i].get(key)
                e = _err(predictions[lab][i], case.run.metrics, key)
                if e is not None:
                    errors[lab][key].append(e)
                cells.append(f"{pred:8.1f} {100 * e:+5.0f}%" if e is not None else f"{'-':>15}")
            print(f"{case.run.name[-44:]:<44} {title:<10} {meas:10.1f} " + " ".join(cells))
            rows.append({"run": case.run.name, "metric": key, "measured": meas,
                         **{lab: predictions[lab][i].get(key) for lab in labels}})
    print(f"\nmedian |error| over {len(cases)} runs")
    print(f"{'metric':<12}" + "".join(f"{lab:>10}" for lab in labels))
    summary = {}
    for key, title in METRICS:
        meds = {lab: statistics.median(abs(e) for e in errors[lab][key]) if errors[lab][key] else None
                for lab in labels}
        summary[key] = meds
        print(f"{title:<12}" + "".join(f"{100 * m:9.1f}%" if m is not None else f"{'-':>10}"
                                        for m in meds.values()))
    queueing = [i for i, c in enumerate(cases) if c.run.queueing]
    if queueing:
        print("runs that queued (simulated in full, not fitted): throughput error " + "; ".join(
            f"{cases[i].run.name}: " + ", ".join(
                f"{lab} {100 * _err(predictions[lab][i], cases[i].run.metrics, 'request_throughput'):+.1f}%"
                for lab in labels) for i in queueing))
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "rows": rows, "params": params,
                                         "set_aside": [r.name for r in aside]}, indent=1))


if __name__ == "__main__":
    main()
