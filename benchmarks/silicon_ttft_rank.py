"""Which reset terms own how many points of the silicon-held-out source fold's TTFT gap, ranked (issue 33, round 17;
docs/fidelity.md "Round 17: the silicon-held-out source fold's TTFT, term by term").

No fit, no simulation: it reads the per-case errors that ``silicon_ttft_split.py --save`` wrote (the fold's values,
the embedded defaults and variants that each restore one reset term, or one group, to its embedded value) and ranks
the variants by the points of signed TTFT mean error they give back, as the mean over the held-out rows with a TTFT
(a median hides a term whose rows sit on one side of it; the mean of per-row moves adds up); with ``--start
defaults``, the variants of ``source_fold_terms.py --direction off --save`` (the defaults less one group) by the
points they lose. Beside it: the pooled
median signed error, the share of the whole gap (fold -> embedded defaults, same rows) and the median signed error
of each H100 slice and of the B200 rows.

    python benchmarks/silicon_ttft_split.py FOLD.json --groups eager,... --prior 'label:name=value' --save X.json
    python benchmarks/silicon_ttft_rank.py X.json [--ground-truth DIR]
    python benchmarks/source_fold_terms.py FOLD.json --direction off --groups token,... --save Y.json
    python benchmarks/silicon_ttft_rank.py Y.json --start defaults
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fidelity_real import REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.fold_report import finite_number, read_json  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

KEY = "mean_ttft_ms"
BASE, DEFAULTS = "fold", "defaults"
H100_SLICES = ("gpt-oss H100-SXM", "minimax H100-SXM", "llama H100-SXM")
SHOWN = ("H100-SXM", *H100_SLICES, "B200")


def mean_signed(errs: list[dict]) -> float:
    """Mean signed TTFT error over the rows that have one."""
    xs = [e[KEY] for e in errs if KEY in e]
    if not xs:
        raise TwinInputError("no row has a TTFT error")
    return statistics.fmean(xs)


def row_moves(base: list[dict], variant: list[dict]) -> list[float]:
    """Per row with a TTFT in both: the variant's signed error minus the base's (fractions); a one-line error where
    no row has one in both."""
    if len(base) != len(variant):
        raise TwinInputError(f"variant has {len(variant)} rows, the fold {len(base)}")
    moves = [v[KEY] - b[KEY] for b, v in zip(base, variant) if KEY in b and KEY in v]
    if not moves and base:
        raise TwinInputError(f"no row has a {KEY} error in both the start and a variant")
    return moves


def slice_median(keys: list[list[str]], errs: list[dict], name: str) -> float | None:
    """Median signed TTFT error of the rows in slice ``name`` ('all' = every row), None where none has one."""
    xs = [e[KEY] for k, e in zip(keys, errs) if KEY in e and (name == "all" or name in k)]
    return statistics.median(xs) if xs else None


def ranked(errors: dict[str, list[dict]], keys: list[list[str]], start: str = BASE) -> list[dict]:
    """One entry per variant other than the fold and the defaults, largest |points| first: ``points`` (mean per-row
    move of the signed TTFT error from ``start``, the fold (variants that restore a term) or the defaults (variants
    that lose one), percent), ``share`` (points over the whole move from ``start`` to the other end; None where
    there is none), ``all`` and each slice of ``SHOWN``'s median signed error (percent), ``h100_points`` (the mean
    move over the H100 rows)."""
    if BASE not in errors or DEFAULTS not in errors:
        raise TwinInputError(f"the errors lack {BASE!r} or {DEFAULTS!r} (a silicon_ttft_split.py --save file has both)")
    if start not in (BASE, DEFAULTS):
        raise TwinInputError(f"start must be {BASE!r} or {DEFAULTS!r}, got {start!r}")
    base = errors[start]
    gap = 100 * statistics.fmean(row_moves(base, errors[DEFAULTS if start == BASE else BASE]))
    h100 = [i for i, k in enumerate(keys) if "H100-SXM" in k]
    out = []
    for label, errs in errors.items():
        if label in (BASE, DEFAULTS):
            continue
        moves = row_moves(base, errs)
        h_moves = row_moves([base[i] for i in h100], [errs[i] for i in h100]) if h100 else []
        entry = {"variant": label, "points": 100 * statistics.fmean(moves),
                 "h100_points": 100 * statistics.fmean(h_moves) if h_moves else 0.0}
        entry["share"] = entry["points"] / gap if gap else None     # no gap: no share of it
        for name in ("all", *SHOWN):
            med = slice_median(keys, errs, name)
            entry[name] = None if med is None else 100 * med
        out.append(entry)
    return sorted(out, key=lambda e: -abs(e["points"]))


def case_keys(names: list[str], ground_truth) -> list[list[str]]:
    """The slices (``silicon_ttft_split.slice_keys``) of each named silicon case, read off the ground truth."""
    from benchmarks.silicon_ttft_split import slice_keys
    from twin.fitting.joint import all_cases, source_of
    by_name = {c.run.name: c for c in all_cases(ground_truth, silicon_every=REFIT_SILICON_EVERY)
               if source_of(c) == "silicon"}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise TwinInputError(f"{len(missing)} saved case(s) are not silicon rows of this ground truth, "
                             f"e.g. {missing[0]}")
    return [slice_keys(by_name[n]) for n in names]


def read_saved(path: Path) -> tuple[list[str], dict[str, list[dict]]]:
    """(case names, {variant: per-case errors}) of a ``silicon_ttft_split.py --save`` file, validated."""
    data = read_json(path)
    names, errors = data.get("cases"), data.get("errors")
    if not isinstance(names, list) or not isinstance(errors, dict) or not all(
            isinstance(v, list) and len(v) == len(names)
            and all(isinstance(e, dict) and all(finite_number(x) for x in e.values()) for e in v)
            for v in errors.values()):
        raise TwinInputError(f"{path}: not a silicon_ttft_split.py --save file (cases, errors per variant)")
    if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise TwinInputError(f"{path}: cases must be a non-empty list of distinct case names")
    if BASE not in errors or DEFAULTS not in errors:
        raise TwinInputError(f"{path}: the errors lack {BASE!r} or {DEFAULTS!r} (a silicon_ttft_split.py --save "
                             "file has both)")
    return names, errors


def cell(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}"


def percent_cell(fraction: float | None) -> str:
    return cell(None if fraction is None else 100 * fraction)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("saved", type=Path, help="a silicon_ttft_split.py --save file")
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--start", choices=(BASE, DEFAULTS), default=BASE,
                    help="rank moves from the fold (variants restoring terms) or the defaults (variants losing them)")
    args = ap.parse_args()
    names, errors = read_saved(args.saved)
    keys = case_keys(names, args.ground_truth)
    for label in (BASE, DEFAULTS):
        if label in errors:
            mean = 100 * mean_signed(errors[label])
            print(f"{label}: median {percent_cell(slice_median(keys, errors[label], 'all'))} %, mean {mean:+.1f} %; "
                  + ", ".join(f"{s} {percent_cell(slice_median(keys, errors[label], s))}" for s in SHOWN))
    print("| variant | points (mean move) | share of gap | H100 rows' points | median all | "
          + " | ".join(SHOWN) + " |")
    print("|---" * (5 + len(SHOWN)) + "|")
    for e in ranked(errors, keys, args.start):
        share = "-" if e["share"] is None else f"{100 * e['share']:.0f} %"
        print(f"| {e['variant']} | {e['points']:+.1f} | {share} | {e['h100_points']:+.1f} | "
              f"{cell(e['all'])} | " + " | ".join(cell(e[s]) for s in SHOWN) + " |")


if __name__ == "__main__":
    run_script(main)
