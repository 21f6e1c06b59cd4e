"""Does an embedded value carry to another GPU? The embedded defaults, and the same with given terms set for every
generation, on one GPU's cases (silicon every N plus the inference-perf runs on that GPU), whole runs: median
|error| (median signed) per source and family, and the cases each moved (issue 33, round 6).

    python benchmarks/transfer_check.py --gpu H100-SXM --set layer_token_overhead_s=0.2e-6
    python benchmarks/transfer_check.py --gpu H100-SXM --set eager_layer_host_s=0.84e-3,eager_moe_layer_host_s=1.15e-3
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_float, positive_int  # noqa: E402
from benchmarks.error_medians import median_cell  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import FOLDS, all_cases, errors  # noqa: E402
from twin.fitting.scoped import parse_scoped_set_options  # noqa: E402

KEYS = (("mean_ttft_ms", "TTFT mean"), ("median_ttft_ms", "TTFT p50"), ("mean_tpot_ms", "TPOT"))


def _cell(errs: list[float]) -> str:
    return median_cell(errs, "%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="H100-SXM")
    ap.add_argument("--set", required=True, help="name=value,... (model units), applied on every generation")
    ap.add_argument("--silicon-every", type=positive_int, default=3)
    ap.add_argument("--eval-sim-s", type=positive_float, default=60.0)
    ap.add_argument("--workers", type=positive_int, default=1)
    args = ap.parse_args()
    given = parse_scoped_set_options([p for p in args.set.split(",") if p.strip()])
    cases = [c for c in all_cases(silicon_every=args.silicon_every) if c.target.gpu == args.gpu]
    base = simulate_cases(cases, {}, max_sim_s=args.eval_sim_s, workers=args.workers)
    alt = simulate_cases(cases, given, max_sim_s=args.eval_sim_s, workers=args.workers)
    rows = [(FOLDS["source"](c), FOLDS["family"](c), errors(c, a.metrics), errors(c, b.metrics))
            for c, a, b in zip(cases, base, alt)]
    print(f"{len(cases)} cases on {args.gpu}; embedded defaults -> with {args.set}")
    print("| source | family | n | " + " | ".join(t for _, t in KEYS) + " |")
    print("|---|---|---|" + "---|" * len(KEYS))
    groups = sorted({(s, f) for s, f, _, _ in rows}) + [("all", "all")]
    for s, f in groups:
        part = [r for r in rows if (s, f) == ("all", "all") or (r[0], r[1]) == (s, f)]
        cells = [f"{_cell([r[2][k] for r in part if k in r[2]])} -> {_cell([r[3][k] for r in part if k in r[3]])}"
                 for k, _ in KEYS]
        print(f"| {s} | {f} | {len(part)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    run_script(main)
