"""Qwen3-32B held out by family (issue 33, round 8): how much of its held-out TPOT error is the sync servers'
per-sequence host time (``twin.cost.sync_host``), which no other family's rows can identify.

In the family fold that holds Qwen3 out, ``per_seq_overhead_s@sync`` has no training row (Qwen3-32B's vLLM 0.12
servers are the data's only ones without async scheduling; the 2025-12 gpt-oss H100 rows passed
``async-scheduling: true``), so the held-out rows are costed at the fold's async ``per_seq_overhead_s``. This
simulates the held-out Qwen3 rows at the fold's values (read from a ``fidelity_real.py --folds family --json``
report) and at two leaks that say what the term is worth, NOT predictions: the fold's per-sequence time plus the
embedded 45 us exposure, and the embedded 63.7 us.

    python benchmarks/sync_heldout.py --report family.json [--every 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from benchmarks.fold_report import fold_params  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

SYNC = "per_seq_overhead_s@sync"


def main() -> None:
    from twin.cost.default_terms import SYNC_HOST_TERMS
    from twin.fitting.fit import simulate_cases
    from twin.fitting.provenance import embedded_start
    from twin.fitting.silicon import model_family, silicon_cases
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, required=True)
    ap.add_argument("--every", type=positive_int, default=1)
    args = ap.parse_args()
    fold = fold_params(args.report, "family", "qwen3")
    if "per_seq_overhead_s" not in fold:
        raise TwinInputError(f"{args.report}: the family fold holding 'qwen3' out carries no per_seq_overhead_s")
    fold.pop(SYNC, None)                         # held in the fold: its async per-sequence time
    variants = {"fold": fold,
                "+45 us (leak)": fold | {SYNC: fold["per_seq_overhead_s"] + SYNC_HOST_TERMS["sync_seq_host_s"]},
                "embedded 63.7 us (leak)": fold | {SYNC: embedded_start((SYNC,))[SYNC]}}
    cases = [c for c in silicon_cases()[0] if model_family(c.row.model_path) == "qwen3"][::args.every]
    print(f"{len(cases)} Qwen3 rows; fold per_seq_overhead_s {fold['per_seq_overhead_s'] * 1e6:.2f} us")
    print("| variant | TP | n | TPOT |\n|---|---|---|---|")
    for name, params in variants.items():
        res = simulate_cases(cases, params, max_sim_s=None)
        errs = [(c.row.tp, r.metrics["mean_tpot_ms"] / c.row.tpot_ms - 1.0) for c, r in zip(cases, res)]
        for tp in sorted({t for t, _ in errs}) + [None]:
            e = [x for t, x in errs if tp is None or t == tp]
            print(f"| {name} | {tp or 'all'} | {len(e)} | {statistics.median(map(abs, e)):.1%} "
                  f"({statistics.median(e):+.1%}) |", flush=True)


if __name__ == "__main__":
    run_script(main)
