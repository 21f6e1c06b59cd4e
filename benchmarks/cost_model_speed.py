"""Per-call time of the cost models' step_time_s (the simulator's hot path: ~500k calls per simulated hour).

Prints the median over several repeats of the mean per-call time, for batches of 1, 16, 64 and 256 sequences
with mixed contexts, all decoding ("decode") or with one 512-token prefill chunk among them ("mixed"), for the
roofline and constant models.

    python benchmarks/cost_model_speed.py [--calls 20000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.cost.constant import ConstantCostModel  # noqa: E402
from twin.cost.roofline import RooflineCostModel  # noqa: E402
from twin.core.scheduler_output import SchedulerOutput  # noqa: E402


def make_step(batch: int, rng: random.Random, mixed: bool) -> SchedulerOutput:
    new = [1] * batch
    computed = [rng.randint(50, 8000) for _ in range(batch)]
    if mixed:
        new[-1], computed[-1] = 512, 0          # one prefill chunk mixed into the decode batch
    return SchedulerOutput(step_index=0, num_new_tokens=new, num_computed_before=computed,
                           num_spec_tokens=[0] * batch)


def per_call_us(fn, step, calls: int, repeats: int) -> float:
    for _ in range(min(calls, 1000)):           # warm-up
        fn(step)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(step)
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=positive_int, default=20000)
    ap.add_argument("--repeats", type=positive_int, default=7)
    args = ap.parse_args()
    rng = random.Random(0)
    models = {
        "roofline llama-3.1-8b H100 tp1": RooflineCostModel("llama-3.1-8b", "H100-SXM"),
        "roofline llama-3.1-70b H100 tp4": RooflineCostModel("llama-3.1-70b", "H100-SXM", tensor_parallel_size=4),
        "constant": ConstantCostModel(0.005, 1e-5, 1e-5),
    }
    print(f"{'model':34s} {'kind':>6s} {'batch':>6s} {'us/call':>9s} {'step ms':>9s}")
    for name, cm in models.items():
        for mixed in (False, True):
            for batch in (1, 16, 64, 256):
                s = make_step(batch, rng, mixed)
                us = per_call_us(cm.step_time_s, s, args.calls, args.repeats)
                kind = "mixed" if mixed else "decode"
                print(f"{name:34s} {kind:>6s} {batch:6d} {us:9.2f} {cm.step_time_s(s) * 1e3:9.3f}")


if __name__ == "__main__":
    main()
