"""Refit the roofline's embedded serving defaults on the real vLLM runs (../shared/ground-truth).

Default (``--source inference-perf``): as twin/cost/roofline.py records them: every inference-perf H100 run that
did not queue, 60 s of each simulated per round, 3 rounds, the original eight parameters.
``--joint``: every source (``twin.fitting.joint``: inference-perf + the runnable silicon rows, weighted per
source), all joint terms, each reported with one standard error and whether the data identify it.

    python benchmarks/fit_defaults.py [--workers 2]
    python benchmarks/fit_defaults.py --joint [--silicon-every 1] [--silicon-max-requests N] [--outer 2]
        [--terms a,b,c]     (only these parameters free, every other one at its embedded default)

Prints each parameter with one standard error (the inference-perf fit: about 2-3 minutes on an idle 2-core
machine)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_float, positive_int  # noqa: E402
from twin.fitting.fit import fit, identifiable_parameters, simulate_cases  # noqa: E402
from twin.fitting.ground_truth import h100_cases  # noqa: E402
from twin.fitting.identify import held_at_prior, identification  # noqa: E402
from twin.fitting.joint import JOINT_NAMES, all_cases, default_start  # noqa: E402
from twin.fitting.parameters import PARAMETERS_BY_NAME  # noqa: E402
from twin.errors import run_script  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=positive_int, default=2)
    ap.add_argument("--joint", action="store_true")
    ap.add_argument("--silicon-every", type=positive_int, default=1)
    ap.add_argument("--silicon-max-requests", type=positive_int, default=None)
    ap.add_argument("--outer", type=positive_int, default=2)
    ap.add_argument("--terms", default="", help="comma-separated parameters to fit (default: JOINT_NAMES)")
    ap.add_argument("--fit-sim-s", type=positive_float, default=60.0)
    args = ap.parse_args()
    terms = tuple(t.strip() for t in args.terms.split(",") if t.strip()) or JOINT_NAMES
    unknown = [t for t in terms if t not in PARAMETERS_BY_NAME]
    if unknown:
        raise SystemExit(f"--terms: unknown parameter {unknown[0]!r}; allowed: " + ", ".join(PARAMETERS_BY_NAME))
    t0 = time.perf_counter()
    if not args.joint:
        cases, _ = h100_cases()
        res = fit(cases, names=identifiable_parameters(cases), outer_iterations=3, max_sim_s=60,
                  workers=args.workers)
        print(f"fitted on {len(res.cases)} runs in {time.perf_counter() - t0:.0f} s ({res.iterations} rounds)")
        for name, value in res.params.items():
            print(f"{name:24s} {value:.4g}  +/- {res.std.get(name, float('nan')):.2g}")
        return
    cases = all_cases(silicon_max_requests=args.silicon_max_requests, silicon_every=args.silicon_every)
    start = default_start(terms)
    held = held_at_prior(cases, terms)
    names = tuple(n for n in terms if n not in held)
    first = simulate_cases(cases, start, max_sim_s=args.fit_sim_s, workers=args.workers)
    res = fit(cases, names=names, start=start, priors=start, outer_iterations=args.outer, max_sim_s=args.fit_sim_s,
              workers=args.workers, first=first, final_simulation=False)
    print(f"joint fit on {len(res.cases)} cases in {time.perf_counter() - t0:.0f} s ({res.iterations} rounds)")
    status = identification(names, res.std, held, None, res.data_share)
    for name in terms:
        p = PARAMETERS_BY_NAME[name]
        if name in res.params and name in names:
            print(f"{name:30s} {p.from_model(res.params[name]):10.4g} {p.unit:40s} +/- "
                  f"{p.from_model(res.std.get(name, float('nan'))):.2g}  {status[name]}")
        else:
            print(f"{name:30s} {'-':>10s} {p.unit:40s}            {status[name]}")


if __name__ == "__main__":
    run_script(main)
