"""What the fitted bench-client path stands in for, by family (issue 33, round 16; docs/fidelity.md "Round 16: gpt-oss
held out by family"). A reading, no fit of the twin: every fold fits ``request_path_s@client_vllm_bench`` at 11-19
ms (the gpt-oss fold 15.2 ms) where the embedded defaults carry 4.8 ms, and gpt-oss's held-out H100 TTFT is too slow
by about that difference. The light-load 1k-prompt silicon rows (CONC <= 8, ISL 1,024: TTFT is the request path
plus one prompt step) are simulated at a fold's values with the bench path at ``--bench-ms``; the TTFT the twin
misses per row (measured - predicted, ms) is then the per-request time the fitted path has to carry for that
row's family. If it were one time per request it would be the same for every family; if it grows with the model's
decoder layers (host time per layer per request), a 36-layer model pays less of it than the 60-80-layer models
that set the fit.

    python benchmarks/gptoss_bench_path_reading.py REPORT.json [--kind family --group gpt-oss] [--bench-ms 4.8]
        [--every 4]

Prints, per family and GPU, the rows, decoder layers and the median missed TTFT, and the least squares
missed = a + b x layers over the rows.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import finite_float, positive_int  # noqa: E402
from benchmarks.gptoss_ttft_terms import fold_of  # noqa: E402
from benchmarks.line_fit import line_fit  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

BENCH = "request_path_s@client_vllm_bench"
LIGHT_CONC, PROMPT_TOKENS = 8, 1024


def per_layer_split(points: list[tuple[int, float]]) -> tuple[float, float, float]:
    """(a, b, rms) of missed = a + b x layers by least squares over ``points`` ((layers, missed)); needs two depths."""
    if len({layers for layers, _ in points}) < 2:
        raise TwinInputError("the rows have one depth: a per-layer part is not identified")
    return line_fit([(float(layers), missed) for layers, missed in points])


def main() -> None:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import all_cases, family_of, gpu_of
    from twin.fitting.replay import deployment_for
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("--kind", default="family", choices=("source", "GPU", "family"))
    ap.add_argument("--group", default="gpt-oss")
    ap.add_argument("--bench-ms", type=finite_float, default=4.8)
    ap.add_argument("--every", type=positive_int, default=4)
    ap.add_argument("--ground-truth", type=Path, default=None)
    args = ap.parse_args()
    if args.every < 1 or args.bench_ms < 0:
        raise TwinInputError("--every must be >= 1 and --bench-ms >= 0")
    params = dict(fold_of(args.report, args.kind, args.group)["params"]) | {BENCH: args.bench_ms * 1e-3}
    cases = [c for c in all_cases(args.ground_truth, silicon_every=args.every)
             if getattr(c, "row", None) is not None and c.row.mode == "agg" and c.row.concurrency <= LIGHT_CONC
             and c.row.isl == PROMPT_TOKENS and c.run.metrics.get("mean_ttft_ms")]
    runs = simulate_cases(cases, params, max_sim_s=60.0)
    by_group: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    points = []
    for c, r in zip(cases, runs):
        layers = deployment_for(c.run, c.target).model.num_hidden_layers
        missed = c.run.metrics["mean_ttft_ms"] - r.metrics["mean_ttft_ms"]
        by_group[(family_of(c), gpu_of(c), layers)].append(missed)
        points.append((layers, missed))
    print(f"{len(cases)} light-load 1k-prompt rows at the {args.kind} fold holding out {args.group}, bench path "
          f"{args.bench_ms} ms; missed TTFT = measured - twin (ms)")
    for (fam, gpu, layers), v in sorted(by_group.items()):
        print(f"  {fam:10s} {gpu:9s} {layers:3d} layers  n={len(v):3d}  median missed {statistics.median(v):+7.1f} ms"
              f"  ({statistics.median(v) / layers:+.3f} ms per layer)")
    a, b, rms = per_layer_split(points)
    print(f"missed = {a:+.2f} ms + {1e3 * b:+.1f} us x layers (rms {rms:.1f} ms over {len(points)} rows)")


if __name__ == "__main__":
    run_script(main)
