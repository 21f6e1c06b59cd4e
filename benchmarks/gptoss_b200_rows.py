"""gpt-oss-120b's B200 rows held out, row by row (issue 33, round 11): which of a fold's values carries each row's
TPOT error.

``benchmarks/gptoss_b200_levers.py`` gives medians over a slice; this prints, for each held-out gpt-oss B200 row of a
``fidelity_real.py --json`` report's fold (the report's own rows; ``--every N``: every N-th gpt-oss B200 row instead),
the measured TPOT and the signed TPOT / TTFT error at the fold's values and with ONE value switched at a time to its
embedded (in-sample) value: the same variants as ``gptoss_b200_levers.variants`` (every one but ``fold`` and the
stated priors is a LEAK: what a term is worth, not a prediction).

    python benchmarks/gptoss_b200_rows.py --report X.json --kind family --group gpt-oss [--every 3] [--variants a,b]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.cli_checks import nonneg_int  # noqa: E402
from twin.errors import run_script  # noqa: E402

from gptoss_b200_levers import variants  # noqa: E402
from gptoss_heldout import fold_params  # noqa: E402


def held_rows(report: Path, kind: str, group: str, every: int) -> list:
    """The fold's held-out gpt-oss B200 cases (``every`` > 0: every ``every``-th gpt-oss B200 row instead)."""
    from twin.fitting.silicon import model_family, silicon_cases
    cases = [c for c in silicon_cases()[0]
             if model_family(c.row.model_path) == "gpt-oss" and c.row.system.startswith("b200")]
    if every:
        return cases[::every]
    from benchmarks.fold_report import load_report
    rep = load_report(report)
    held = rep.errors(rep.fold(kind, group))
    return [c for c in cases if c.row.id in held]


def label(row) -> str:
    return f"{row.isl // 1024}k/{row.osl // 1024}k C{row.concurrency} TP{row.tp} {row.vllm_version or '-'}"


def main() -> None:
    from twin.fitting.fit import simulate_cases
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, required=True)
    ap.add_argument("--kind", default="family")
    ap.add_argument("--group", default="gpt-oss")
    ap.add_argument("--every", type=nonneg_int, default=0)
    ap.add_argument("--variants", default="", help="comma-separated variant names (default: all)")
    args = ap.parse_args()
    only = [v.strip() for v in args.variants.split(",") if v.strip()]
    cases = held_rows(args.report, args.kind, args.group, args.every)
    table = {}
    for name, params in variants(fold_params(args.report, args.kind, args.group)).items():
        if only and name not in only:
            continue
        table[name] = simulate_cases(cases, params, max_sim_s=60.0)
    names = list(table)
    print("| row | TPOT ms | " + " | ".join(names) + " |\n|---|---|" + "---|" * len(names))
    for i, c in enumerate(cases):
        cells = [f"{table[n][i].metrics['mean_tpot_ms'] / c.row.tpot_ms - 1:+.1%} / "
                 f"{table[n][i].metrics['mean_ttft_ms'] / c.row.ttft_ms - 1:+.1%}" for n in names]
        print(f"| {label(c.row)} | {c.row.tpot_ms:.2f} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    run_script(main)
