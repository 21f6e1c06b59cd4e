"""Is Blackwell's per-token prompt cost a GEMM efficiency? (issue 33, round 16; docs/fidelity.md "Round 16: Blackwell's
per-token prompt cost as a GEMM fraction").

No simulation, no fit of the twin. Round 9's light-load reading (``layer_token_reading.readings``: per group of CONC = 4
rows that differ only in the prompt length, X = the time per prompt token the twin lacks with
``layer_token_overhead_s`` at 0) is set beside the twin's own GEMM time per prompt token at the row's TP (G, dense and
expert GEMMs at ``compute_efficiency`` = ce of each group's datasheet rate). If X were the gap between the datasheet
and what the prompt GEMMs reach, the fraction they reach,

    f = ce x G / (G + X),

would be one number per generation and format (a property of the kernels), the same across model sizes and close to
it across TP. A time per token per layer that the GEMMs do not explain makes f fall with TP and with the model's FLOPs
per layer instead. The script prints f per reading and its spread per GPU and format, beside the stated kernel-level
figure (``CUTLASS_SM100_PEAK_SHARE``).

    python benchmarks/silicon_gemm_fraction.py [--conc 4]
"""

from __future__ import annotations

import argparse
import collections
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from benchmarks.layer_token_reading import readings  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.joint import JOINT_NAMES, default_start  # noqa: E402

# CUTLASS 3.8 + CUDA 12.8 on an SM100 GPU, a 16384 x 17920 x 16384 GEMM: the share of the theoretical tensor peak
# (at the power-limited clock) its kernels reach, by operand type; read off the bar chart in CUTLASS's README
# (media/images/cutlass-3.8-blackwell-gemm-peak-performance.svg, bar heights against the 0-100 % grid). Kernel
# documentation, not a serving measurement: it says what Blackwell's tensor cores reach on a large GEMM.
CUTLASS_SM100_PEAK_SHARE: dict[str, float] = {"nvfp4": 0.885, "mxfp4": 0.919, "mxfp8": 0.983, "int8": 0.933,
                                              "fp8": 0.912, "fp16": 0.969, "bf16": 0.942, "tf32": 0.958}


def reached_fraction(ce: float, gemm_s: float, missing_s: float) -> float:
    """The fraction of the datasheet the prompt GEMMs would reach if the missing time per token ``missing_s`` were
    all GEMM time: ``ce x G / (G + X)`` (G: the twin's GEMM time per token at fraction ``ce``)."""
    if not (0.0 < ce <= 1.0) or gemm_s <= 0.0 or missing_s < 0.0:
        raise TwinInputError(f"reached_fraction: need 0 < ce <= 1, G > 0, X >= 0 (got {ce}, {gemm_s}, {missing_s})")
    return ce * gemm_s / (gemm_s + missing_s)


def fraction_rows(rows: list[dict], ce: float) -> list[dict]:
    """Each reading with a finite X (EP 1, DP 1): its GEMM and missing time per token per layer and ``f``."""
    out = []
    for r in rows:
        if not math.isfinite(r["x_s"]) or r["ep"] != 1 or r["dp"] != 1 or r["gemm_s"] <= 0.0:
            continue
        out.append(r | {"gemm_layer_s": r["gemm_s"] / r["layers"], "x_layer_s": r["x_s"] / r["layers"],
                        "fraction": reached_fraction(ce, r["gemm_s"], r["x_s"])})
    return out


def spread(rows: list[dict]) -> dict[tuple[str, str], tuple[int, float, float]]:
    """{(GPU, format): (readings, lowest f, highest f)}."""
    by: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for r in rows:
        by[(r["gpu"], r["precision"])].append(r["fraction"])
    return {k: (len(v), min(v), max(v)) for k, v in sorted(by.items())}


def per_layer_fit(rows: list[dict], by_family: bool = False) -> dict[str, tuple[int, float, float, float]]:
    """Per GPU (and family with ``by_family``), pooled over the rest (formats, TP): least squares of
    ``X/layer = a + b x G/layer`` ->
    (readings, a s, b, rms s). A GEMM fraction is ``a = 0`` (b = ce / f - 1); a time per token per layer the GEMMs
    do not explain is ``a``."""
    by: dict[str, list[dict]] = collections.defaultdict(list)
    for r in rows:
        by[f"{r['gpu']} {r['family']}" if by_family else f"{r['gpu']} (all)"].append(r)
    out = {}
    for gpu, rs in sorted(by.items()):
        g = np.array([r["gemm_layer_s"] for r in rs])
        x = np.array([r["x_layer_s"] for r in rs])
        if len(set(np.round(g, 12))) < 2:
            continue
        design = np.column_stack([np.ones(len(g)), g])
        (a, b), *_ = np.linalg.lstsq(design, x, rcond=None)
        out[gpu] = (len(rs), float(a), float(b), float(np.sqrt(np.mean((x - design @ np.array([a, b])) ** 2))))
    return out


def chunk_pairs(rows: list[dict]) -> list[tuple[tuple, int, float, int, float]]:
    """Readings of one (GPU, family, format, TP) whose servers cut prompts into different chunks
    (``max_num_batched_tokens``): (key, smaller chunk, its X/layer, larger chunk, its X/layer). A cost per prompt
    step spread over the chunk's tokens reads larger per token at the smaller chunk, in proportion; a cost per token
    reads the same."""
    by: dict[tuple, dict[int, list[float]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        by[(r["gpu"], r["family"], r["precision"], r["tp"])][r["chunk_tokens"]].append(r["x_layer_s"])
    out = []
    for key, chunks in sorted(by.items()):
        if len(chunks) > 1:
            lo, hi = min(chunks), max(chunks)
            out.append((key, lo, float(np.median(chunks[lo])), hi, float(np.median(chunks[hi]))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conc", type=positive_int, default=4)
    args = ap.parse_args()
    if args.conc < 1:
        raise TwinInputError(f"--conc {args.conc}: must be >= 1")
    ce = default_start(JOINT_NAMES).get("compute_efficiency", 0.6)
    rows = fraction_rows(readings(args.conc), ce)
    print(f"CONC = {args.conc}; the twin's GEMMs at ce = {ce} of each group's datasheet rate. Per reading: G and X per "
          "decoder layer (us per prompt token), f = ce x G / (G + X)")
    print(f"{'family':<8} {'gpu':<9} {'fmt':<5} {'release':<8} {'TP':>2} | {'G/layer':>7} {'X/layer':>7} {'X/G':>6} "
          f"{'f':>6} {'chunk':>6}")
    for r in sorted(rows, key=lambda r: (r["gpu"], r["family"], r["precision"], r["version"], r["tp"])):
        print(f"{r['family']:<8} {r['gpu']:<9} {r['precision']:<5} {r['version'][:8]:<8} {r['tp']:>2} | "
              f"{1e6 * r['gemm_layer_s']:7.3f} {1e6 * r['x_layer_s']:7.3f} {r['x_s'] / r['gemm_s']:6.2f} "
              f"{r['fraction']:6.3f} {r['chunk_tokens']:>6}")
    print("\nf per GPU and format (readings, lowest - highest, highest / lowest):")
    for (gpu, fmt), (n, lo, hi) in spread(rows).items():
        print(f"  {gpu:<9} {fmt:<5} n {n:>2}: {lo:.3f} - {hi:.3f} ({hi / lo:.1f}x)")
    print("\npooled per GPU: X/layer = a + b x G/layer (us per prompt token per layer)")
    for gpu, (n, a, b, rms) in (per_layer_fit(rows) | per_layer_fit(rows, by_family=True)).items():
        print(f"  {gpu:<17} n {n:>2}: a {1e6 * a:6.3f} us, b {b:5.2f} "
              f"(f = ce / (1 + b) = {ce / (1 + b):.3f} where a = 0), "
              f"rms {1e6 * rms:.3f} us")
    print("\nthe same deployment at two prompt chunk sizes (max_num_batched_tokens): X/layer, us per prompt token")
    for (gpu, fam, fmt, tp), lo, x_lo, hi, x_hi in chunk_pairs(rows):
        print(f"  {gpu:<9} {fam:<8} {fmt:<5} TP {tp}: chunk {lo} {1e6 * x_lo:.3f} / chunk {hi} {1e6 * x_hi:.3f} "
              f"(a per-step cost would read {hi / lo:.0f}x at the smaller chunk)")
    print("\nstated: CUTLASS 3.8 on SM100, large GEMM, share of the tensor peak at power: "
          + ", ".join(f"{k} {v:.3f}" for k, v in CUTLASS_SM100_PEAK_SHARE.items()))


if __name__ == "__main__":
    run_script(main)
