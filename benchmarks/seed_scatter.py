"""The twin's own seed scatter on the inference-perf stages (round 20, issue 33): each stage predicted whole at
the embedded defaults with several seeds (the arrival, length and request-path draws), per arrival draw
(``unscaled``: exponential gaps at the rate; ``scaled``: inference-perf's constant load, the gaps scaled to the
stage's span). Prints per stage the signed error of each metric per seed and its spread, and per seed the pooled
median |error| and signed error: the twin's noise floor beside the measurement's (benchmarks/repeat_scatter.py).

    python benchmarks/seed_scatter.py --seeds 0,1,2,3,4 --sends unscaled,scaled --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, number_list, positive_int  # noqa: E402
from benchmarks.error_medians import metric_medians  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import SOURCE_INFERENCE_PERF, all_cases, default_start, errors  # noqa: E402
from twin.fitting.scaled_sends import SENDS, with_sends  # noqa: E402
from twin.fitting.targets import METRICS  # noqa: E402

KEYS = tuple(k for k, _ in METRICS)


def spread(values: list[float]) -> dict[str, float]:
    """Range (max - min) and sample standard deviation of one stage's errors over seeds (fractions)."""
    return {"range": max(values) - min(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


def pooled(per_case: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per metric: median |error| and median signed error over the cases (fractions; ``error_medians``)."""
    medians = metric_medians(list(per_case.values()), KEYS)
    return {key: {"abs": m[0], "signed": m[1]} for key, m in medians.items() if m is not None}


def scatter_table(runs: dict[int, dict[str, dict[str, float]]]) -> dict[str, dict[str, dict[str, float]]]:
    """{case: {metric: spread over seeds}} from {seed: {case: {metric: error}}}."""
    seeds = sorted(runs)
    cases = list(runs[seeds[0]])
    return {c: {k: spread([runs[s][c][k] for s in seeds]) for k in KEYS if all(k in runs[s][c] for s in seeds)}
            for c in cases}


def _seeds(text: str) -> list[int]:
    seeds = number_list(text, "--seeds", whole=True, low=0)
    if len(set(seeds)) != len(seeds):
        raise TwinInputError(f"--seeds {text!r}: a seed given twice")
    return seeds


def _sends(text: str) -> list[str]:
    out = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in out if t not in SENDS[1:]]
    if not out or bad or len(set(out)) != len(out):
        raise TwinInputError(f"--sends {text!r}: give distinct values from {', '.join(SENDS[1:])}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--sends", default="unscaled,scaled", help="comma-separated arrival draws: unscaled, scaled")
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    check_out_path(args.json, "--json")
    seeds, draws = _seeds(args.seeds), _sends(args.sends)
    base = all_cases(args.ground_truth, sources=(SOURCE_INFERENCE_PERF,))
    params = default_start(())
    report: dict = {"seeds": seeds, "errors": {}}
    t0 = time.perf_counter()
    for draw in draws:
        cases = with_sends(base, draw)
        runs = {}
        for s in seeds:
            sims = simulate_cases(cases, params, seed=s, max_sim_s=None, workers=args.workers)
            runs[s] = {c.run.name: errors(c, r.metrics) for c, r in zip(cases, sims)}
            p = pooled(runs[s])
            print(f"{draw:8s} seed {s}: " + "  ".join(f"{k} {100 * v['abs']:.1f}/{100 * v['signed']:+.1f}"
                                                        for k, v in p.items()) + f"  ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
        report["errors"][draw] = {str(s): r for s, r in runs.items()}
        table = scatter_table(runs)
        print(f"\n{draw}: per stage, signed error range over seeds (pp) for " + ", ".join(KEYS))
        for c, row in table.items():
            print(f"  {c[:52]:<52} " + " ".join(f"{100 * row[k]['range']:5.1f}" if k in row else "    -" for k in KEYS))
        print(f"  {'median over stages':<52} " + " ".join(
            f"{100 * statistics.median(row[k]['range'] for row in table.values() if k in row):5.1f}" for k in KEYS))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    run_script(main)
