"""The held-out report over several seeds (round 22, issue 33): K ``fidelity_real.py --json`` reports that differ
only in ``--seed`` (the draws of every simulation: arrivals, lengths, request path; each fold is fitted again at
its seed), read together. Per fold kind x cell (all held out; each held-out group; dense / MoE models) x metric
(TTFT mean, TTFT p50, TPOT, E2E mean, throughput): the median over seeds of the cell's median |error| and of its
median signed error, their range over seeds (min..max) and sample sd, and which of the issue's targets
(``twin.fitting.targets``: |error| <= 10 / 10 / 8 / 8 / 3 %, signed within +/- 5 %, MoE no worse than dense) the
cell meets at every seed and at the seed median; per fold kind and metric, the per-case seed scatter (the sd over
seeds of each held-out case's signed error: its median and largest over the cases). The sd of a cell is the floor
for judging a future move of it: a move below about twice it is not evidence. No simulation; seconds.

    python benchmarks/multi_seed_report.py SEED0.json SEED1.json SEED2.json [--folds GPU,family] [--json OUT.json]
        [--markdown OUT.md]

The reports must be made with the same options but ``--seed`` (``--workers``, ``--json``, ``--markdown``,
``--folds`` and ``--groups`` aside), hold the same groups and cases out in each fold kind read, and have distinct
seeds; a report of more fold kinds (the default report) serves for the kinds it shares.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path  # noqa: E402
from benchmarks.fold_report import FoldReport, finite_number, load_report  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.hardware.name_probe import quoted  # noqa: E402
from twin.fitting.targets import ABS_TARGETS, MET, METRICS, NO_DATA, SIGNED_TARGET, judge, moe_vs_dense  # noqa: E402

KEYS = tuple(k for k, _ in METRICS)
TITLES = dict(METRICS)
ALL, DENSE, MOE = "all held out", "dense models", "MoE models"
DEFAULT_KINDS = "GPU,family"
# options that may differ between the reports read together: the seed itself, how and where a report ran and
# which folds it made (the fold kinds and groups read are checked apart)
FREE_ARGS = ("seed", "workers", "json", "markdown", "folds", "groups")
# options added to fidelity_real.py after reports were made: a report without one was made at its default
ARG_DEFAULTS = {"fit_draws": 1}      # round 23 (33zC)


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min, max and sample sd (0 for one value) of one cell's values over seeds (fractions)."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


def seed_of(report: FoldReport) -> int:
    """The ``--seed`` a report was made with (its ``args``; a report of round 19 or before, without one, is seed
    0), a whole number >= 0; else one line naming the file."""
    args = report.data.get("args", {})
    if not isinstance(args, dict):
        raise report.error(f"args is a JSON {type(args).__name__}, not an object (the options it was made with)")
    seed = args.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise report.error(f"args.seed is {seed!r}, not a whole number >= 0")
    return seed


def _summary(report: FoldReport, value: object, where: str) -> dict:
    """A checked summary {metric: {"n", "abs", "signed"}}: every metric present, ``n`` a whole number >= 0 (or
    absent), ``abs`` and ``signed`` finite numbers or both null (no case has the metric)."""
    if not isinstance(value, dict):
        raise report.error(f"{where}: no summary object")
    for key in KEYS:
        s = value.get(key)
        if not isinstance(s, dict):
            raise report.error(f"{where}: no {key} in its summary")
        n = s.get("n", 0)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise report.error(f"{where}: {key} n is {quoted(n) if isinstance(n, str) else repr(n)[:80]}, not a "
                               "whole number >= 0 (the cases with the metric)")
        pair = (s.get("abs"), s.get("signed"))
        if pair != (None, None) and not all(finite_number(v) for v in pair):
            raise report.error(f"{where}: {key} abs / signed are {pair[0]!r} / {pair[1]!r}, not finite numbers")
    return value


def cells(report: FoldReport, kind: str) -> dict[str, dict]:
    """The ``kind`` cells of one report, in the report's order: all held out (the pooled summary), each held-out
    group, then dense and MoE models."""
    folds = report.folds(kind)
    body = report.data["folds"][kind]
    out = {ALL: _summary(report, body.get("pooled"), f"{kind} pooled")}
    for fold in folds:
        where = f"the {kind} fold holding {fold['held_out']!r} out"
        out[fold["held_out"]] = _summary(report, fold.get("summary"), where)
    split = report.data.get("moe_vs_dense", {})
    split = split.get(kind) if isinstance(split, dict) else None
    if not isinstance(split, dict):
        raise report.error(f"no moe_vs_dense[{kind!r}] (dense and MoE models' summaries)")
    for label in (DENSE, MOE):
        out[label] = _summary(report, split.get(label), f"{kind} {label}")
    return out


def check_comparable(reports: Sequence[FoldReport], kinds: Sequence[str]) -> list[int]:
    """The reports' seeds, after checking they are distinct, the reports' options equal but ``FREE_ARGS``, and each
    kind's held-out groups and cases the same in every report; else one line naming the files."""
    seeds = [seed_of(r) for r in reports]
    for i, s in enumerate(seeds):
        if s in seeds[:i]:
            raise TwinInputError(f"{reports[i].source}: seed {s}, as {reports[seeds.index(s)].source} "
                                 "(give each seed once)")
    first = reports[0]
    base = {k: v for k, v in (ARG_DEFAULTS | first.data.get("args", {})).items() if k not in FREE_ARGS}
    for rep in reports[1:]:
        other = {k: v for k, v in (ARG_DEFAULTS | rep.data.get("args", {})).items() if k not in FREE_ARGS}
        for key in sorted(set(base) | set(other)):
            if base.get(key) != other.get(key):
                raise TwinInputError(f"{rep.source}: made with {key} = {other.get(key)!r}, {first.source} with "
                                     f"{base.get(key)!r} (only the seed may differ)")
    for kind in kinds:
        groups = [[f["held_out"] for f in r.folds(kind)] for r in reports]
        for rep, g in zip(reports[1:], groups[1:]):
            if sorted(g) != sorted(groups[0]):
                raise TwinInputError(f"{rep.source}: holds out {kind} groups {', '.join(g)}; {first.source}: "
                                     f"{', '.join(groups[0])} (make every report with the same --groups)")
        names = [{n for f in r.folds(kind) for n in r.errors(f)} for r in reports]
        for rep, n in zip(reports[1:], names[1:]):
            if n != names[0]:
                odd = sorted(n ^ names[0])[0]
                raise TwinInputError(f"{rep.source if odd in n else first.source}: holds out {kind} case "
                                     f"{quoted(odd)}, {first.source if odd in n else rep.source} does not (the "
                                     "reports must hold out the same cases)")
    return seeds


def cell_stats(summaries: Sequence[dict]) -> dict[str, dict]:
    """One cell over seeds: per metric with data at every seed, the spread of its |error| and signed medians,
    the case count per seed, and the targets met at every seed / at the seed median (``judge``)."""
    out = {}
    for key in KEYS:
        if any(s[key].get("abs") is None for s in summaries):
            continue
        a, g = spread([s[key]["abs"] for s in summaries]), spread([s[key]["signed"] for s in summaries])
        verdicts = [judge(s, key) for s in summaries]
        at_median = judge({key: {"abs": a["median"], "signed": g["median"]}}, key)
        out[key] = {"n": [s[key].get("n") for s in summaries], "abs": a, "signed": g,
                    "abs_by_seed": [s[key]["abs"] for s in summaries],
                    "signed_by_seed": [s[key]["signed"] for s in summaries],
                    "abs_met_seeds": sum(v[0] == MET for v in verdicts),
                    "signed_met_seeds": sum(v[1] == MET for v in verdicts),
                    "abs_met_at_median": at_median[0] == MET, "signed_met_at_median": at_median[1] == MET}
    return out


def moe_stats(dense: Sequence[dict], moe: Sequence[dict]) -> dict[str, dict]:
    """Per metric with data at every seed: seeds where MoE's |error| median is no worse than dense's, and whether
    it is at the seed medians; the gap (MoE - dense) over seeds."""
    out = {}
    for key in KEYS:
        verdicts = [moe_vs_dense(d, m, key) for d, m in zip(dense, moe)]
        if NO_DATA in verdicts:
            continue
        gap = spread([m[key]["abs"] - d[key]["abs"] for d, m in zip(dense, moe)])
        med_d = statistics.median(d[key]["abs"] for d in dense)
        med_m = statistics.median(m[key]["abs"] for m in moe)
        out[key] = {"met_seeds": sum(v == MET for v in verdicts), "met_at_median": med_m <= med_d, "gap": gap}
    return out


def case_scatter(reports: Sequence[FoldReport], kind: str) -> dict[str, dict]:
    """Per metric: the sd over seeds of each case's signed error (the cases held out, with the metric, at every
    seed), its median and largest over the cases and the case with the largest."""
    per_seed = [{name: errs for f in r.folds(kind) for name, errs in r.errors(f).items()} for r in reports]
    names = [n for n in per_seed[0] if all(n in p for p in per_seed[1:])]
    out = {}
    for key in KEYS:
        sds = {n: statistics.stdev([p[n][key] for p in per_seed]) for n in names
               if all(key in p[n] for p in per_seed)} if len(reports) > 1 else {}
        if sds:
            worst = max(sds, key=sds.get)
            out[key] = {"n": len(sds), "median_sd": statistics.median(sds.values()), "max_sd": sds[worst],
                        "max_case": worst}
    return out


def multi_seed(reports: Sequence[FoldReport], kinds: Sequence[str]) -> dict:
    """The whole reading: {"seeds", "kinds": {kind: {"cells": {cell: cell_stats}, "moe_vs_dense": moe_stats,
    "case_scatter": ...}}}."""
    seeds = check_comparable(reports, kinds)
    out: dict = {"seeds": seeds, "sources": [r.source for r in reports], "kinds": {}}
    for kind in kinds:
        per = [cells(r, kind) for r in reports]
        out["kinds"][kind] = {"cells": {c: cell_stats([p[c] for p in per]) for c in per[0]},
                              "moe_vs_dense": moe_stats([p[DENSE] for p in per], [p[MOE] for p in per]),
                              "case_scatter": case_scatter(reports, kind)}
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _met(count: int, k: int, at_median: bool) -> str:
    return f"{count}/{k}{'' if at_median else ', median NOT'}"


def text(result: dict) -> str:
    """The reading as text: per fold kind a table of cell x metric, then MoE vs dense and the per-case scatter."""
    k = len(result["seeds"])
    lines = [f"{k} seeds ({', '.join(map(str, result['seeds']))}): per cell and metric, over seeds, the median "
             "|error| median [min..max] sd, then the signed median likewise, in percent; 'met a/b' = seeds meeting "
             f"the target (|error| <= {', '.join(f'{100 * ABS_TARGETS[m]:.0f}' for m in KEYS)} %; signed within "
             f"+/-{100 * SIGNED_TARGET:.0f} %), ', median NOT' = missed at the seed median"]
    for kind, body in result["kinds"].items():
        lines.append(f"\n== {kind}")
        for cell, stats in body["cells"].items():
            for key, s in stats.items():
                a, g = s["abs"], s["signed"]
                lines.append(f"{cell[:18]:<18} {TITLES[key]:<10} n {min(s['n']):>3} | |error| {_pct(a['median']):>5} "
                             f"[{_pct(a['min'])}..{_pct(a['max'])}] sd {_pct(a['sd'])} met "
                             f"{_met(s['abs_met_seeds'], k, s['abs_met_at_median'])} | signed "
                             f"{100 * g['median']:+.1f} [{100 * g['min']:+.1f}..{100 * g['max']:+.1f}] sd "
                             f"{_pct(g['sd'])} met {_met(s['signed_met_seeds'], k, s['signed_met_at_median'])}")
        for key, m in body["moe_vs_dense"].items():
            gap = m["gap"]
            lines.append(f"MoE no worse than dense, {TITLES[key]:<10}: "
                         f"met {_met(m['met_seeds'], k, m['met_at_median'])}"
                         f"; MoE - dense |error| {100 * gap['median']:+.1f} [{100 * gap['min']:+.1f}.."
                         f"{100 * gap['max']:+.1f}] sd {_pct(gap['sd'])}")
        for key, c in body["case_scatter"].items():
            lines.append(f"per-case seed sd, {TITLES[key]:<10}: median {_pct(c['median_sd'])}, largest "
                         f"{_pct(c['max_sd'])} ({c['max_case'][:60]}; {c['n']} cases)")
    return "\n".join(lines)


def markdown(result: dict) -> str:
    """One markdown table: per fold kind and cell, per metric the seed medians of the |error| and signed medians,
    their sds over seeds, and the seeds meeting the |error| and the signed targets (``*``: missed at the seed
    median), e.g. ``8.0 (-2.5); sd 2.0 / 0.5; met 2/3, 3/3``."""
    k = len(result["seeds"])
    lines = ["| fold | cell | " + " | ".join(TITLES[m] for m in KEYS) + " |", "|" + "---|" * (2 + len(KEYS))]
    for kind, body in result["kinds"].items():
        for cell, stats in body["cells"].items():
            row = []
            for key in KEYS:
                s = stats.get(key)
                row.append("-" if s is None else
                           f"{_pct(s['abs']['median'])} ({100 * s['signed']['median']:+.1f}); "
                           f"sd {_pct(s['abs']['sd'])} / {_pct(s['signed']['sd'])}; "
                           f"met {s['abs_met_seeds']}/{k}{'' if s['abs_met_at_median'] else '*'}"
                           f", {s['signed_met_seeds']}/{k}{'' if s['signed_met_at_median'] else '*'}")
            lines.append(f"| {kind} | {cell} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def _kinds(text_value: str, reports: Sequence[FoldReport]) -> list[str]:
    kinds = [k.strip() for k in text_value.split(",") if k.strip()]
    if not kinds or len(set(kinds)) != len(kinds):
        raise TwinInputError(f"--folds {text_value!r}: give distinct fold kinds, e.g. {DEFAULT_KINDS}")
    for rep in reports:
        for kind in kinds:
            rep.folds(kind)             # one line naming the file and the kinds it has
    return kinds


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", type=Path, help="fidelity_real.py --json reports, one per seed")
    ap.add_argument("--folds", default=DEFAULT_KINDS,
                    help=f"comma-separated fold kinds to read (default {DEFAULT_KINDS})")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None, help="also write the cells as one markdown table here")
    args = ap.parse_args(argv)
    check_out_path(args.json, "--json")
    check_out_path(args.markdown, "--markdown")
    if len(args.reports) < 2:
        raise TwinInputError("give two or more reports (one per seed)")
    reports = [load_report(p) for p in args.reports]
    result = multi_seed(reports, _kinds(args.folds, reports))
    print(text(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if args.markdown:
        args.markdown.write_text(markdown(result) + "\n")


if __name__ == "__main__":
    run_script(main)
