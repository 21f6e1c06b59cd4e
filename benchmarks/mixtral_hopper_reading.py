"""What the inference-perf Mixtral-8x7B H100 runs say about a Hopper MoE path's fixed times, in the fold that holds
the silicon rows out (issue 33, round 17; docs/fidelity.md "Round 17: the silicon-held-out source fold's TTFT, term
by term").

The fold's only MoE rows are the inference-perf Mixtral stages (H100, TP 2, bf16 experts on vLLM's Triton fused-MoE
path), in its training set. Their prompts are prefix-cache hits (round 14: no per-prompt-token term is readable on
them), but every request still pays the MoE path's per-request time and every step its per-MoE-layer time. Simulated
at the fold's values (no fit), each stage's measured minus predicted TTFT p50 and TPOT, beside the same figures of
the dense runs at the same TP on the same GPU, client and release (CodeLlama-34B TP 2; stages that queued are
left out), give the MoE path's part the fold's serving fit leaves over:

* per request (ms): median Mixtral TTFT p50 missed minus the dense runs' median: a reading of
  ``expert_path_request_s`` on a Hopper MoE path (the fold resets the FP8 path's 26.15 ms to 0);
* per MoE layer per step (us): (median Mixtral TPOT missed minus the dense runs') / MoE layers: a reading of
  ``moe_layer_overhead_s`` (the fold resets the FP8 path's 16 us to 0).

    python benchmarks/mixtral_hopper_reading.py FOLD.json [--ground-truth DIR] [--sim-s 60]
    python benchmarks/mixtral_hopper_reading.py REPORT.json --try-fold family:minimax --request-ms 2.73 --layer-us 28.5
        (instead: that fold's held-out H100 block-FP8 rows at its values, and with the two readings as the path's
        ``expert_path_request_s`` / ``moe_layer_overhead_s``; exact where the fold's training rows hold no such row)
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fidelity_real import REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.source_fold_terms import fold_values  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

MOE_FAMILY, DENSE_FAMILY, TP = "mixtral", "llama", 2
QUEUED_TTFT_MS = 1000.0          # a stage whose measured TTFT p50 exceeds this queued (codellama reasoning: 112 s)
FP8_PATH = "hopper+experts_fp8"  # the block-FP8 expert path on Hopper (MiniMax-M2.5 H100), whose fixed times it reads


def reading_priors(request_ms: float, layer_us: float) -> dict[str, float]:
    """The two readings as the Hopper block-FP8 path's values (model units: s); a negative or non-finite reading is
    a one-line error naming its option."""
    for flag, value in (("--request-ms", request_ms), ("--layer-us", layer_us)):
        if not (math.isfinite(value) and value >= 0):
            raise TwinInputError(f"{flag} {value}: must be a finite number >= 0")
    return {f"expert_path_request_s@{FP8_PATH}": request_ms * 1e-3, f"moe_layer_overhead_s@{FP8_PATH}": layer_us * 1e-6}


def try_fold(report: Path, fold: str, priors: dict[str, float], ground_truth, sim_s: float, workers: int) -> None:
    """Print the signed TTFT / TPOT errors of ``fold``'s (KIND:GROUP) held-out H100 block-FP8 rows at its values and
    with ``priors``."""
    from benchmarks.fold_report import fold_params
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import FOLDS, all_cases, errors, family_of, gpu_of
    kind, _, group = fold.partition(":")
    if kind not in FOLDS or not group:
        raise TwinInputError(f"--try-fold {fold!r}: expected KIND:GROUP with KIND one of {', '.join(FOLDS)}")
    params = fold_params(report, kind, group)
    cases = [c for c in all_cases(ground_truth, silicon_every=REFIT_SILICON_EVERY) if FOLDS[kind](c) == group
             and gpu_of(c).startswith("H100") and family_of(c) == "minimax"]
    if not cases:
        raise TwinInputError(f"--try-fold {fold!r}: it holds out no H100 MiniMax (block-FP8) row")
    for label, values in (("the fold", params), ("with the readings", params | priors)):
        runs = simulate_cases(cases, values, max_sim_s=sim_s, workers=workers)
        cells = [{k: f"{100 * v:+.1f}" for k, v in errors(c, r.metrics).items()
                  if k in ("mean_ttft_ms", "mean_tpot_ms")} for c, r in zip(cases, runs)]
        print(f"== {fold} {label}: " + "; ".join(f"{c.run.name[-40:]} TTFT {e.get('mean_ttft_ms', '-')} TPOT "
                                                 f"{e.get('mean_tpot_ms', '-')}" for c, e in zip(cases, cells)),
              flush=True)


def missed(measured: dict[str, float], predicted: dict[str, float]) -> dict[str, float]:
    """Measured minus predicted (ms; positive: the twin is too fast) for TTFT p50 / mean and TPOT."""
    out = {}
    for key in ("median_ttft_ms", "mean_ttft_ms", "mean_tpot_ms"):
        m, p = measured.get(key), predicted.get(key)
        if m is None or p is None:
            raise TwinInputError(f"{key}: the run or its simulation lacks it")
        out[key] = m - p
    return out


def reading(moe: list[dict[str, float]], dense: list[dict[str, float]], moe_layers: int) -> dict[str, float]:
    """The MoE path's part of what the fold misses: ``request_ms`` (per request, from TTFT p50) and
    ``layer_us`` (per MoE layer per step, from TPOT), each the MoE rows' median minus the dense rows'."""
    if not moe or not dense:
        raise TwinInputError("need MoE and dense rows")
    if moe_layers <= 0:
        raise TwinInputError(f"moe_layers must be > 0, got {moe_layers}")

    def med(rows, key):
        return statistics.median(r[key] for r in rows)
    return {"request_ms": med(moe, "median_ttft_ms") - med(dense, "median_ttft_ms"),
            "layer_us": 1e3 * (med(moe, "mean_tpot_ms") - med(dense, "mean_tpot_ms")) / moe_layers}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fold_json", type=Path)
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--sim-s", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--try-fold", default="", help="KIND:GROUP: that fold's H100 block-FP8 rows with the readings")
    ap.add_argument("--request-ms", type=float, default=None, help="with --try-fold: the per-request reading")
    ap.add_argument("--layer-us", type=float, default=None, help="with --try-fold: the per-MoE-layer reading")
    args = ap.parse_args()
    from twin.fitting.fit import check_simulation_options
    check_simulation_options(args.sim_s, args.workers)
    given = (args.request_ms is not None, args.layer_us is not None, bool(args.try_fold))
    if any(given) and not all(given):
        raise TwinInputError("--try-fold, --request-ms and --layer-us go together")
    if args.try_fold:
        try_fold(args.fold_json, args.try_fold, reading_priors(args.request_ms, args.layer_us), args.ground_truth,
                 args.sim_s, args.workers)
        return
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import all_cases, family_of, source_of
    from twin.hardware.model_catalog import resolve_model
    fold = fold_values(args.fold_json)
    cases = [c for c in all_cases(args.ground_truth, silicon_every=REFIT_SILICON_EVERY)
             if source_of(c) != "silicon" and c.target.tensor_parallel_size == TP
             and family_of(c) in (MOE_FAMILY, DENSE_FAMILY) and c.run.metrics["median_ttft_ms"] < QUEUED_TTFT_MS]
    runs = simulate_cases(cases, fold, max_sim_s=args.sim_s, workers=args.workers)
    rows = {MOE_FAMILY: [], DENSE_FAMILY: []}
    for c, r in zip(cases, runs):
        miss = missed(c.run.metrics, r.metrics)
        rows[family_of(c)].append(miss)
        print(f"{c.run.name}: measured TTFT p50 {c.run.metrics['median_ttft_ms']:.1f} ms, mean "
              f"{c.run.metrics['mean_ttft_ms']:.1f}, TPOT {c.run.metrics['mean_tpot_ms']:.2f}; missed "
              + ", ".join(f"{k} {v:+.2f}" for k, v in miss.items()), flush=True)
    moe_model = resolve_model(next(c for c in cases if family_of(c) == MOE_FAMILY).target.model)
    out = reading(rows[MOE_FAMILY], rows[DENSE_FAMILY], moe_model.moe_layers)
    print(f"Mixtral minus the dense TP {TP} runs: per request {out['request_ms']:+.2f} ms (TTFT p50), per MoE layer "
          f"per step {out['layer_us']:+.2f} us (TPOT, {moe_model.moe_layers} MoE layers)")


if __name__ == "__main__":
    run_script(main)
