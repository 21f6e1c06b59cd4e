"""The Marlin W4A16 MoE path's decode stream rate on B200 held out (issue 33, round 15; docs/fidelity.md "Round 15:
Kimi-K2.5's Marlin stream and MLA layer priors").

Two readings, nothing fitted:

* ``priors FOLD.json``: the stated priors a fold's fitted parameters give (``twin.fitting.marlin_stream_prior``: the
  Hopper Marlin path's stream rate carried to B200 at equal bytes per SM; ``twin.fitting.held_priors``: MLA's
  extra kernels, net of the norms a fused all-reduce absorbs), beside the values Kimi-K2.5's own rows read.
* ``slope``: a cross-check on Kimi-K2.5 INT4's own rows (TP 8, one ISL/OSL pair, C = 4..64; read, never used by a
  fold): the measured TPOT against the routed-expert bytes a step streams per GPU (uniform routing, 384 experts,
  top-8: ``twin.hardware.moe``), i.e. the rate at which one more touched expert costs time. A slope that sits near the
  carried rate, below the dense one, says the path streams at Marlin's per-SM rate rather than B200's.

    python benchmarks/kimi_marlin_stream.py priors K.json       # a fidelity_real.py --json report, seconds
    python benchmarks/kimi_marlin_stream.py slope [--isl 1024 --osl 1024]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.errors import run_script  # noqa: E402


def expert_bytes_per_gpu(model, tokens: int, tp: int) -> float:
    """Routed-expert weight bytes one decode step of ``tokens`` sequences streams on one GPU (INT4 g32: 0.5625 B)."""
    from twin.hardware.moe import touched_fraction
    share = touched_fraction(model.num_experts, model.num_experts_per_tok, tokens)
    return share * model.routed_expert_params * (0.5 + 2 / 32) / tp


def slope_rate(points: list[tuple[float, float]]) -> float:
    """Least-squares slope (bytes per second) of (bytes, seconds) points: bytes / (d seconds / d bytes)."""
    from benchmarks.line_fit import line_fit
    return 1.0 / line_fit(points)[1]


def print_slope(isl: int, osl: int) -> None:
    from twin.fitting.silicon import model_family, silicon_cases
    from twin.hardware.model_catalog import resolve_model
    model = resolve_model("kimi-k2.5")
    seen, points = set(), []
    for c in silicon_cases(None)[0]:
        r = c.row
        if (model_family(r.model_path) != "kimi" or (r.precision or "").lower() != "int4" or (r.isl, r.osl) != (isl, osl)
                or r.concurrency in seen or r.concurrency > 32):
            continue
        seen.add(r.concurrency)
        b = expert_bytes_per_gpu(model, r.concurrency, r.tp)
        points.append((b, r.tpot_ms / 1e3))
        print(f"  C {r.concurrency:3d} TP {r.tp}: {b / 1e9:6.2f} GB of experts per GPU per step, TPOT {r.tpot_ms:6.2f} ms")
    if len(points) < 2:
        raise SystemExit("fewer than two INT4 loads at that ISL/OSL")
    rate = slope_rate(sorted(points))
    print(f"slope over C <= 32: {rate / 1e12:.2f} TB/s per GPU (B200 datasheet 8 TB/s; a Marlin rate of H100's dense "
          f"rate per SM x 148 SMs: {3.35e12 / 132 * 148 / 1e12:.2f} TB/s at the datasheet)")


def print_priors(fold_json: Path) -> None:
    from benchmarks.fold_report import load_report
    from twin.cost.marlin_moe import MARLIN_W4A16_MOE_TERMS
    from twin.cost.mla_decode import MLA_TERMS
    from twin.fitting.held_priors import mla_layer_prior_s
    from twin.fitting.marlin_stream_prior import carried_stream_efficiency
    report = load_report(fold_json)
    for kind, fold in ((k, f) for k in report.kinds() for f in report.folds(k)):
        p = report.params(fold)
        if "memory_efficiency" not in p:
            continue
        e = carried_stream_efficiency(1.0, "hopper", "blackwell", p)
        ar = p.get("allreduce_latency_s", 24.7e-6)
        print(f"{kind} {fold['held_out']}: memory_efficiency {p['memory_efficiency']:.4f}, @blackwell "
              f"{p.get('memory_efficiency@blackwell', p['memory_efficiency']):.4f} -> Marlin stream carried from "
              f"H100 {e:.3f} (Kimi INT4 reads {MARLIN_W4A16_MOE_TERMS['moe_expert_efficiency']}); all-reduce "
              f"{1e6 * ar:.2f} us -> MLA {1e6 * mla_layer_prior_s(ar):.1f} us unfused, "
              f"{1e6 * mla_layer_prior_s(ar, fused=True):.1f} us fused (Kimi reads {1e6 * MLA_TERMS['layer_overhead_s']:.1f});"
              f" in the fold: {p.get('moe_expert_efficiency@experts_int4', '-')}, "
              f"{p.get('layer_overhead_s@mla', '-')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("priors", help="the priors a fold report's parameters give")
    p.add_argument("fold_json", type=Path)
    s = sub.add_parser("slope", help="Kimi INT4's own TPOT against the expert bytes (a cross-check, not used)")
    s.add_argument("--isl", type=positive_int, default=1024)
    s.add_argument("--osl", type=positive_int, default=1024)
    args = ap.parse_args()
    if args.cmd == "priors":
        if not args.fold_json.is_file():
            raise SystemExit(f"no such report: {args.fold_json}")
        print_priors(args.fold_json)
    else:
        print_slope(args.isl, args.osl)


if __name__ == "__main__":
    run_script(main)
