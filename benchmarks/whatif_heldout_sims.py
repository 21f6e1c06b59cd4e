"""More held-out cases for the what-if pairs: every fold of a saved held-out report predicts more silicon rows of its
own held-out group, at the parameters that fold fitted (issue 33, round 22; docs/fidelity.md "Round 22: what-if
fidelity: predicted changes held out").

The default report fits each fold on every 16th runnable silicon row and predicts only the held-out rows among them,
so few held-out pairs differ in one knob. A fold's fitted model (its ``params``: every term, the plan's resets and
priors included, in the report's JSON) never read a row of its held-out group, so simulating more rows of that group
at those parameters adds held-out predictions of the same model, with no refit and no leak. This script writes a
report of the same shape (``folds[kind]["folds"][i]["errors"]``) that ``whatif_fidelity.py`` reads: each fold's
report errors, plus the errors of the held-out group's rows among every ``--silicon-every`` N-th runnable silicon row
(``--silicon-every 4`` keeps the report's every-16th rows and three more in each four). The inference-perf stages are
all in the report already and are not simulated again. A typed prior the report's JSON stores as a bare number
(the Blackwell link part reset to NCCL's exchange model) is put back by the report reader (``fold_report.restore_flags``).
``--verify`` simulates the report's own silicon rows again and prints the largest difference from the report's errors (0 when the fold's model is reproduced).

    python benchmarks/whatif_heldout_sims.py REPORT.json --ground-truth ../shared/ground-truth --silicon-every 4 \\
        [--kinds GPU,family] [--groups kimi] [--workers 1] [--seed 0] [--verify] --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_folder, check_out_path, nonneg_int, positive_int  # noqa: E402
from benchmarks.fold_report import FoldReport, load_report  # noqa: E402
from benchmarks.whatif_fidelity import fold_kinds  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402


def extra_cases(report: FoldReport, kind: str, fold: dict, cases: list, verify: bool) -> list:
    """The silicon cases of ``fold``'s held-out group among ``cases`` to simulate: those the report has no errors
    of, or (``verify``) those it has."""
    from twin.fitting.joint import FOLDS, SOURCE_SILICON, source_of
    have = {n.split(" [", 1)[0] for n in report.errors(fold)}
    group_of = FOLDS[kind]
    return [c for c in cases if source_of(c) == SOURCE_SILICON and group_of(c) == fold["held_out"]
            and (c.run.name in have) == verify]


def densify(report: FoldReport, kinds, cases: list, *, groups=frozenset(), workers: int = 1, seed: int = 0,
            verify: bool = False) -> tuple[dict, float]:
    """(a report of the same shape with each fold's errors widened, the largest |difference| between a report
    error and its simulation again, ``verify`` only). ``groups``: only those held-out groups (empty: all)."""
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import errors
    out: dict = {"folds": {}}
    worst = 0.0
    for kind in kinds:
        docs = []
        for fold in report.folds(kind):
            if groups and fold["held_out"] not in groups:
                continue
            params, errs = report.params(fold), report.errors(fold)
            todo = extra_cases(report, kind, fold, cases, verify)
            t0 = time.perf_counter()
            sims = simulate_cases(todo, params, seed=seed, max_sim_s=None, workers=workers) if todo else []
            new = {c.run.name: errors(c, r.metrics) for c, r in zip(todo, sims)}
            if verify:
                base = {n.split(" [", 1)[0]: e for n, e in errs.items()}
                for name, e in new.items():
                    worst = max([worst] + [abs(e[m] - base[name][m]) for m in e if m in base[name]])
            else:
                errs = errs | new
            print(f"{kind:7s} {fold['held_out']:16s} {len(todo):4d} rows simulated ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
            docs.append({"held_out": fold["held_out"], "params": params, "errors": errs,
                         "plan": list(fold.get("plan") or []), "simulated": sorted(new)})
        out["folds"][kind] = {"folds": docs}
    return out, worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="a fidelity_real.py --json held-out report")
    ap.add_argument("--ground-truth", type=Path, required=True, help="the ground truth the report was made on")
    ap.add_argument("--silicon-every", type=positive_int, required=True,
                    help="predict the held-out rows among every N-th runnable silicon row")
    ap.add_argument("--kinds", type=fold_kinds, default=None, help="fold kinds (default: every kind the report has)")
    ap.add_argument("--groups", default="", help="comma-separated held-out groups (default: every fold's)")
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--seed", type=nonneg_int, default=None, help="the simulations' seed (default: the report's)")
    ap.add_argument("--verify", action="store_true",
                    help="simulate the report's own silicon rows again instead and print the largest difference")
    ap.add_argument("--json", type=Path, default=None, help="the widened report (required unless --verify)")
    args = ap.parse_args()
    check_out_path(args.json, "--json")
    if args.json is None and not args.verify:
        raise TwinInputError("--json: required (where to write the widened report), unless --verify")
    if args.json is not None and args.verify:
        raise TwinInputError("--json: --verify writes nothing (it only compares the report's own rows)")
    check_folder(args.ground_truth)
    report = load_report(args.report)
    kinds = args.kinds or tuple(report.kinds())
    groups = {g.strip() for g in args.groups.split(",") if g.strip()}
    held = {f["held_out"] for k in kinds for f in report.folds(k)}
    if groups - held:
        raise TwinInputError(f"--groups: {sorted(groups - held)[0]!r} is held out by no fold of "
                             f"{', '.join(kinds)} (held out: {', '.join(sorted(held))})")
    rep_args = report.data.get("args") if isinstance(report.data.get("args"), dict) else {}
    seed = args.seed if args.seed is not None else rep_args.get("seed", 0)
    if rep_args.get("silicon_max_requests") is not None:
        raise TwinInputError("the report capped each silicon row's requests (--silicon-max-requests); this script "
                             "simulates rows whole, as the default report does")
    from twin.fitting.joint import all_cases
    cases = all_cases(args.ground_truth, silicon_every=args.silicon_every)
    doc, worst = densify(report, kinds, cases, groups=frozenset(groups), workers=args.workers, seed=seed,
                         verify=args.verify)
    if args.verify:
        print(f"largest |difference| from the report's errors: {worst:.3g}")
        return
    doc["args"] = {"report": str(args.report), "silicon_every": args.silicon_every, "seed": seed,
                   "kinds": list(kinds), "groups": sorted(groups)}
    args.json.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    run_script(main)
