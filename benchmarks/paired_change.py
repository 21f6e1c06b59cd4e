"""Whether a change between two held-out reports is more than the case sample (issue 33, round 19): a paired, seeded
bootstrap of the change in each pooled and per-group median, from the per-case errors both reports hold.

The two reports must hold the same cases out in the same folds (a case's errors in both are a pair). Within each fold
kind, cases are resampled with replacement inside each stratum (one held-out group's dense or MoE cases), the same
draws for both reports, and the change in the median |error| and in the median signed error (after minus before)
recomputed; its ``LEVEL`` percentile interval says whether the change is resolved (the interval excludes 0) or could
be which cases happen to be held out. No simulation; seconds.

    python benchmarks/paired_change.py BEFORE.json AFTER.json [--ground-truth DIR] [--resamples 2000] [--level 0.9]
        [--seed 0] [--markdown OUT.md] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path  # noqa: E402
from benchmarks.fold_report import load_report  # noqa: E402
from benchmarks.heldout_intervals import (LEVEL, RESAMPLES, SEED, add_bootstrap_options, case_of,  # noqa: E402
                                          interval, stream)
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.hardware.name_probe import quoted  # noqa: E402
from twin.fitting.targets import METRICS  # noqa: E402

# a pair: (held-out group, MoE model?, {metric: error before}, {metric: error after})
Pair = tuple[str, bool, dict[str, float], dict[str, float]]


def pairs(before, after, kind: str, moe_of: dict[str, bool]) -> list[Pair]:
    """The ``kind`` cases of two ``fold_report.FoldReport`` s, paired by name; a case in one report only, or held
    out in another group, is one line (the reports do not compare)."""
    def cases(rep):
        return {name: (f["held_out"], errs) for f in rep.folds(kind) for name, errs in rep.errors(f).items()}
    a, b = cases(before), cases(after)
    if set(a) != set(b):
        name = sorted(set(a) ^ set(b))[0]
        has, lacks = (before, after) if name in a else (after, before)
        raise TwinInputError(f"{has.source}: {kind} folds: case {quoted(name)} is in one report only (not in "
                             f"{lacks.source}: the reports hold out other cases)")
    out = []
    for name, (group, errs) in a.items():
        if b[name][0] != group:
            raise TwinInputError(f"{before.source} -> {after.source}: {kind} folds: case {quoted(name)} is held out "
                                 f"with {quoted(group)} before, {quoted(b[name][0])} after")
        out.append((group, case_of(moe_of, name), errs, b[name][1]))
    return out


def change(cases: Sequence[Pair], metric: str, resamples: int, level: float, rng: np.random.Generator) -> dict | None:
    """Before, after, and the change (after - before) of the median |error| and median signed error of ``metric``
    over the pairs with it in both, with the change's paired bootstrap interval; None without such a pair."""
    strata: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    for group, moe, a, b in cases:
        if metric in a and metric in b:
            strata.setdefault((group, moe), []).append((a[metric], b[metric]))
    if not strata:
        return None
    parts = [np.array(v) for v in strata.values()]
    ab = np.concatenate(parts)
    draws = np.concatenate([p[rng.integers(0, len(p), (resamples, len(p)))] for p in parts], axis=1)
    out = {"n": len(ab)}
    for key, f in (("abs", np.abs), ("signed", lambda x: x)):
        before, after = float(np.median(f(ab[:, 0]))), float(np.median(f(ab[:, 1])))
        moved = np.median(f(draws[..., 1]), axis=1) - np.median(f(draws[..., 0]), axis=1)
        out[key] = {"before": before, "after": after, "change": after - before, "bootstrap": interval(moved, level)}
    return out


def compare(before, after, moe_of: dict[str, bool], *, resamples: int = RESAMPLES, level: float = LEVEL,
            seed: int = SEED) -> dict:
    """Per fold kind both reports have: the pooled cases' and each held-out group's ``change`` per metric."""
    if resamples < 1 or not 0.0 < level < 1.0:
        raise TwinInputError(f"resamples {resamples!r} must be >= 1 and level {level!r} in (0, 1)")
    kinds = [k for k in before.kinds() if k in after.kinds()]
    if not kinds:
        raise TwinInputError("the reports share no fold kind")
    out: dict = {"level": level, "resamples": resamples, "seed": seed, "kinds": {}}
    for kind in kinds:
        cases = pairs(before, after, kind, moe_of)
        rows = {"pooled": cases, **{g: [c for c in cases if c[0] == g] for g in dict.fromkeys(c[0] for c in cases)}}
        out["kinds"][kind] = {label: {m: change(sub, m, resamples, level, stream(seed, "paired", kind, label, m))
                                      for m, _ in METRICS} for label, sub in rows.items()}
    return out


def _cell(c: dict | None) -> str:
    if c is None:
        return "-"
    a, s = c["abs"], c["signed"]
    return (f"{100 * a['before']:.1f} -> {100 * a['after']:.1f}: {100 * a['change']:+.1f} "
            f"[{100 * a['bootstrap'][0]:+.1f}, {100 * a['bootstrap'][1]:+.1f}] (signed {100 * s['change']:+.1f} "
            f"[{100 * s['bootstrap'][0]:+.1f}, {100 * s['bootstrap'][1]:+.1f}])")


def markdown(result: dict) -> str:
    """One row per fold kind and held-out set: each metric's median |error| before -> after, its change and the
    change's interval, then the signed median's change and interval (points)."""
    lines = [f"Median |error| before -> after (percent), change and its {100 * result['level']:.0f} % paired "
             f"bootstrap interval ({result['resamples']} resamples, seed {result['seed']}), then the median signed "
             "error's change and interval: resolved where an interval excludes 0.", "",
             "| fold | held out | " + " | ".join(t for _, t in METRICS) + " |", "|" + "---|" * (2 + len(METRICS))]
    for kind, rows in result["kinds"].items():
        for label, cells in rows.items():
            lines.append(f"| {kind} | {label} | " + " | ".join(_cell(cells[m]) for m, _ in METRICS) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path, help="a fidelity_real.py --json report")
    ap.add_argument("after", type=Path, help="another, holding out the same cases")
    add_bootstrap_options(ap, "write the changes and their intervals here")
    args = ap.parse_args()
    check_out_path(args.markdown, "--markdown")
    check_out_path(args.json, "--json")
    import json
    from benchmarks.heldout_intervals import case_info
    from twin.fitting.joint import all_cases
    before, after = load_report(args.before), load_report(args.after)
    moe_of = {name: moe for name, (moe, _) in case_info(all_cases(args.ground_truth)).items()}
    result = compare(before, after, moe_of, resamples=args.resamples, level=args.level, seed=args.seed)
    text = markdown(result)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    run_script(main)
