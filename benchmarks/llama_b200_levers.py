"""Llama-3.1-70B's B200 rows held out (issue 33, round 11): what each of a fold's values is worth on them.

A fold with no B200 row in training (``--kind GPU --group B200``, or ``--kind source --group silicon``) predicts the
Llama B200 rows at its fitted serving terms and its stated priors. This script simulates those rows of the default
report (every 16th silicon row) at the fold's values (read from a ``fidelity_real.py --json`` report) with ONE
group of values changed at a time, to say which of them the held-out TTFT / TPOT error sits in. A variant marked
``(leak)`` sets a value read off the rows being predicted (the embedded default): it measures what a term is worth,
it is not a prediction; ``--set`` tries a candidate prior on top of the fold's values (no fit).

    python benchmarks/llama_b200_levers.py --report X.json --kind GPU --group B200
    python benchmarks/llama_b200_levers.py --report X.json --kind GPU --group B200 --set compute_efficiency@blackwell=0.45
    python benchmarks/llama_b200_levers.py --bytes-bound       # the kernel-bytes bound on the per-token term, no simulation

``--bytes-bound`` prints what the ops every TP rank repeats per token and decoder layer move through HBM (two fused
residual-add + RMSNorm + activation-quantisation passes over the replicated hidden state, ``replicated_token_bytes``)
and the time that takes at the datasheet bandwidth: the most a kernel-bytes fact can say the per-token term is.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_float, refuse_given  # noqa: E402
from benchmarks.fidelity_real import REFIT_SILICON_EVERY  # noqa: E402
from benchmarks.fold_report import fold_params  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import all_cases, errors, family_of, gpu_of  # noqa: E402
from twin.fitting.provenance import embedded_start  # noqa: E402
from twin.fitting.scoped import parse_scoped_set_options  # noqa: E402

TOKEN = "layer_token_overhead_s@blackwell"
EAGER = "eager_layer_host_s@blackwell"
BANDWIDTH = "memory_efficiency@blackwell"


def replicated_token_bytes(hidden_size: int, activation_bytes: int, quant_bytes: float) -> float:
    """Bytes per token and decoder layer of the work every TP rank repeats on the replicated hidden state: two
    passes (before attention, before the MLP) that each read the hidden state and the residual, write the new
    residual and write the normed input in the GEMM's activation format (``quant_bytes`` per element: 1 for FP8,
    0.5 + 1/16 for NVFP4's values and its per-16 scales; ``activation_bytes`` for a 16-bit GEMM)."""
    return 2 * hidden_size * (3 * activation_bytes + quant_bytes)


def bytes_bound() -> None:
    from twin.hardware.catalog import resolve_gpu, resolve_model
    model = resolve_model("llama-3.1-70b")
    for gpu_name, read_us, formats in (("B200", "0.146 (FP8) / 0.208 (NVFP4)", (("FP8", 1.0), ("NVFP4", 0.5 + 1 / 16))),
                                       ("H100-SXM", "0.016 (FP8)", (("FP8", 1.0),))):
        bw = resolve_gpu(gpu_name).memory_bandwidth_bytes_per_s
        for fmt, q in formats:
            b = replicated_token_bytes(model.hidden_size, 2, q)
            print(f"{gpu_name} {fmt}: {b / 1024:.1f} KiB per token per layer, {1e6 * b / bw:.4f} us at the "
                  f"datasheet {bw / 1e12:.2f} TB/s (read off the rows: {read_us} us)")


def variants(fold: dict[str, float]) -> dict[str, dict[str, float]]:
    emb = embedded_start((TOKEN, EAGER, "memory_efficiency"))
    return {"fold": fold,
            "embedded (leak)": fold | embedded_start(tuple(fold) + (TOKEN, EAGER, BANDWIDTH)),
            "token 0.2 us (leak)": fold | {TOKEN: emb[TOKEN]},
            "eager 0.84 ms (leak)": fold | {EAGER: emb[EAGER]},
            "bandwidth 0.978 (leak)": fold | {BANDWIDTH: emb["memory_efficiency"]},
            "token + eager (leak)": fold | {TOKEN: emb[TOKEN], EAGER: emb[EAGER]}}


def _med(errs, key):
    xs = [e[key] for e in errs if key in e]
    return f"{100 * statistics.median(xs):+6.1f}" if xs else "     -"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, default=None)
    ap.add_argument("--bytes-bound", action="store_true")
    ap.add_argument("--kind", default=None, help="with --report (default GPU)")
    ap.add_argument("--group", default=None, help="with --report (default B200)")
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--family", default=None, help="with --report (default llama)")
    ap.add_argument("--sim-s", type=positive_float, default=None, help="with --report (default 60)")
    ap.add_argument("--variants", default=None, help="comma-separated names of the variants to run (default: all)")
    ap.add_argument("--set", action="append", default=None, help="name=value,...: one more variant on the fold's")
    args = ap.parse_args()
    if args.bytes_bound or args.report is None:
        if args.bytes_bound and args.report is not None:
            raise TwinInputError("--bytes-bound takes no --report")
        refuse_given(args, ("--kind", "--group", "--ground-truth", "--family", "--sim-s", "--variants", "--set"),
                     "with --report")
        return bytes_bound()
    args.kind, args.group, args.family = args.kind or "GPU", args.group or "B200", args.family or "llama"
    args.sim_s, args.set = 60.0 if args.sim_s is None else args.sim_s, args.set or []
    cases = [c for c in all_cases(args.ground_truth, silicon_every=REFIT_SILICON_EVERY)
             if family_of(c) == args.family and gpu_of(c).lower().startswith("b200")]
    fold = fold_params(args.report, args.kind, args.group)
    todo = variants(fold)
    if args.variants:
        only = [v.strip() for v in args.variants.split(",") if v.strip()]
        if unknown := [v for v in only if v not in todo]:
            raise TwinInputError(f"--variants: {', '.join(unknown)} unknown; allowed: {', '.join(todo)}")
        todo = {k: v for k, v in todo.items() if k in only}
    for s in args.set:
        todo[f"set {s}"] = fold | parse_scoped_set_options(s.split(","))
    names = [c.run.name for c in cases]
    print("rows: " + ", ".join(n.split("vllm_")[-1] for n in names))
    for label, params in todo.items():
        runs = simulate_cases(cases, params, max_sim_s=args.sim_s)
        errs = [errors(c, r.metrics) for c, r in zip(cases, runs)]
        per = " ".join(f"{100 * e.get('mean_ttft_ms', float('nan')):+.0f}/{100 * e.get('mean_tpot_ms', float('nan')):+.0f}"
                       for e in errs)
        print(f"== {label}: TTFT {_med(errs, 'mean_ttft_ms')} TPOT {_med(errs, 'mean_tpot_ms')} | {per}", flush=True)


if __name__ == "__main__":
    run_script(main)
