"""What each term a family fold changes carries of its held-out throughput error (issue 33, round 18;
docs/fidelity.md "Round 18: the family fold's throughput (issue 33)"). A reading: no fit, nothing embedded.

The family fold holding ``--group`` out is simulated at its own parameters (a ``fidelity_real.py --json`` report),
then with ONE of its parameters that differ from the embedded defaults (fitted on the other families, or reset to
a prior by its plan) set back to the embedded value (``twin.fitting.provenance.embedded_start``), one at a time.
The embedded values read the held-out family's own rows, so a line says what that term carries of the fold's
error, not what a prior should be. Per setting: the fold's median |error| (signed) of TTFT, TPOT, E2E and
throughput over its held-out cases, and the family kind's pooled throughput median with those cases replaced.

    python benchmarks/fidelity_real.py --workers 2 --json R.json          # or any report with the family folds
    python benchmarks/family_thr_terms.py R.json --group kimi             # ~2 min (8 cases)
    python benchmarks/family_thr_terms.py R.json --group minimax          # ~8 min (19 cases)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from twin.errors import TwinInputError, run_script  # noqa: E402
from benchmarks.cli_checks import positive_int  # noqa: E402
from benchmarks.fold_report import load_report  # noqa: E402
from benchmarks.kimi_family_mla import cell, medians, pooled  # noqa: E402

GROUPS = ("kimi", "minimax", "gpt-oss", "llama", "qwen3", "mixtral")
MIN_REL_CHANGE = 0.01      # a parameter within 1 % of its embedded value is left out (it carries nothing)
SHOWN = ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "request_throughput")


def moved_terms(params: dict[str, float], embedded: dict[str, float]) -> list[tuple[str, float, float]]:
    """(name, fold value, embedded value) of the fold's parameters more than ``MIN_REL_CHANGE`` from embedded."""
    out = []
    for name, value in sorted(params.items()):
        if name not in embedded:
            continue
        ref = embedded[name]
        if abs(value - ref) > MIN_REL_CHANGE * max(abs(ref), abs(value)):
            out.append((name, value, ref))
    return out


def run(report_path: Path, group: str, workers: int) -> None:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import all_cases, errors, family_of
    from twin.fitting.provenance import embedded_start
    report = load_report(report_path)
    fold = report.fold("family", group)
    params, reported = report.params(fold), report.errors(fold)
    cases = [c for c in all_cases(silicon_every=report.silicon_every(16))
             if family_of(c) == group and c.run.name in reported]
    if not cases:
        raise TwinInputError(f"{report_path}: the family fold holding {group} out names none of its cases")
    embedded = embedded_start(tuple(params))
    terms = moved_terms(params, embedded)
    print(f"family fold holding {group} out: {len(cases)} cases, {len(terms)} parameters off the embedded values")
    settings = [("the fold", {})] + [(f"{n} {v:.4g} -> {r:.4g}", {n: r}) for n, v, r in terms]
    for label, override in settings:
        t0 = time.perf_counter()
        res = simulate_cases(cases, {**params, **override}, seed=0, max_sim_s=60.0, workers=workers)
        errs = {c.run.name: errors(c, r.metrics) for c, r in zip(cases, res)}
        s, p = medians(list(errs.values())), pooled(report, "family", errs)["request_throughput"]
        print(f"{label[:70]:70} " + " | ".join(cell(s[m]) for m in SHOWN) + f" | pooled thr {cell(p)}"
              f"  ({time.perf_counter() - t0:.0f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="a fidelity_real.py --json report with the family folds")
    ap.add_argument("--group", choices=GROUPS, required=True)
    ap.add_argument("--workers", type=positive_int, default=1)
    args = ap.parse_args()
    run(args.report, args.group, args.workers)


if __name__ == "__main__":
    run_script(main)
