"""How sure the held-out medians are (issue 33, round 19): seeded bootstrap intervals and a re-measurement interval for
every pooled median ``fidelity_real.py`` prints, from the per-case errors a report already holds (no simulation).

* **Bootstrap** (``RESAMPLES`` resamples, ``LEVEL`` percentile interval, seed ``SEED``): within each fold kind the
  held-out cases are resampled with replacement inside each stratum (one held-out group's dense or MoE cases: every
  group and the dense / MoE split keep their counts) and the median |error| and median signed error recomputed; the
  same for the dense and MoE subsets, their difference (MoE minus dense |error|), and each held-out group alone.
* **Measured again** (``benchmarks/repeat_scatter.py``): each silicon case's measured value replaced by a second
  measurement of its configuration, drawn from the ground truth's repeated rows (one measurement's log deviation is
  a repeat pair's log ratio over sqrt(2), with a random sign; the errors become ``(1 + e) / (1 + d) - 1``); the
  inference-perf cases, which repeat nothing, kept. Its interval is where the same medians would fall if the same
  rows were measured again with the predictions held.

A target miss is resolved when the target lies outside both intervals (``misses``).

    python benchmarks/heldout_intervals.py REPORT.json [--ground-truth DIR] [--resamples 2000] [--level 0.9]
        [--seed 0] [--markdown OUT.md] [--json OUT.json]                  # seconds
"""

from __future__ import annotations

import argparse
import math
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import bounded, check_out_path, nonneg_int, positive_int  # noqa: E402
from benchmarks.fold_report import load_report  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.hardware.name_probe import quoted  # noqa: E402
from twin.fitting.targets import ABS_TARGETS, METRICS, SIGNED_TARGET  # noqa: E402

RESAMPLES = 2000
LEVEL = 0.90
SEED = 0
SUBSETS = (("pooled", None), ("dense models", False), ("MoE models", True))
# a held-out case: (held-out group, MoE model?, silicon row?, {metric: signed error})
HeldOutCase = tuple[str, bool, bool, dict[str, float]]


def _checked(cases: Sequence[HeldOutCase]) -> None:
    for group, _, _, errs in cases:
        for metric, e in errs.items():
            if not (isinstance(e, (int, float)) and not isinstance(e, bool) and math.isfinite(e) and e > -1.0):
                raise TwinInputError(f"held-out group {group!r}: {metric} error {e!r} is not a finite number > -1")


def strata(cases: Sequence[HeldOutCase], metric: str) -> list[tuple[bool, np.ndarray, np.ndarray]]:
    """(MoE?, errors, silicon flags) of ``metric`` per stratum (held-out group x dense / MoE), in first-seen order;
    cases without the metric left out."""
    out: dict[tuple[str, bool], list[tuple[float, bool]]] = {}
    for group, moe, silicon, errs in cases:
        if metric in errs:
            out.setdefault((group, moe), []).append((errs[metric], silicon))
    return [(moe, np.array([e for e, _ in v]), np.array([s for _, s in v], dtype=bool)) for (_, moe), v in out.items()]


def bootstrap(parts: Sequence[tuple[np.ndarray, np.ndarray]], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, cases): each stratum's errors (``parts``: (errors, silicon flags)) drawn with replacement, its
    count kept, side by side."""
    return np.concatenate([e[rng.integers(0, len(e), (resamples, len(e)))] for e, _ in parts], axis=1)


def remeasured(parts: Sequence[tuple[np.ndarray, np.ndarray]], log_ratios: Sequence[float], draws: int,
               rng: np.random.Generator) -> np.ndarray:
    """(draws, cases): the errors were each silicon case measured again (``log_ratios``: the repeat pairs'); the
    others unchanged."""
    e = np.concatenate([p[0] for p in parts])
    silicon = np.concatenate([p[1] for p in parts])
    pool = np.asarray(log_ratios, dtype=float) / math.sqrt(2.0)
    dev = pool[rng.integers(0, len(pool), (draws, len(e)))] * rng.choice((-1.0, 1.0), (draws, len(e)))
    return np.where(silicon, (1.0 + e) / np.exp(dev) - 1.0, e)


def interval(samples: np.ndarray, level: float) -> list[float]:
    tail = (1.0 - level) / 2.0
    return [float(np.quantile(samples, tail)), float(np.quantile(samples, 1.0 - tail))]


def medians(draws: np.ndarray, level: float) -> dict[str, list[float]]:
    """The ``level`` intervals of the median |error| and median signed error over ``draws`` (rows)."""
    return {"abs": interval(np.median(np.abs(draws), axis=1), level), "signed": interval(np.median(draws, axis=1),
                                                                                         level)}


def point(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    e = np.concatenate([p[0] for p in parts])
    return {"abs": float(np.median(np.abs(e))), "signed": float(np.median(e))}


def stream(seed: int, *names: str) -> np.random.Generator:
    """A generator of its own for one computation (``names``: what it resamples), so that each interval depends on
    the seed and its own cases only, not on which other intervals were drawn before it."""
    return np.random.default_rng([seed, *(zlib.crc32(n.encode()) for n in names)])


def subset_cells(cases: Sequence[HeldOutCase], metric: str, resamples: int, level: float, seed: int, tag: str,
                 repeats: dict[str, Sequence[float]] | None) -> tuple[dict[str, dict], dict[str, np.ndarray]]:
    """Per subset (pooled, dense, MoE) with ``metric``: n, the point medians, their bootstrap intervals and, where
    ``repeats`` has the metric's repeat pairs and the subset a silicon case, their measured-again intervals; and the
    draws (by label; a measured-again one's label ends in `` again``)."""
    parts = strata(cases, metric)
    cells: dict[str, dict] = {}
    draws: dict[str, np.ndarray] = {}
    for label, moe in SUBSETS:
        sub = [(e, s) for m, e, s in parts if moe is None or m == moe]
        if not sub:
            continue
        draws[label] = bootstrap(sub, resamples, stream(seed, tag, metric, label))
        cells[label] = {"n": int(sum(len(p[0]) for p in sub)), **point(sub), "bootstrap": medians(draws[label], level)}
        pool = (repeats or {}).get(metric)
        if pool and any(p[1].any() for p in sub):
            draws[label + " again"] = remeasured(sub, pool, resamples, stream(seed, tag, metric, label, "again"))
            cells[label]["measured_again"] = medians(draws[label + " again"], level)
    return cells, draws


def difference(cells: dict[str, dict], draws: dict[str, np.ndarray], level: float) -> dict | None:
    """MoE minus dense median |error|: the point and its intervals (``subset_cells``'s); None without both."""
    if "dense models" not in cells or "MoE models" not in cells:
        return None
    out = {"point": cells["MoE models"]["abs"] - cells["dense models"]["abs"]}
    for key, suffix in (("bootstrap", ""), ("measured_again", " again")):
        moe, dense = draws.get("MoE models" + suffix), draws.get("dense models" + suffix)
        if moe is not None and dense is not None:
            out[key] = interval(np.median(np.abs(moe), axis=1) - np.median(np.abs(dense), axis=1), level)
    return out


def kind_intervals(cases: Sequence[HeldOutCase], *, resamples: int = RESAMPLES, level: float = LEVEL,
                   seed: int = SEED, repeats: dict[str, Sequence[float]] | None = None) -> dict:
    """Per subset (pooled, dense, MoE) and metric, ``subset_cells``'s cells; the MoE - dense |error| difference over
    every case and over the silicon rows alone (``moe_minus_dense``, ``moe_minus_dense_silicon``: the inference-perf
    runs are dense but for Mixtral, and their throughput is their offered rate); each held-out group's bootstrap
    interval. Seeded: the same cases and seed give the same intervals."""
    if resamples < 1 or not 0.0 < level < 1.0:
        raise TwinInputError(f"resamples {resamples!r} must be >= 1 and level {level!r} in (0, 1)")
    if not cases:
        raise TwinInputError("no held-out cases (an empty fold kind): nothing to resample")
    _checked(cases)
    out: dict = {label: {} for label, _ in SUBSETS}
    out["moe_minus_dense"], out["moe_minus_dense_silicon"], out["groups"] = {}, {}, {}
    silicon = [c for c in cases if c[2]]
    for metric, _ in METRICS:
        cells, draws = subset_cells(cases, metric, resamples, level, seed, "all", repeats)
        for label, cell in cells.items():
            out[label][metric] = cell
        for key, diff in (("moe_minus_dense", difference(cells, draws, level)),
                          ("moe_minus_dense_silicon", difference(*subset_cells(silicon, metric, resamples, level,
                                                                                 seed, "silicon", repeats), level))):
            if diff is not None:
                out[key][metric] = diff
    for group in dict.fromkeys(c[0] for c in cases):
        mine = [c for c in cases if c[0] == group]
        out["groups"][group] = {}
        for metric, _ in METRICS:
            vals = [c[3][metric] for c in mine if metric in c[3]]
            if vals:
                part = [(np.array(vals), np.zeros(len(vals), dtype=bool))]
                out["groups"][group][metric] = {"n": len(vals), **point(part),
                                                "bootstrap": medians(bootstrap(part, resamples, stream(
                                                    seed, "group", group, metric)), level)}
    return out


def case_of(info: dict, name: str, source: str = "the report"):
    """``info``'s entry for a report's case ``name`` (a capped silicon run's `` [n/N]`` suffix ignored: the report
    may have been made with ``--silicon-max-requests``); a case it lacks is one line."""
    for key in (name, name.split(" [", 1)[0]):
        if key in info:
            return info[key]
    raise TwinInputError(f"{source}: case {quoted(name)} is not in the ground truth (--ground-truth?)")


def report_cases(report, kind: str, info: dict[str, tuple[bool, bool]]) -> list[HeldOutCase]:
    """A saved report's held-out cases of ``kind`` (``fold_report.FoldReport``); ``info``: case name -> (MoE model?,
    silicon row?), from the ground truth (``case_of``)."""
    return [(fold["held_out"], *case_of(info, name, report.source), errs)
            for fold in report.folds(kind) for name, errs in report.errors(fold).items()]


def _where(iv: list[float] | None, target: float, miss_above: bool) -> str | None:
    """Where an interval lies against ``target``: "past" (wholly on the miss side: above it where ``miss_above``,
    else below), "short" (wholly on the met side) or "across"; None without an interval."""
    if iv is None:
        return None
    lo, hi = (iv[0], iv[1]) if miss_above else (-iv[1], -iv[0])
    t = target if miss_above else -target
    return "past" if lo > t else "short" if hi <= t else "across"


def _verdict(miss: bool, places: list[str | None]) -> str | None:
    """A target check's verdict from its intervals' places (bootstrap, measured again); None for a met target that
    both intervals clear."""
    across = [n for n, p in zip(("bootstrap", "measured-again"), places) if p == "across"]
    if not miss:
        return "met; the " + " and ".join(across) + " interval" + ("s reach" if len(across) > 1 else " reaches") \
            + " past the target" if across else None
    if not across:
        return "NOT met, outside " + ("both intervals" if None not in places
                                      else "the bootstrap interval (no measured-again one)")
    return "NOT met, the target inside the " + " and ".join(across) + " interval" + ("s" if len(across) > 1 else "")


def misses(kind: str, ints: dict) -> list[dict]:
    """Each target a kind's pooled medians miss, and each they meet with an interval reaching past it: the column,
    the figure, the target, both intervals and the verdict (``_verdict``)."""
    rows = []
    for metric, title in METRICS:
        cell = ints["pooled"].get(metric)
        if cell is None:
            continue
        checks = [("abs error", cell["abs"], ABS_TARGETS[metric], "abs", True)]
        above = cell["signed"] > 0
        checks.append(("signed", cell["signed"], SIGNED_TARGET if above else -SIGNED_TARGET, "signed", above))
        for what, value, target, key, up in checks:
            ivs = [cell["bootstrap"][key], (cell.get("measured_again") or {}).get(key)]
            verdict = _verdict(value > target if up else value < target, [_where(iv, target, up) for iv in ivs])
            if verdict:
                rows.append({"kind": kind, "column": title, "what": what, "value": value, "target": target,
                             "bootstrap": ivs[0], "measured_again": ivs[1], "verdict": verdict})
        for key, what in (("moe_minus_dense", "MoE - dense abs error"),
                          ("moe_minus_dense_silicon", "MoE - dense abs error, silicon rows")):
            diff = ints.get(key, {}).get(metric)
            if diff is None:
                continue
            ivs = [diff["bootstrap"], diff.get("measured_again")]
            verdict = _verdict(diff["point"] > 0, [_where(iv, 0.0, True) for iv in ivs])
            if verdict:
                rows.append({"kind": kind, "column": title, "what": what, "value": diff["point"], "target": 0.0,
                             "bootstrap": ivs[0], "measured_again": ivs[1], "verdict": verdict})
    return rows


def _iv(iv: list[float] | None) -> str:
    return "-" if iv is None else f"[{100 * iv[0]:+.1f}, {100 * iv[1]:+.1f}]"


def _ivu(iv: list[float] | None) -> str:
    return "-" if iv is None else f"[{100 * iv[0]:.1f}, {100 * iv[1]:.1f}]"


def markdown(intervals: dict) -> str:
    """Two tables: each kind's pooled / dense / MoE medians with their bootstrap intervals, then ``misses``."""
    head = intervals["method"]
    lines = [head, "", "| fold | cases | n | " + " | ".join(t for _, t in METRICS) + " |",
             "|" + "---|" * (3 + len(METRICS))]
    for kind, ints in intervals["kinds"].items():
        for label, _ in SUBSETS:
            cells = [ints[label].get(m) for m, _ in METRICS]
            n = max((c["n"] for c in cells if c), default=0)
            lines.append(f"| {kind} | {label} | {n} | " + " | ".join(
                "-" if c is None else f"{100 * c['abs']:.1f}% {_ivu(c['bootstrap']['abs'])} "
                f"({100 * c['signed']:+.1f}% {_iv(c['bootstrap']['signed'])})" for c in cells) + " |")
    lines += ["", "| fold | column | what | value | target | bootstrap | measured again | verdict |",
              "|---|---|---|---|---|---|---|---|"]
    for r in (r for ints in intervals["kinds"].values() for r in ints["misses"]):
        lines.append(f"| {r['kind']} | {r['column']} | {r['what']} | {100 * r['value']:+.1f}% | "
                     f"{100 * r['target']:+.0f}% | {_iv(r['bootstrap'])} | {_iv(r['measured_again'])} | "
                     f"{r['verdict']} |")
    return "\n".join(lines)


def report_intervals(kinds: dict[str, Sequence[HeldOutCase]], repeats: dict[str, Sequence[float]] | None, *,
                     resamples: int = RESAMPLES, level: float = LEVEL, seed: int = SEED) -> dict:
    """The intervals of each fold kind's held-out cases (a kind without any left out), with their ``misses``, and a
    line saying how they were made (the new ``intervals`` key of a ``fidelity_real.py --json`` report)."""
    pairs = {m: len(v) for m, v in (repeats or {}).items()}
    method = (f"Held-out medians with {100 * level:.0f} % intervals: bootstrap over the held-out cases ({resamples} "
              f"resamples within each held-out group's dense / MoE cases, seed {seed}); 'measured again': the silicon "
              "rows' measured values drawn again from the ground truth's repeated configurations (pairs: "
              + (", ".join(f"{m} {n}" for m, n in pairs.items()) or "none") + "). Percent; [low, high].")
    out: dict = {"level": level, "resamples": resamples, "seed": seed, "repeat_pairs": pairs, "method": method,
                 "kinds": {}}
    for kind, cases in kinds.items():
        if not cases:           # a kind whose groups --groups left out: nothing held out, no interval
            continue
        ints = kind_intervals(cases, resamples=resamples, level=level, seed=seed, repeats=repeats)
        ints["misses"] = misses(kind, ints)
        out["kinds"][kind] = ints
    return out


def case_info(cases) -> dict[str, tuple[bool, bool]]:
    """Case name -> (MoE model?, silicon row?) of ``twin.fitting.joint`` cases."""
    from twin.fitting.joint import SOURCE_SILICON, source_of
    from twin.hardware.catalog import resolve_model
    return {c.run.name: (resolve_model(c.target.model).is_moe, source_of(c) == SOURCE_SILICON) for c in cases}


def add_intervals(report: dict, cases, ground_truth: Path | None, silicon=None, source: str = "the report",
                  **kw) -> str:
    """``report_intervals`` of a ``fidelity_real.py`` report (dict, its folds' per-case errors) as its new
    ``intervals`` key; returns the markdown. ``cases``: the report's ``twin.fitting.joint`` cases; ``silicon``:
    every runnable silicon row's case (``silicon.silicon_cases``), where the caller has them; ``source`` names the
    report in messages (its file)."""
    from benchmarks.fold_report import FoldReport
    from benchmarks.repeat_scatter import deviation_pool
    rep = FoldReport(report, source)
    info = case_info(cases)
    report["intervals"] = report_intervals({k: report_cases(rep, k, info) for k in rep.kinds()},
                                           deviation_pool(ground_truth, cases=silicon), **kw)
    return markdown(report["intervals"])


def add_bootstrap_options(ap: argparse.ArgumentParser, json_help: str) -> None:
    """The options a bootstrap script over saved reports shares (this one, ``paired_change``): the ground truth,
    the draws (``--resamples``, ``--level``, ``--seed``) and the two output files."""
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--resamples", type=positive_int, default=RESAMPLES)
    ap.add_argument("--level", type=bounded(False, 0.0, low_open=True, high=0.999), default=LEVEL)
    ap.add_argument("--seed", type=nonneg_int, default=SEED)
    ap.add_argument("--markdown", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help=json_help)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="a fidelity_real.py --json report")
    add_bootstrap_options(ap, "write the intervals (the report's new key) here")
    args = ap.parse_args()
    check_out_path(args.markdown, "--markdown")
    check_out_path(args.json, "--json")
    import json
    from twin.fitting.joint import all_cases
    report = load_report(args.report)
    text = add_intervals(report.data, all_cases(args.ground_truth), args.ground_truth, resamples=args.resamples,
                         level=args.level, seed=args.seed, source=report.source)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.json:
        args.json.write_text(json.dumps(report.data["intervals"], indent=1))


if __name__ == "__main__":
    run_script(main)
