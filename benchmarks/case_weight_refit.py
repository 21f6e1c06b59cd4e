"""What the fit's case weights move when nothing is held out (issue 33, docs/fidelity.md "Round 19: the fit's case
weights"): the default report's fold terms fitted on every case (every n-th silicon row, the folds' training rows)
under each weighting of ``twin.fitting.case_weights``, by the folds' own machinery (``joint.run_fold`` with no
held-out group: the same priors, client path rule and settling), on one simulation of every case at the embedded
defaults (the weights change the fit, not the simulations). Prints each (source, family, GPU) cell's share of the
fit's weight under each rule, then each fitted term under each rule with one standard error.

    python benchmarks/case_weight_refit.py [--silicon-every 16] [--fit-sim-s 30] [--workers 1]

A reading: it says what an embedded-defaults refit on everything would move, and refits nothing embedded. One
simulation of 75 cases and a surrogate fit per weighting: 34 minutes on a busy 2-core machine (round 19)."""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_float, positive_int  # noqa: E402
from benchmarks.fidelity_real import FOLD_TERMS, REFIT_FIT_SIM_S, REFIT_SILICON_EVERY  # noqa: E402
from twin.fitting.case_weights import WEIGHTINGS  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import (all_cases, default_start, family_of, gpu_of, parameter_table, run_fold,  # noqa: E402
                                source_of, with_deployments)
from twin.errors import run_script  # noqa: E402

NOTHING = "(nothing held out)"


def cell_shares(cases) -> dict[tuple[str, str, str], float]:
    """Each (source, family, GPU) cell's share of the cases' total weight."""
    totals: dict = collections.defaultdict(float)
    for c in cases:
        totals[(source_of(c), family_of(c), gpu_of(c))] += c.weight
    whole = sum(totals.values())
    return {k: v / whole for k, v in sorted(totals.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--silicon-every", type=positive_int, default=REFIT_SILICON_EVERY)
    ap.add_argument("--fit-sim-s", type=positive_float, default=REFIT_FIT_SIM_S)
    ap.add_argument("--workers", type=positive_int, default=1)
    args = ap.parse_args()
    weighted = {w: all_cases(args.ground_truth, silicon_every=args.silicon_every, weighting=w) for w in WEIGHTINGS}
    shares = {w: cell_shares(cs) for w, cs in weighted.items()}
    print(f"{len(weighted[WEIGHTINGS[0]])} cases (silicon every {args.silicon_every}); each cell's share of the "
          "fit's weight, " + " -> ".join(WEIGHTINGS))
    for cell in shares[WEIGHTINGS[0]]:
        print(f"  {'/'.join(cell):36s} " + " -> ".join(f"{100 * shares[w][cell]:5.1f} %" for w in WEIGHTINGS))
    cases = weighted[WEIGHTINGS[0]]
    print("simulating every case at the embedded defaults ...", flush=True)
    first = simulate_cases(cases, default_start(FOLD_TERMS), max_sim_s=args.fit_sim_s, workers=args.workers)
    evidence = with_deployments(all_cases(args.ground_truth))
    tables = {}
    for w, cs in weighted.items():
        fold = run_fold("none", NOTHING, cs, lambda c: "kept", list(first), names=FOLD_TERMS,
                        fit_sim_s=args.fit_sim_s, workers=args.workers, evidence=evidence, cache={})
        tables[w] = {name: (value, sd, status) for name, value, sd, status in parameter_table(fold)}
    print("\nfitted on every case, by weighting (value as simulated +/- one standard error, identification):")
    for name in FOLD_TERMS:
        print(f"  {name}")
        for w in WEIGHTINGS:
            value, sd, status = tables[w].get(name, ("-", "-", "not fitted"))
            print(f"    {w:7s} {value:>44s} +/- {sd:<8s} {status}")


if __name__ == "__main__":
    run_script(main)
