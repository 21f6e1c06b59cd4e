"""gpt-oss-120b's B200 rows held out (issue 33, round 10): what each of the fold's values is worth on them.

A fold that holds gpt-oss out (``--kind family --group gpt-oss``) or the B200 rows out (``--kind GPU --group B200``)
predicts the gpt-oss B200 rows at its fitted serving terms and its stated priors; this script simulates every
``--every``-th gpt-oss B200 row at that fold's values (read from a ``fidelity_real.py --json`` report) with ONE
value changed at a time, to say which of them the held-out TPOT error sits in. Every variant but ``fold`` and the
stated priors is a LEAK (a value read off the rows being predicted, or the embedded default): it measures what a
term is worth, it is not a prediction.

    python benchmarks/gptoss_b200_levers.py --report X.json --kind family --group gpt-oss [--every 2] [--gpu b200]
    python benchmarks/gptoss_b200_levers.py --report embedded --gpu h100 --variants fold,"decode share 0"   # in-sample

Variants: ``fold``; ``fused AR 11 us (leak)``: the B200 MXFP4 path's embedded fused all-reduce; ``bandwidth 0.978
(leak)``: Blackwell's decode weight-stream fraction at the embedded (unscoped) value; ``step 1.74 ms (leak)``,
``per-seq 18.7 us (leak)``: the embedded serving terms; ``decode share 0``: the per-token-per-layer cost on prompt
tokens only (``layer_token_decode_share@blackwell+experts_mxfp4``, twin.cost.decode_tokens).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.errors import run_script  # noqa: E402

from gptoss_heldout import B_AR, _cell, fold_params, simulate  # noqa: E402  (the round-7 script's rows, cells)

SHARE = "layer_token_decode_share@blackwell+experts_mxfp4"


def variants(fold: dict[str, float], generation: str = "blackwell") -> dict[str, dict[str, float]]:
    from twin.cost.generation_experts import scoped_values
    from twin.fitting.provenance import embedded_start
    emb = scoped_values()
    start = embedded_start(("memory_efficiency", "step_overhead_s", "per_seq_overhead_s"))
    return {"fold": fold,
            "fused AR 11 us (leak)": fold | {B_AR: emb[B_AR]},
            "bandwidth 0.978 (leak)": fold | {"memory_efficiency@blackwell": start["memory_efficiency"]},
            "step 1.74 ms (leak)": fold | {"step_overhead_s": start["step_overhead_s"]},
            "per-seq 18.7 us (leak)": fold | {"per_seq_overhead_s": start["per_seq_overhead_s"]},
            "decode share 0": fold | {SHARE.replace("blackwell", generation): 0.0}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, required=True)
    ap.add_argument("--kind", default="family")
    ap.add_argument("--group", default="gpt-oss")
    ap.add_argument("--every", type=positive_int, default=2)
    ap.add_argument("--gpu", default="b200")
    ap.add_argument("--variants", default="", help="comma-separated variant names (default: all)")
    args = ap.parse_args()
    only = [v.strip() for v in args.variants.split(",") if v.strip()]
    print("| variant | n | TPOT | TPOT C <= 16 | TPOT C >= 32 | TTFT |\n|---|---|---|---|---|---|")
    generation = "hopper" if args.gpu == "h100" else "blackwell"
    for name, params in variants(fold_params(args.report, args.kind, args.group), generation).items():
        if only and name not in only:
            continue
        rows = simulate(params, args.every, args.gpu)
        lo, hi = [r for r in rows if r["conc"] <= 16], [r for r in rows if r["conc"] >= 32]
        print(f"| {name} | {len(rows)} | {_cell(rows, 'tpot')} | {_cell(lo, 'tpot')} | {_cell(hi, 'tpot')} | "
              f"{_cell(rows, 'ttft')} |", flush=True)


if __name__ == "__main__":
    run_script(main)
