"""Throughput of `twin sweep`'s backends: a 200-configuration grid of small, fast simulations.

The grid is ``server.max_num_seqs`` (25 values) x ``workload.arrivals.rate_per_s`` (8 values) on a constant
cost model, ~60 requests per simulation (a few tens of milliseconds each), so the figures show the backends'
overhead as much as their parallelism. For each backend (serial in this process, the local process pool,
a local Ray with the same number of CPUs) it prints the median wall time over ``--repeats`` runs and
configurations per second, and checks that every backend produced the same rows.

    python benchmarks/sweep_speed.py [--workers 2] [--repeats 3] [--no-ray]

Ray's start-up (``ray.init``, ~5 s) is timed separately and not counted in the sweep's wall time; the
process pool is created inside the timed region (as ``twin sweep`` does).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.plan.executor import SerialExecutor, make_executor  # noqa: E402
from twin.plan.sweep import SweepSpec, run_sweep  # noqa: E402

SCENARIO = {
    "name": "sweep-speed",
    "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
    "server": {"max_model_len": 2048, "num_gpu_blocks_override": 1024},
    "cost_model": {"kind": "constant", "params": {"step_s": 0.01, "per_token_s": 1e-5}},
    "workload": {"arrivals": {"process": "poisson", "rate_per_s": 10}, "num_requests": 60,
                 "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": {"uniform": [50, 200]}},
                              "output_tokens": {"uniform": [5, 30]}}]},
    "slo": {"ttft_ms": {"p99": 500}},
}
GRID = [("server.max_num_seqs", list(range(1, 26))),
        ("workload.arrivals.rate_per_s", [5, 10, 15, 20, 30, 40, 60, 80])]


def timed(make, repeats: int):
    spec = SweepSpec(SCENARIO, GRID)
    walls, rows = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        with make() as ex:
            rows = run_sweep(spec, ex)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=positive_int, default=2)
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    n = len(SweepSpec(SCENARIO, GRID).configs())
    print(f"{n} configurations, {args.workers} workers, median of {args.repeats} runs")
    results = {}
    wall, rows = timed(SerialExecutor, args.repeats)
    results["serial"] = rows
    print(f"  serial        {wall:7.2f} s  {n / wall:7.1f} configs/s")
    wall, rows = timed(lambda: make_executor("process", args.workers), args.repeats)
    results["process"] = rows
    print(f"  process pool  {wall:7.2f} s  {n / wall:7.1f} configs/s")
    if not args.no_ray:
        try:
            import ray
        except ImportError:
            print("  ray           (not installed: pip install 'ray>=2.9')")
        else:
            t0 = time.perf_counter()
            ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
            start = time.perf_counter() - t0
            try:
                wall, rows = timed(lambda: make_executor("ray"), args.repeats)
            finally:
                ray.shutdown()
            results["ray"] = rows
            print(f"  ray           {wall:7.2f} s  {n / wall:7.1f} configs/s   (ray.init {start:.1f} s, not counted)")
    same = len({json.dumps(r, sort_keys=True, default=str) for r in results.values()}) == 1
    print(f"  identical rows on every backend: {same}")


if __name__ == "__main__":
    main()
