"""Refit the roofline's embedded serving defaults on the real vLLM runs (../shared/ground-truth), as
twin/cost/roofline.py records them: every run that did not queue, 60 s of each simulated per round, 3 rounds.

    python benchmarks/fit_defaults.py [--workers 2]

Prints each parameter with one standard error (about 2-3 minutes on an idle 2-core machine)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.fitting.fit import fit, identifiable_parameters  # noqa: E402
from twin.fitting.ground_truth import h100_cases  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    cases, _ = h100_cases()
    t0 = time.perf_counter()
    res = fit(cases, names=identifiable_parameters(cases), outer_iterations=3, max_sim_s=60, workers=args.workers)
    print(f"fitted on {len(res.cases)} runs in {time.perf_counter() - t0:.0f} s ({res.iterations} rounds)")
    for name, value in res.params.items():
        print(f"{name:24s} {value:.4g}  +/- {res.std.get(name, float('nan')):.2g}")


if __name__ == "__main__":
    main()
