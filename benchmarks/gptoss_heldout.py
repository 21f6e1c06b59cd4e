"""gpt-oss-120b held out by family (issue 33, round 7): which of its MXFP4 kernel-path values are facts that carry,
and what the held-out rows say about the others.

In the family fold that holds gpt-oss out, every fitted term of its own kernel paths (twin.cost.marlin_mxfp4,
the B200 path's fused all-reduce of twin.cost.mxfp4_path) is reset to its stated prior, while the kernel facts
with no free parameter stay (Marlin's padded token blocks, twin.cost.marlin_blocks; MXFP4 x MXFP8 at the FP8
tensor rate on Blackwell, twin.cost.mxfp4_path). The serving terms the fold fits on the other families do not act
on those entries, so the held-out gpt-oss rows can be simulated directly at the fold's fitted values (read from a
held-out report's JSON) with each path term set one way or the other: at its prior (the fold), at its embedded
value (a leak: what the term is worth), or at a physically stated alternative prior.

    python benchmarks/gptoss_heldout.py --report report.json      # a fidelity_real.py --folds family --json file
        [--every 3]                                               # every 3rd gpt-oss row (default); 1: all

Variants (each on top of the fold's values):
* ``fold``: the report's held-out prediction (every path term at its stated prior);
* ``+shapes``: the Hopper Marlin experts' efficiency at 1 / 1.138 (vLLM rounds the per-rank intermediate size to
  128 and the hidden size to 256 for Marlin: (1,536 / 1,440) x (3,072 / 2,880) = 1.138 more MMA work at TP 2-8; a
  kernel fact, no free parameter) instead of 1;
* ``+path fused AR``: both fused all-reduce latencies at their embedded values (11 us B200, 18 us H100): what
  carrying them as facts would be worth (a leak here: they were read off these rows);
* ``+experts``: the Hopper Marlin efficiency and per-token-per-layer time at their embedded values (a leak);
* ``embedded``: every path term at its embedded value (the in-sample figure);
* round 8 (``--variants`` picks a subset): ``+Marlin prior``: the Hopper Marlin efficiency at the Kimi-K2.5 INT4
  Marlin path's value carried to Hopper at equal FLOPs per SM clock (``twin.fitting.expert_path_prior``, 0.342; no
  gpt-oss row), ``+fitted AR``: both fused all-reduces at the fold's FITTED unfused latency instead of the embedded
  24.7 us (``twin.fitting.inherit_fitted``), ``round 8``: both (what the round-8 fold does); ``round 8 +token
  (leak)``: and the Marlin path's embedded 0.15 us per token per layer (what that reset is worth).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.errors import run_script  # noqa: E402

H_EFF, H_LT, H_AR = ("moe_expert_compute_efficiency@hopper+experts_mxfp4", "layer_token_overhead_s@hopper+experts_mxfp4",
                     "fused_allreduce_latency_s@hopper+experts_mxfp4")
B_AR = "fused_allreduce_latency_s@blackwell+experts_mxfp4"
MARLIN_SHAPE_FACTOR = (1536 / 1440) * (3072 / 2880)       # Marlin's rounded-up expert shapes at TP 2-8


def fold_params(report: Path, kind: str = "family", group: str = "gpt-oss") -> dict[str, float]:
    """The fitted values of ``report``'s fold of ``kind`` holding out ``group``; ``embedded``: {} (the defaults)."""
    if str(report) == "embedded":
        return {}
    from benchmarks.fold_report import fold_params as report_fold_params
    return report_fold_params(report, kind, group)


def variants(fold: dict[str, float]) -> dict[str, dict[str, float]]:
    from twin.cost.generation_experts import scoped_values
    from twin.fitting.expert_path_prior import marlin_path_prior
    from twin.fitting.provenance import embedded_entries
    emb = scoped_values()
    marlin = marlin_path_prior(H_EFF, embedded_entries(), {H_EFF})
    ar = {H_AR: fold["allreduce_latency_s"], B_AR: fold["allreduce_latency_s"]}
    return {"fold": fold,
            "+shapes": fold | {H_EFF: 1.0 / MARLIN_SHAPE_FACTOR},
            "+path fused AR": fold | {H_AR: emb[H_AR], B_AR: emb[B_AR]},
            "+experts": fold | {H_EFF: emb[H_EFF], H_LT: emb[H_LT]},
            "embedded": fold | {k: emb[k] for k in (H_EFF, H_LT, H_AR, B_AR)},
            "+Marlin prior": fold | {H_EFF: marlin}, "+fitted AR": fold | ar, "round 8": fold | {H_EFF: marlin} | ar,
            "round 8 +token (leak)": fold | {H_EFF: marlin, H_LT: emb[H_LT]} | ar}


def simulate(params: dict[str, float], every: int, gpu: str = "") -> list[dict]:
    """Every ``every``-th gpt-oss silicon row (of ``gpu``, a system prefix such as ``b200``; all where empty)
    simulated at ``params``: measured and predicted TTFT / TPOT per row."""
    from twin.fitting.fit import simulate_cases
    from twin.fitting.silicon import model_family, silicon_cases
    cases = [c for c in silicon_cases()[0]
             if model_family(c.row.model_path) == "gpt-oss" and c.row.system.startswith(gpu)][::every]
    res = simulate_cases(cases, params, max_sim_s=60.0)
    return [dict(gpu=c.row.system[:4], tp=c.row.tp, conc=c.row.concurrency, mttft=c.row.ttft_ms,
                 pttft=r.metrics["mean_ttft_ms"], mtpot=c.row.tpot_ms, ptpot=r.metrics["mean_tpot_ms"])
            for c, r in zip(cases, res)]


def _cell(rows: list[dict], metric: str) -> str:
    e = [r["p" + metric] / r["m" + metric] - 1.0 for r in rows if r["m" + metric] and r["m" + metric] > 0]
    return f"{statistics.median(map(abs, e)):.1%} ({statistics.median(e):+.1%})" if e else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, required=True)
    ap.add_argument("--every", type=positive_int, default=3)
    ap.add_argument("--variants", default="", help="comma-separated variant names (default: all)")
    args = ap.parse_args()
    only = [v.strip() for v in args.variants.split(",") if v.strip()]
    print("| variant | GPU | n | TTFT | TPOT |\n|---|---|---|---|---|")
    for name, params in variants(fold_params(args.report)).items():
        if only and name not in only:
            continue
        rows = simulate(params, args.every)
        for gpu in ("h100", "b200", None):
            rs = [r for r in rows if gpu is None or r["gpu"] == gpu]
            print(f"| {name} | {gpu or 'all'} | {len(rs)} | {_cell(rs, 'ttft')} | {_cell(rs, 'tpot')} |", flush=True)


if __name__ == "__main__":
    run_script(main)
