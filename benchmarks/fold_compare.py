"""Compare held-out fold results (``fidelity_real.py --json``) with the embedded defaults on the same cases
(``fidelity_real.py --defaults-only --json``): per fold kind, pooled median |error| (median signed error) of each
set and of the defaults, wins / losses per case (|error| smaller / larger than the defaults' by more than
``--threshold`` points), dense / MoE, per held-out group, and the adoption rule's verdict.

    python benchmarks/fold_compare.py DEFAULTS.json SET.json [SET2.json ...] [--threshold 0.5] [--groups]

Adoption rule (docs/fidelity.md, "Round 4"): for every fold kind, each of TTFT mean, TPOT, E2E mean and
throughput pooled |error| no worse than the defaults' + ``--tolerance`` points, and the signed median closer to
0 than the defaults' on the majority of those columns."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import finite_float  # noqa: E402
from benchmarks.error_medians import error_medians  # noqa: E402
from benchmarks.fold_report import defaults_cases as fold_report_defaults_cases, load_report  # noqa: E402
from twin.errors import run_script  # noqa: E402

METRICS = (("mean_ttft_ms", "TTFT mean"), ("median_ttft_ms", "TTFT p50"), ("mean_tpot_ms", "TPOT"),
           ("mean_e2el_ms", "E2E mean"), ("request_throughput", "throughput"))
RULE_METRICS = ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "request_throughput")


def _summary(errs: list[dict], key: str) -> tuple[float | None, float | None, int]:
    return error_medians(errs, key) or (None, None, 0)


def error_cell(errs: list[dict], key: str) -> str:
    """'median |error| (median signed error)' of ``key`` over ``errs`` in percent, '-' where no case has it."""
    a, s, _ = _summary(errs, key)
    return "-" if a is None else f"{100 * a:.1f}% ({100 * s:+.1f}%)"


def _row(label: str, errs: list[dict]) -> str:
    return f"| {label} | {len(errs)} | " + " | ".join(error_cell(errs, k) for k, _ in METRICS) + " |"


def _print_pair(label: str, names: list[str], mine: dict[str, dict], base: dict[str, dict]) -> None:
    print(_row(f"{label}, set", [mine[n] for n in names]))
    print(_row(f"{label}, defaults", [base[n] for n in names]))


def _wins(mine: dict[str, dict], base: dict[str, dict], names: list[str], key: str, thr: float) -> str:
    w = l = 0
    for n in names:
        if key in mine[n] and key in base[n]:
            d = abs(mine[n][key]) - abs(base[n][key])
            w += d < -thr
            l += d > thr
    return f"{w} / {l}"


def defaults_cases(path: Path) -> dict[str, dict]:
    """{case name: its record} of a ``fidelity_real.py --defaults-only --json`` report (``fold_report.
    defaults_cases``: every record validated, its name unique)."""
    return {c["name"]: c for c in fold_report_defaults_cases(path, need=("errors",))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("defaults", type=Path)
    ap.add_argument("sets", type=Path, nargs="+")
    ap.add_argument("--threshold", type=finite_float, default=0.5, help="points of |error| a win / loss must exceed")
    ap.add_argument("--tolerance", type=finite_float, default=0.5, help="points the rule lets a set trail the defaults")
    ap.add_argument("--groups", action="store_true", help="also each held-out group's figures")
    args = ap.parse_args()
    thr, tol = args.threshold / 100, args.tolerance / 100
    dcases = defaults_cases(args.defaults)
    derr = {n: c["errors"] for n, c in dcases.items()}
    header = "| | n | " + " | ".join(t for _, t in METRICS) + " |\n|---|---|" + "---|" * len(METRICS)
    for path in args.sets:
        rep = load_report(path)
        print(f"\n# {path.name}")
        verdict = []
        for kind in rep.kinds():
            mine: dict[str, dict] = {}
            group_of: dict[str, str] = {}
            for fold in rep.folds(kind):
                for n, e in rep.errors(fold).items():
                    mine[n] = e
                    group_of[n] = fold["held_out"]
            names = list(mine)
            missing = [n for n in names if n not in derr]
            if missing:
                raise SystemExit(f"{path}: {len(missing)} held-out cases not in {args.defaults} (e.g. {missing[0]})")
            print(f"\n## leave-one-{kind}-out\n{header}")
            print(_row("set", [mine[n] for n in names]))
            print(_row("defaults", [derr[n] for n in names]))
            print("| wins / losses | | " + " | ".join(_wins(mine, derr, names, k, thr) for k, _ in METRICS) + " |")
            for label, moe in (("dense", False), ("MoE", True)):
                _print_pair(label, [n for n in names if bool(dcases[n].get("moe")) == moe], mine, derr)
            if args.groups:
                for g in dict.fromkeys(group_of.values()):
                    _print_pair(g, [n for n in names if group_of[n] == g], mine, derr)
            worse, closer = [], 0
            for k in RULE_METRICS:
                a, s, _ = _summary([mine[n] for n in names], k)
                da, ds, _ = _summary([derr[n] for n in names], k)
                if a is None or da is None:
                    continue
                if a > da + tol:
                    worse.append(f"{dict(METRICS)[k]} {100 * a:.1f}% vs {100 * da:.1f}%")
                closer += abs(s) < abs(ds)
            ok = not worse and closer > len(RULE_METRICS) / 2
            verdict.append(ok)
            print(f"\nrule on {kind}: {'PASS' if ok else 'FAIL'}; |error| worse by > {args.tolerance} pt: "
                  f"{', '.join(worse) or 'none'}; signed closer to 0 on {closer} of {len(RULE_METRICS)}")
        print(f"\nadoption rule (every fold kind): {'PASS' if verdict and all(verdict) else 'FAIL'}")


if __name__ == "__main__":
    run_script(main)
