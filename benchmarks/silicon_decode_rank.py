"""Which reset terms own how many points of the silicon-held-out source fold's DECODE gap (TPOT, E2E, throughput),
ranked (issue 33, round 18; docs/fidelity.md "Round 18: the silicon-held-out source fold's decode, term by term").

No fit. ``run``: the held-out silicon rows of the default report (every 16th) simulated at the embedded defaults,
at the fold's values (a ``fidelity_real.py --folds source --json`` file) and with one reset group or one candidate
value at a time (``silicon_ttft_split.variants``: its groups, "all cost terms on" and ``--prior`` sets), the
per-case errors written to ``--save`` after every variant (a long run can be read while it goes on). ``rank``: reads
that file and ranks the variants by the points of signed TPOT error they give back, as the mean per-row move from the
fold (a mean adds up; a median hides a term whose rows sit on one side), beside each variant's median |error| and
median signed error of TPOT, E2E and throughput, and the median signed TPOT of the B200 / H100 rows.

    python benchmarks/silicon_decode_rank.py run FOLD.json --groups bandwidth,sync,... --prior 'label:name=v' --save X
    python benchmarks/silicon_decode_rank.py rank X.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fidelity_real import REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.cli_checks import check_out_path  # noqa: E402
from benchmarks.error_medians import error_medians  # noqa: E402
from benchmarks.fold_report import finite_number, read_json  # noqa: E402
from benchmarks.silicon_ttft_split import parse_prior, read_fold  # noqa: E402
from benchmarks.source_fold_terms import GROUPS, restored  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

TPOT, E2E, THR = "mean_tpot_ms", "mean_e2el_ms", "request_throughput"
BASE, DEFAULTS = "fold", "defaults"


cells = error_medians      # (median |error|, median signed error, rows) of a key over the rows' errors, or None


def mean_move(base: list[dict], variant: list[dict], key: str, rows: list[int] | None = None) -> float | None:
    """Mean per-row move of the signed ``key`` error from ``base`` to ``variant`` over the rows both have (and in
    ``rows`` when given); None where none has it in both."""
    if len(base) != len(variant):
        raise TwinInputError(f"a variant has {len(variant)} rows, the fold {len(base)}")
    idx = range(len(base)) if rows is None else rows
    moves = [variant[i][key] - base[i][key] for i in idx if key in base[i] and key in variant[i]]
    return statistics.fmean(moves) if moves else None


def ranked(errors: dict[str, list[dict]], names: list[str]) -> list[dict]:
    """One entry per variant, the fold first, then by |TPOT points| (mean per-row move of the signed TPOT error from
    the fold, percent): the cells of TPOT, E2E and throughput, and the B200 / H100 rows' median signed TPOT."""
    if BASE not in errors:
        raise TwinInputError(f"the errors lack {BASE!r} (a silicon_decode_rank.py run --save file has it)")
    base = errors[BASE]
    keys = {"tpot": TPOT, "e2e": E2E, "thr": THR}
    gpus = {g: [i for i, n in enumerate(names) if g.lower() in n.lower()] for g in ("b200", "h100")}
    out = []
    for label, errs in errors.items():
        entry = {"label": label, "points": 0.0 if label == BASE else mean_move(base, errs, TPOT)}
        for m, k in keys.items():
            entry[m] = cells(errs, k)
        for g, rows in gpus.items():
            entry[g] = cells([errs[i] for i in rows], TPOT)
        out.append(entry)
    return [out[0], *sorted(out[1:], key=lambda e: -abs(e["points"] or 0.0))]


def pct(cell: tuple[float, float, int] | None, signed_only: bool = False) -> str:
    if cell is None:
        return "-"
    return f"{100 * cell[1]:+.1f}" if signed_only else f"{100 * cell[0]:.1f} ({100 * cell[1]:+.1f})"


def read_save(path: Path) -> tuple[list[str], dict[str, list[dict]]]:
    """(case names, {variant: one error dict per case}) of a ``run --save`` file, each error a finite number."""
    data = read_json(path)
    if not isinstance(data.get("errors"), dict) or not isinstance(data.get("cases"), list):
        raise TwinInputError(f"{path}: not a silicon_decode_rank.py run --save file (cases, errors)")
    names = data["cases"]
    if not names or not all(isinstance(n, str) for n in names):
        raise TwinInputError(f"{path}: cases is not a non-empty list of case names")
    for label, errs in data["errors"].items():
        if not isinstance(errs, list) or len(errs) != len(names) or not all(isinstance(e, dict) for e in errs):
            raise TwinInputError(f"{path}: variant {label!r} is not one error dict per case")
        if not all(finite_number(v) for e in errs for v in e.values()):
            raise TwinInputError(f"{path}: variant {label!r} has an error that is not a finite number")
    return names, data["errors"]


def print_rank(path: Path) -> None:
    names, errors = read_save(path)
    print("| variant | TPOT points (mean move) | TPOT | E2E | throughput | B200 TPOT | H100 TPOT |")
    print("|---|---|---|---|---|---|---|")
    for e in ranked(errors, names):
        pts = "-" if e["points"] is None else f"{100 * e['points']:+.2f}"
        print(f"| {e['label']} | {pts} | {pct(e['tpot'])} | {pct(e['e2e'])} | {pct(e['thr'])} | "
              f"{pct(e['b200'], True)} | {pct(e['h100'], True)} |")


def variants(fold: dict[str, float], embedded: dict[str, float], groups, priors) -> dict[str, dict[str, float]]:
    """The parameter sets to simulate: the embedded defaults, the fold, each group restored to its embedded value
    (``source_fold_terms.restored``), each candidate value on top of the fold's."""
    out = {DEFAULTS: dict(embedded), BASE: fold}
    for g in groups:
        out[f"on {g}"] = restored(fold, GROUPS[g], embedded)
    for label, values in priors:
        out[f"prior {label}"] = fold | values
    return out


def read_saved(path: Path, names: list[str]) -> dict[str, list[dict]]:
    """The variants an earlier ``run --save`` of the same rows wrote to ``path`` ({} where the file does not exist)."""
    if not path.exists():
        return {}
    saved_names, errors = read_save(path)
    if saved_names != names:
        raise TwinInputError(f"{path}: not a save of these rows (--resume needs the same fold and rows)")
    return errors


def run(args) -> None:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import all_cases, default_start, errors, source_of
    groups = [g for g in args.groups.split(",") if g]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise TwinInputError(f"--groups: unknown {', '.join(unknown)}; known: {', '.join(GROUPS)}")
    if args.save is None:
        raise TwinInputError("run needs --save (the per-case errors are what rank reads)")
    check_out_path(args.save, "--save")
    priors = [parse_prior(p) for p in args.prior]
    cases = [c for c in all_cases(args.ground_truth, silicon_every=REFIT_SILICON_EVERY) if source_of(c) == "silicon"]
    names = [c.run.name for c in cases]
    embedded = {n: v for n, v in default_start(tuple(n for g in GROUPS.values() for n in g)).items() if v is not None}
    results = read_saved(args.save, names) if args.resume else {}
    for label, params in variants(read_fold(args.fold_json), embedded, groups, priors).items():
        if label in results:
            continue
        runs = simulate_cases(cases, params, max_sim_s=args.sim_s, workers=args.workers)
        results[label] = [errors(c, r.metrics) for c, r in zip(cases, runs)]
        args.save.write_text(json.dumps({"cases": names, "errors": results}, indent=1))
        print(f"== {label}: TPOT {pct(cells(results[label], TPOT))}", flush=True)


def try_fold(args) -> None:
    """Another fold's held-out cases (of ``--family`` only, where given) at that fold's values and with ``--set`` on
    top: exact for a term no training row of that fold is priced with (a path the fold holds out entirely)."""
    from benchmarks.fold_report import fold_params
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import FOLDS, all_cases, errors, family_of
    kind, _, group = args.fold.partition(":")
    if kind not in FOLDS or not group:
        raise TwinInputError(f"--fold {args.fold!r}: expected KIND:GROUP with KIND one of {', '.join(FOLDS)}")
    params = fold_params(args.report, kind, group)
    if not args.set.strip():
        raise TwinInputError("--set: expected name=value,... (at least one)")
    try:
        extra = parse_prior(f"set:{args.set}")[1]      # --prior's checks: a fit parameter (name@scope), a number
    except TwinInputError as exc:
        raise TwinInputError(f"--set {args.set!r}: {str(exc).split(': ', 1)[-1]}") from None
    cases = [c for c in all_cases(args.ground_truth, silicon_every=REFIT_SILICON_EVERY) if FOLDS[kind](c) == group
             and (not args.family or family_of(c) == args.family)]
    if not cases:
        raise TwinInputError(f"--fold {args.fold!r} --family {args.family!r}: no held-out case")
    for label, values in (("the fold", params), ("with --set", params | extra)):
        runs = simulate_cases(cases, values, max_sim_s=args.sim_s, workers=args.workers)
        errs = [errors(c, r.metrics) for c, r in zip(cases, runs)]
        print(f"== {args.fold} {label} ({len(cases)} cases): TTFT {pct(cells(errs, 'mean_ttft_ms'))} TPOT "
              f"{pct(cells(errs, TPOT))} E2E {pct(cells(errs, E2E))} throughput {pct(cells(errs, THR))}", flush=True)
        for c, e in zip(cases, errs):
            print(f"   {c.run.name[-60:]:60s} " + " ".join(f"{k[:9]} {100 * v:+6.1f}" for k, v in e.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="simulate the variants, saving per-case errors after each")
    r.add_argument("fold_json", type=Path)
    r.add_argument("--ground-truth", type=Path, default=None)
    r.add_argument("--groups", default="bandwidth,sync,link,token,eager,hopper_paths,int4,mla,fused_b200")
    r.add_argument("--prior", action="append", default=[], help="label:name=value,...: a candidate value")
    r.add_argument("--sim-s", type=float, default=60.0)
    r.add_argument("--workers", type=int, default=1)
    r.add_argument("--save", type=Path, default=None)
    r.add_argument("--resume", action="store_true", help="keep the variants --save already holds (same rows)")
    t = sub.add_parser("try", help="another fold's held-out cases at its values and with --set")
    t.add_argument("report", type=Path)
    t.add_argument("--fold", required=True, help="KIND:GROUP, e.g. GPU:H100-SXM")
    t.add_argument("--family", default="", help="only this family's held-out cases")
    t.add_argument("--set", required=True, help="name=value,...")
    t.add_argument("--ground-truth", type=Path, default=None)
    t.add_argument("--sim-s", type=float, default=60.0)
    t.add_argument("--workers", type=int, default=1)
    k = sub.add_parser("rank", help="rank a run's variants by TPOT points")
    k.add_argument("save", type=Path)
    args = ap.parse_args()
    if args.command in ("run", "try"):
        from twin.fitting.fit import check_simulation_options
        check_simulation_options(args.sim_s, args.workers)
    if args.command == "run":
        run(args)
    elif args.command == "try":
        try_fold(args)
    else:
        print_rank(args.save)


if __name__ == "__main__":
    run_script(main)
