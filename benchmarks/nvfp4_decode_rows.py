"""The MiniMax-M2.5 NVFP4 B200 rows' decode with round 15's two facts switched on (issue 33, round 15; docs/fidelity.md
"Round 15: the NVFP4 decode on Blackwell"), each switched by ``--facts``:

* ``no-qk``: the q / k norm all-reduce back at the whole fitted all-reduce latency on every path (round 14's
  pricing; embedded since round 15: the exchange's latency on Blackwell's NVFP4 expert path,
  ``twin.cost.qk_norm_allreduce.QK_EXCHANGE_PATHS``);
* ``bf16-attention``: the checkpoint's bf16 attention projections (``twin.fitting.silicon_layout.
  MINIMAX_NVFP4_CHECKPOINT_GROUPS``; not embedded).

``rows`` (default): the rows' TPOT and TTFT at the embedded defaults with ``--facts`` on, in-sample (nothing
fitted). Rows are deduplicated by (release, date, TP, DP, ISL, OSL, CONC, measured TTFT): the file repeats some
runs under two labels. Per row the signed errors (predicted / measured - 1), then medians by load.
``heldout``: ``benchmarks/fidelity_real.py`` in this process with ``--facts`` on (everything after ``--``).

    python benchmarks/nvfp4_decode_rows.py --facts bf16-attention            # ~5 min on a busy machine
    python benchmarks/nvfp4_decode_rows.py --facts bf16-attention heldout -- --ground-truth ../shared/ground-truth \
        --workers 1 --folds GPU --groups B200 --json X.json                     # ~20-40 min on 2 busy cores
"""

from __future__ import annotations

import argparse
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fidelity_passthrough import run_fidelity_real, split_at_dashes  # noqa: E402
from twin.errors import run_script  # noqa: E402

FACTS = ("no-qk", "bf16-attention")


def facts(text: str) -> tuple[str, ...]:
    """``--facts``: comma-separated names from ``FACTS`` (empty: none); a one-line error otherwise."""
    from twin.errors import TwinInputError
    names = tuple(n for n in text.split(",") if n)
    bad = [n for n in names if n not in FACTS]
    if bad:
        raise TwinInputError(f"--facts: unknown {', '.join(bad)}; allowed: {', '.join(FACTS)}")
    return names


def minimax_nvfp4_cases(ground_truth: Path | None) -> list:
    """One case per distinct MiniMax-M2.5 NVFP4 B200 run."""
    from twin.fitting.silicon import model_family, silicon_cases
    out, seen = [], set()
    for c in silicon_cases(ground_truth)[0]:
        w = c.row
        if w.system != "b200_sxm" or (w.precision or "").lower() != "fp4" or model_family(w.model_path) != "minimax":
            continue
        key = (w.vllm_version, w.measured, w.tp, w.attention_dp, w.isl, w.osl, w.concurrency, w.ttft_ms)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def patches(names: tuple[str, ...]) -> list:
    """The patches that switch the named facts on (started before any case is built; carried to every simulation
    worker)."""
    from twin.fitting.carried_patches import Patch, carried
    from twin.fitting.silicon_layout import MINIMAX_NVFP4_CHECKPOINT_GROUPS
    out = []
    if "no-qk" in names:
        out.append(carried(Patch("twin.cost.qk_norm_allreduce", "QK_EXCHANGE_PATHS", frozenset())))
    if "bf16-attention" in names:
        out.append(carried(Patch("twin.fitting.silicon_layout", "MINIMAX_NVFP4_GROUPS",
                                 MINIMAX_NVFP4_CHECKPOINT_GROUPS)))
    return out


def records(ground_truth: Path | None) -> list[dict]:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import default_start
    cases = minimax_nvfp4_cases(ground_truth)
    results = simulate_cases(cases, default_start(), max_sim_s=60.0)
    return [{"release": (c.row.vllm_version or "-")[:10], "date": c.row.measured or "-", "tp": c.row.tp,
             "dp": c.row.attention_dp, "isl": c.row.isl, "conc": c.row.concurrency,
             "tpot": r.metrics["mean_tpot_ms"] / c.row.tpot_ms - 1.0,
             "ttft": r.metrics["mean_ttft_ms"] / c.row.ttft_ms - 1.0} for c, r in zip(cases, results)]


def summary(recs: list[dict]) -> list[str]:
    out = []
    for metric in ("tpot", "ttft"):
        for label, keep in (("all", lambda r: True), ("CONC <= 16", lambda r: r["conc"] <= 16),
                            ("CONC > 16", lambda r: r["conc"] > 16)):
            v = [r[metric] for r in recs if keep(r)]
            if v:
                out.append(f"{metric.upper():4s} {label:10s} n={len(v):3d}  |error| "
                           f"{statistics.median(map(abs, v)):6.1%}  signed {statistics.median(v):+6.1%}")
    return out


def main() -> None:
    own, rest = split_at_dashes(sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", nargs="?", choices=("rows", "heldout"), default="rows")
    ap.add_argument("--facts", default="", help=f"comma-separated, of {', '.join(FACTS)} (default: none)")
    ap.add_argument("--ground-truth", type=Path, default=None)
    args = ap.parse_args(own)
    with ExitStack() as stack:
        for p in patches(facts(args.facts)):
            stack.enter_context(p)
        if args.mode == "heldout":
            run_fidelity_real(rest)
            return
        recs = records(args.ground_truth)
    for r in sorted(recs, key=lambda r: (r["release"], r["date"], r["tp"], r["isl"], r["conc"])):
        print(f"{r['release']:10s} {r['date']:10s} TP{r['tp']} DP{r['dp']} {r['isl']:5d} C{r['conc']:4d}  "
              f"TPOT {r['tpot']:+6.1%}  TTFT {r['ttft']:+6.1%}")
    print("\n".join(summary(recs)))


if __name__ == "__main__":
    run_script(main)
