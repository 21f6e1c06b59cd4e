"""Does a held-out fold's fit read the dice? (round 21, issue 33): one fold (default the silicon source fold, fitted
on the 21 inference-perf stages alone) fitted at several fit windows (seconds of each stage simulated in the fit, or
``whole``) and several seeds (every simulation's draws: arrivals, lengths, request path). Per window: each fitted
term per seed with its standard error, the across-seed range and sd of each term (also in units of its mean
standard error), the held-out medians per seed and their across-seed range, and the wall time of a fit with its
held-out predictions.

    python benchmarks/fit_seed_robustness.py --fold source:silicon --windows 60,120,whole --seeds 0,1,2 \\
        --workers 1 --json out.json
    python benchmarks/fit_seed_robustness.py --fold family:minimax --windows 30 --seeds 0,1,2 --fit-draws 3

The fold is fitted as ``benchmarks/fidelity_real.py`` fits it (its fold terms, silicon every 16, one outer round,
the held-out rows predicted whole); at the window the default report uses (60 s for this fold) and seed 0 it
reproduces that report's fold.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, number_list, positive_int  # noqa: E402
from benchmarks.fidelity_real import FOLD_TERMS, REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.seed_scatter import _seeds, spread  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import check_draws_option, simulate_cases  # noqa: E402
from twin.fitting.joint import (FOLDS, all_cases, default_start, errors, run_fold, summarize,  # noqa: E402
                                with_deployments)  # noqa: E402
from twin.fitting.parameters import PARAMETERS_BY_NAME  # noqa: E402
from twin.fitting.targets import METRICS  # noqa: E402

KEYS = tuple(k for k, _ in METRICS)
WHOLE = "whole"


def windows(text: str) -> list[float | None]:
    """``"60,120,whole"`` -> [60.0, 120.0, None] (None: whole stages); distinct, each positive or ``whole``."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    out = [None if t == WHOLE else number_list(t, "--windows", low=0, low_open=True)[0] for t in items]
    if not out or len(set(out)) != len(out):
        raise TwinInputError(f"--windows {text!r}: give distinct positive seconds or {WHOLE!r}")
    return out


def fold_spec(text: str) -> tuple[str, str]:
    """``"source:silicon"`` -> ("source", "silicon"); the kind must be one of the report's fold kinds."""
    kind, _, group = text.partition(":")
    if kind not in FOLDS or not group:
        raise TwinInputError(f"--fold {text!r}: give KIND:GROUP with KIND one of {', '.join(FOLDS)}")
    return kind, group


def term_spread(runs: list[dict]) -> dict[str, dict[str, float]]:
    """Per term fitted in every run: across-seed range / sd of its value and its mean standard error, all in the
    term's report units, and the range in mean standard errors (``range_se``; nan where no finite error)."""
    out = {}
    for name in sorted(set.intersection(*(set(r["std"]) for r in runs))):
        unit = PARAMETERS_BY_NAME[name].from_model
        vals = [unit(r["params"][name]) for r in runs]
        ses = [unit(r["std"][name]) for r in runs if math.isfinite(r["std"][name])]
        se = statistics.fmean(ses) if ses else math.nan
        s = spread(vals)
        out[name] = {"mean": statistics.fmean(vals), **s, "se": se,
                     "range_se": s["range"] / se if se and math.isfinite(se) else math.nan}
    return out


def median_spread(runs: list[dict]) -> dict[str, dict[str, float]]:
    """Per metric with held-out cases: across-seed range / sd of the median |error| and of the signed median."""
    out = {}
    for key in KEYS:
        if any(r["summary"][key]["abs"] is None for r in runs):
            continue
        out[key] = {f"{part}_{stat}": v for part in ("abs", "signed")
                    for stat, v in spread([r["summary"][key][part] for r in runs]).items()}
        out[key] |= {"abs_mean": statistics.fmean(r["summary"][key]["abs"] for r in runs),
                     "signed_mean": statistics.fmean(r["summary"][key]["signed"] for r in runs)}
    return out


def fit_once(cases, evidence, kind: str, group: str, window: float | None, seed: int, workers: int,
             draws: int = 1) -> dict:
    """The fold fitted with its training rows simulated over ``window`` at ``seed`` (each open-loop one ``draws``
    times, fitted as their mean: ``twin.fitting.fit_draws``) and its held-out rows predicted whole at the same
    seed: {params, std, identification, summary, errors, seconds}."""
    t0 = time.perf_counter()
    group_of = FOLDS[kind]
    train = [i for i, c in enumerate(cases) if group_of(c) != group]
    first: list = [None] * len(cases)
    for i, r in zip(train, simulate_cases([cases[i] for i in train], default_start(FOLD_TERMS), max_sim_s=window,
                                          workers=workers, seed=seed, draws=draws)):
        first[i] = r
    fold = run_fold(kind, group, cases, group_of, first, names=FOLD_TERMS, outer_iterations=1, fit_sim_s=window,
                    eval_sim_s=None, workers=workers, seed=seed, evidence=evidence, fit_draws=draws)
    pairs = list(zip(fold.cases, fold.predicted))
    return {"params": {n: fold.params[n] for n in fold.std}, "std": dict(fold.std),
            "identification": fold.identification, "summary": summarize(pairs),
            "errors": {c.run.name: errors(c, p) for c, p in pairs}, "seconds": time.perf_counter() - t0}


def _label(window: float | None) -> str:
    return WHOLE if window is None else f"{window:g}"


def print_window(window: float | None, runs: dict[int, dict]) -> None:
    print(f"\n== window {_label(window)} s: seeds {', '.join(map(str, runs))}; "
          f"wall {', '.join(str(round(r['seconds'])) for r in runs.values())} s")
    for name, s in term_spread(list(runs.values())).items():
        vals = "  ".join(f"{PARAMETERS_BY_NAME[name].from_model(r['params'][name]):.4g}"
                         f" +/- {PARAMETERS_BY_NAME[name].from_model(r['std'][name]):.2g}" for r in runs.values())
        print(f"  {name:28s} {vals}  | range {s['range']:.3g} ({s['range_se']:.2f} SE) {PARAMETERS_BY_NAME[name].unit}")
    for key, s in median_spread(list(runs.values())).items():
        vals = "  ".join(f"{100 * r['summary'][key]['abs']:5.1f} ({100 * r['summary'][key]['signed']:+5.1f})"
                         for r in runs.values())
        print(f"  {key:28s} {vals}  | range |e| {100 * s['abs_range']:.1f} pp, signed {100 * s['signed_range']:.1f} pp")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--fold", type=str, default="source:silicon", help="KIND:GROUP held out (default source:silicon)")
    ap.add_argument("--windows", default="60", help=f"comma-separated fit windows, seconds or {WHOLE!r}")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--silicon-every", type=positive_int, default=REFIT_SILICON_EVERY)
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--fit-draws", type=positive_int, default=1, help="draws of each stage in the fit, their mean "
                    "fitted (round 23, twin.fitting.fit_draws; default 1: one draw at the seed)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    check_out_path(args.json, "--json")
    kind, group = fold_spec(args.fold)
    check_draws_option(args.fit_draws, "--fit-draws", fitting=True)
    wins, seeds = windows(args.windows), _seeds(args.seeds)
    cases = all_cases(args.ground_truth, silicon_every=args.silicon_every)
    if group not in {FOLDS[kind](c) for c in cases}:
        raise TwinInputError(f"--fold {args.fold!r}: no {kind} group {group!r} in the data")
    evidence = with_deployments(all_cases(args.ground_truth))
    report: dict = {"fold": args.fold, "seeds": seeds, "fit_draws": args.fit_draws, "windows": {}}
    for w in wins:
        runs = {}
        for s in seeds:
            runs[s] = fit_once(cases, evidence, kind, group, w, s, args.workers, args.fit_draws)
            print(f"window {_label(w)} seed {s}: {runs[s]['seconds']:.0f} s", flush=True)
            report["windows"][_label(w)] = {"runs": {str(k): r for k, r in runs.items()},
                                            "terms": term_spread(list(runs.values())),
                                            "medians": median_spread(list(runs.values()))}
            if args.json:       # after every fit: a long run's finished fits survive an interruption
                args.json.write_text(json.dumps(report, indent=1, default=str))
        print_window(w, runs)


if __name__ == "__main__":
    run_script(main)
