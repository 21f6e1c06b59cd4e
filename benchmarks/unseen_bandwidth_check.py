"""Which training rows set a generation's fitted decode bandwidth (issue 33, round 9; docs/fidelity.md "Round 9:
decode on a generation held out"): one fold of the default report (its rows, fit settings and FOLD_TERMS), with
the rows ``twin.fitting.unseen_bandwidth.unexplained_decode_gap`` names kept out of the fit (as the report does)
or put back (``--with-gap-rows``), and the held-out reference generation's fraction carried from the fitted ones
(as the report does) or reset to the fit parameter's prior (``--no-carry``). Prints the fold's values and the
held-out group's median |error| (median signed).

    python benchmarks/unseen_bandwidth_check.py --ground-truth ../shared/ground-truth --kind GPU --group H100-SXM
    python benchmarks/unseen_bandwidth_check.py ... --with-gap-rows --no-carry     # the report of round 8
"""

from __future__ import annotations

import argparse
import sys
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import twin.fitting.joint as joint  # noqa: E402
from benchmarks.cli_checks import positive_int  # noqa: E402
from benchmarks.fidelity_real import FOLD_TERMS, REFIT_FIT_SIM_S, REFIT_SILICON_EVERY  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--kind", default="GPU", choices=sorted(joint.FOLDS))
    ap.add_argument("--group", default="H100-SXM")
    ap.add_argument("--with-gap-rows", action="store_true", help="fit on the unexplained-gap rows too")
    ap.add_argument("--no-carry", action="store_true", help="reset a held-out reference fraction to its prior")
    ap.add_argument("--workers", type=positive_int, default=1)
    args = ap.parse_args()
    with ExitStack() as stack:          # the two replacements hold for this run only (restored after it)
        if args.with_gap_rows:
            stack.enter_context(mock.patch.object(joint, "unexplained_decode_gap", lambda _case: None))
        if args.no_carry:
            stack.enter_context(mock.patch.object(joint, "unseen_reference", lambda _plan, _params: {}))
        run(args)


def run(args) -> None:
    """The fold of ``main``'s options (``args``): its values and its held-out group's errors."""
    cases = joint.all_cases(args.ground_truth, silicon_every=REFIT_SILICON_EVERY)
    group_of = joint.FOLDS[args.kind]
    if args.group not in {group_of(c) for c in cases}:
        raise SystemExit(f"--group: {args.group!r} is not a {args.kind} group; allowed: "
                         + ", ".join(sorted({group_of(c) for c in cases})))
    first = simulate_cases(cases, joint.default_start(FOLD_TERMS), max_sim_s=REFIT_FIT_SIM_S, workers=args.workers)
    fold = joint.run_fold(args.kind, args.group, cases, group_of, first, names=FOLD_TERMS, outer_iterations=1,
                          fit_sim_s=REFIT_FIT_SIM_S, eval_sim_s=60.0, workers=args.workers,
                          evidence=joint.with_deployments(joint.all_cases(args.ground_truth)), cache={})
    for name, value, sd, status in joint.parameter_table(fold):
        print(f"  {name:34s} {value:>60s} +/- {sd:<8s} {status}")
    summary = joint.summarize(list(zip(fold.cases, fold.predicted)))
    print(f"{args.kind} {args.group} held out ({len(fold.cases)} cases): " + ", ".join(
        f"{k} {100 * s['abs']:.1f}% ({100 * s['signed']:+.1f}%)" for k, s in summary.items() if s["abs"] is not None))


if __name__ == "__main__":
    run_script(main)
