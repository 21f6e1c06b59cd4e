"""Blackwell's dense weight stream at small batch as an SM-occupancy limit: a reading and a held-out trial (issue 33,
round 17; docs/fidelity.md "Round 17: Blackwell's dense weight stream at small batch").

The hypothesis (``twin.cost.gemm_occupancy``): a decode GEMM streams at min(datasheet, CTAs x what one SM pulls),
so B200 (54 GB/s of datasheet per SM against H100's 25) would stream its dense Llama GEMMs below the datasheet
where the tiles occupy too few SMs. Three subcommands:

``reading`` (measured rows only, < 5 s): per (GPU, format, ISL / OSL) of the Llama-3.1-70B silicon rows at CONC <= 8,
TPOT = K + S(TP; r) / f by least squares, S the occupancy-limited stream time of the four GQA GEMMs per layer (plus
the bf16 LM head at the datasheet) at a per-SM rate r, for r = infinity (the twin's form, round 16's K + w / TP),
a sweep, the stated prior (Little's law: the kernel's weight bytes in flight over ``--latency-us``) and the
datasheet's share per SM (bandwidth / SMs: saturation needs a CTA on every SM). If the
occupancy limit were the owner of B200's low fraction, some r would give f near the Hopper rows' and a smaller rms.
Then the stated prior's added time per step by TP beside what the rows need (round 16's residual at the defaults).

``rows`` (~8 min): every Llama-3.1-70B B200 row (120) at the embedded defaults, TPOT without and with the prior,
by format and TP (the prior's shape over every TP, where the folds sample 8 rows).

``heldout FIDELITY_ARGS`` (the trial, opt-in): ``benchmarks/fidelity_real.py`` with every roofline cost model's
fixed time per step raised by ``occupancy_extra_s`` (a per-deployment constant for M <= 16; it also lands on prompt
steps, where the real kernels have many more CTAs: an upper bound there), e.g.

    python benchmarks/dense_stream_occupancy.py reading
    python benchmarks/dense_stream_occupancy.py rows
    python benchmarks/dense_stream_occupancy.py heldout --latency-us 1 -- --folds family --groups llama \
        --workers 1 --json L.json
"""

from __future__ import annotations

import argparse
import math
import sys
from contextlib import nullcontext
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from twin.cost.gemm_occupancy import (DECODE_KERNELS, DEFAULT_LATENCY_S, SM_COUNT, gemm_stream_s,  # noqa: E402
                                      gqa_decode_gemms, occupancy_extra_s, sm_bytes_per_s)
from benchmarks.fidelity_passthrough import run_fidelity_real, split_at_dashes, workers_given  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

GROUPS = (("b200_sxm", "B200", "fp8", "fp8"), ("b200_sxm", "B200", "fp4", "nvfp4"),
          ("h100_sxm", "H100-SXM", "fp8", "fp8"))
PAIRS = ((1024, 1024), (1024, 8192))
SWEEP_GB_S = (400, 200, 100, 60, 40)
# round 16 (docs/fidelity.md "Round 16: the B200 TP 1 decode held out"): measured - twin TPOT at the embedded
# defaults, 1k / 1k C <= 8, ms by TP 1 / 2 / 4 / 8 (a + b / TP: FP8 -1.31 + 3.24 / TP, NVFP4 -0.93 + 3.33 / TP)
NEEDED_MS = {"fp8": (-1.31, 3.24), "nvfp4": (-0.93, 3.33)}


def stream_s(model, gpu: str, fmt: str, tp: int, sm_rate: float | None, bandwidth: float) -> float:
    """One decode step's weight stream (s): the four GQA GEMMs per layer, SM-limited at ``sm_rate`` (None: not),
    plus the bf16 LM head at ``bandwidth``."""
    from twin.hardware.quant import bytes_per_weight
    kernel, bpw = DECODE_KERNELS[(gpu, fmt)], float(bytes_per_weight(fmt))
    per_layer = sum(n * k * bpw / bandwidth if sm_rate is None else
                    gemm_stream_s(n, k, kernel, SM_COUNT[gpu], sm_rate, bandwidth, bpw)
                    for n, k in gqa_decode_gemms(model, tp))
    return model.num_hidden_layers * per_layer + model.lm_head_params / tp * 2.0 / bandwidth


def fit_fraction(points: list[tuple[int, float]], seconds_of) -> tuple[float, float, float]:
    """(K s, f, rms s) of TPOT = K + S(TP) / f by least squares over ``points`` ((TP, TPOT s)); ``seconds_of(tp)``
    is S at the datasheet rate. A one-line error with fewer than two TP sizes."""
    if len({tp for tp, _ in points}) < 2:
        raise TwinInputError("the fit needs at least two TP sizes")
    x = np.array([[1.0, seconds_of(tp)] for tp, _ in points])
    y = np.array([t for _, t in points])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(beta[0]), 1.0 / float(beta[1]), float(np.sqrt(np.mean((x @ beta - y) ** 2)))


def reading(latency_s: float) -> None:
    from twin.fitting.silicon import model_family, silicon_cases
    from twin.hardware.catalog import resolve_gpu, resolve_model
    cases = [c for c in silicon_cases()[0] if model_family(c.row.model_path) == "llama"]
    model = resolve_model(cases[0].target.model)
    print(f"TPOT = K + S(TP; r) / f, CONC <= 8 (S: occupancy-limited stream at datasheet bandwidth); stated prior: "
          f"latency {latency_s * 1e6:g} us")
    print("| GPU | format | ISL / OSL | r (GB/s per SM) | K ms | f | rms ms |")
    print("|---|---|---|---|---|---|---|")
    for system, gpu, precision, fmt in GROUPS:
        bw = resolve_gpu(gpu).memory_bandwidth_bytes_per_s
        prior = sm_bytes_per_s(DECODE_KERNELS[(gpu, fmt)], fmt, latency_s)
        for pair in PAIRS:
            pts = [(c.row.tp, c.row.tpot_ms * 1e-3) for c in cases if c.row.system == system
                   and c.row.precision == precision and (c.row.isl, c.row.osl) == pair and c.row.concurrency <= 8]
            share = bw / SM_COUNT[gpu]     # the datasheet's bandwidth per SM: saturates at one CTA per SM
            for label, rate in [("inf", None), *((str(g), g * 1e9) for g in SWEEP_GB_S),
                                (f"{prior / 1e9:.0f} (prior)", prior), (f"{share / 1e9:.1f} (share)", share)]:
                k, f, rms = fit_fraction(pts, lambda tp: stream_s(model, gpu, fmt, tp, rate, bw))
                print(f"| {gpu} | {fmt} | {pair[0]} / {pair[1]} | {label} | {k * 1e3:.2f} | {f:.3f} | "
                      f"{rms * 1e3:.3f} |")
    print("\nthe stated prior's added time per step at the twin's B200 rate (0.978 x 8 TB/s), against what the rows "
          "need (round 16, 1k / 1k C <= 8), ms at TP 1 / 2 / 4 / 8")
    for fmt, (a, b) in NEEDED_MS.items():
        added = [occupancy_extra_s(model, "B200", fmt, tp, 0.978 * 8.0e12, latency_s) * 1e3 for tp in (1, 2, 4, 8)]
        needed = [a + b / tp for tp in (1, 2, 4, 8)]
        print(f"  {fmt}: added " + " / ".join(f"{v:+.2f}" for v in added) + "; needed "
              + " / ".join(f"{v:+.2f}" for v in needed))


def install(latency_s: float):
    """Raise the fixed time per step of every roofline cost model made inside the block by ``occupancy_extra_s``
    (the trial; this process only: run ``fidelity_real`` with ``--workers 1``); restored when it ends."""
    import twin.cost.roofline as roofline
    base = roofline.step_fixed_parts

    def with_occupancy(cost_model, tensor_parallel_size, collective_s, terms):
        t_moe, floor_s, t_step = base(cost_model, tensor_parallel_size, collective_s, terms)
        formats = cost_model.weight_formats
        q = cost_model.quant_weight_efficiency if formats.is_quantized else 1.0
        rate = cost_model.gpu.memory_bandwidth_bytes_per_s * cost_model.memory_efficiency * q
        extra = 0.0
        if formats.attention == formats.dense_mlp:
            extra = occupancy_extra_s(cost_model.model, cost_model.gpu.name, formats.attention,
                                      tensor_parallel_size, rate, latency_s)
        return t_moe, floor_s, t_step + extra

    return mock.patch.object(roofline, "step_fixed_parts", with_occupancy)


def rows_check(latency_s: float) -> None:
    """Every Llama-3.1-70B B200 row at the embedded defaults (60 s of traffic), TPOT error without and with the
    prior, median |error| (signed) per (format, TP): the prior's shape over all 120 rows, not the folds' sample."""
    import statistics

    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import default_start
    from twin.fitting.silicon import model_family, silicon_cases
    cases = [c for c in silicon_cases()[0] if model_family(c.row.model_path) == "llama" and c.row.system == "b200_sxm"]
    err = {}
    for label in ("defaults", "prior"):
        with install(latency_s) if label == "prior" else nullcontext():
            runs = simulate_cases(cases, default_start(()), max_sim_s=60.0)
        err[label] = [r.metrics["mean_tpot_ms"] / c.row.tpot_ms - 1.0 for c, r in zip(cases, runs)]
    print("Llama-3.1-70B B200 rows, TPOT median |error| (signed): defaults -> with the occupancy prior")
    keys = sorted({(c.row.precision, c.row.tp) for c in cases}) + [("all", 0)]
    for fmt, tp in keys:
        idx = [i for i, c in enumerate(cases) if fmt == "all" or (c.row.precision, c.row.tp) == (fmt, tp)]
        cells = [f"{100 * statistics.median(abs(err[k][i]) for i in idx):.1f} % "
                 f"({100 * statistics.median(err[k][i] for i in idx):+.1f} %)" for k in err]
        print(f"  {fmt} TP {tp or 'all'} ({len(idx)}): {cells[0]} -> {cells[1]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("reading", "rows", "heldout"))
    ap.add_argument("--latency-us", type=float, default=DEFAULT_LATENCY_S * 1e6,
                    help="the loaded memory latency of the Little's-law prior (us; default 1)")
    own, rest = split_at_dashes(sys.argv[1:])           # after --: fidelity_real's options (heldout)
    args = ap.parse_args(own)
    if not math.isfinite(args.latency_us) or args.latency_us <= 0:
        raise TwinInputError(f"--latency-us {args.latency_us}: must be a positive finite number")
    if args.command != "heldout" and rest:
        raise TwinInputError(f"{args.command} takes no fidelity_real options (those after --)")
    if args.command == "reading":
        return reading(args.latency_us * 1e-6)
    if args.command == "rows":
        return rows_check(args.latency_us * 1e-6)
    if any(w != "1" for w in workers_given(rest)):
        raise TwinInputError("heldout: the trial patches this process only; run fidelity_real with --workers 1")
    with install(args.latency_us * 1e-6):
        run_fidelity_real(rest)


if __name__ == "__main__":
    run_script(main)
