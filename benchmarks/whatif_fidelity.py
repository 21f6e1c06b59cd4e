"""What-if fidelity: how well the twin predicts a CHANGE it has not seen (issue 33, round 22; docs/fidelity.md
"Round 22: what-if fidelity: predicted changes held out").

A user asks ``twin compare`` what happens if they change one thing: concurrency 16 -> 64, TP 2 -> 4, FP8 -> FP4
weights, H100 -> B200, 1k -> 8k prompts. Every held-out figure so far is of absolute values; this reads the same
held-out report as ratios. In each fold it finds every pair of held-out cases (both predicted by the one model that
fold fitted) that differ in exactly one knob (``whatif_pairs.KNOBS``: concurrency; an inference-perf stage's rate;
the parallel layout, TP with its EP / DP; the weight format; the KV cache format; the GPU; ISL x OSL; the vLLM
release), and reports per fold kind x knob x metric (TTFT mean, TPOT, E2E mean, throughput): the number of pairs,
the median |ratio error| and its signed median (ratio error = (1 + e_large) / (1 + e_small) - 1, oriented from the
smaller knob value to the larger), the median absolute error of the same pairs' cases, the share of pairs whose
predicted change has the measured direction (judged where the measured change is beyond the repeat floor,
``whatif_pairs.FLOORS`` x ``--floor-scale``), and how many pairs' bias cancels (absolute error misses the issue's
target, the change meets it) or compounds (the other way round).

Orientation (the "smaller" value): lower concurrency / rate; smaller TP (then EP, DP); more weight or KV bits (FP8
-> FP4); the GPU with less HBM bandwidth (H100 -> B200); shorter ISL (then OSL); the older release.

A case's attributes come from the ground truth (``twin.fitting.joint.all_cases``, every runnable row): a silicon
row's model, GPU, formats, layout, ISL x OSL, concurrency, release and client as the row gives them; an inference-perf
stage's model, GPU, TP, rate and prompt / output means. The server settings a script derives from the knobs
(``max_num_seqs``, ``max_num_batched_tokens``, ``max_model_len``, the CUDA-graph size, the release) do not count as a
difference; every other server setting must be equal. No simulation; a few seconds.

    python benchmarks/whatif_fidelity.py REPORT.json --ground-truth ../shared/ground-truth \\
        [--kinds source,GPU,family] [--floor-scale 1] [--ignore release,server] [--pairs] [--json OUT]

``--ignore release`` (a looser pairing) lets a pair also differ in the vLLM release (and ``server``: the script's
other settings): more GPU and format pairs, at the price of a second difference the twin reads as a scope.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_folder, check_out_path, positive_float  # noqa: E402
from benchmarks.fold_report import FoldReport, load_report  # noqa: E402
from benchmarks.whatif_pairs import KNOBS, LOOSE, METRICS, fold_pairs, table  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.hardware.name_probe import quoted  # noqa: E402

# server settings a benchmark script sets from the knobs themselves (the batch cap from the concurrency, the token
# budget and context from the lengths, the release): not a difference of their own
KNOB_DERIVED_SERVER = frozenset({"max_num_seqs", "max_num_batched_tokens", "max_model_len",
                                 "max_cudagraph_capture_size", "vllm_version"})
KIND_ORDER = ("source", "GPU", "family")          # the order fidelity_real.py reports them in
FORMAT_BITS = {"fp4": 4, "nvfp4": 4, "mxfp4": 4, "int4": 4, "int4_wo": 4, "fp8": 8, "int8": 8}


def _bits(label: str | None) -> int:
    return FORMAT_BITS.get((label or "").lower(), 16)


def _release_key(text: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", text.split("-", 1)[0])) if text else ()


def case_attributes(case) -> dict[str, tuple[tuple, str]]:
    """A ground-truth case's attributes (``whatif_pairs.ATTRIBUTES``), each (order key, label)."""
    from twin.hardware.gpus import resolve_gpu
    run, t = case.run, case.target
    row = getattr(case, "row", None)
    tp = t.tensor_parallel_size
    ep = row.moe_ep if row is not None else 1
    dp = row.attention_dp if row is not None else t.data_parallel_size
    layout = f"TP {tp}" + (f" EP {ep}" if ep > 1 else "") + (f" DP {dp}" if dp > 1 else "")
    weights = row.precision if row is not None and row.precision else t.weight_dtype
    formats = tuple(sorted((t.weight_formats or {}).items()))
    if row is not None:
        lengths, lengths_label = (row.isl, row.osl), f"{row.isl}x{row.osl}"
    else:
        lengths = (round(run.prompt_tokens.mean), round(run.output_tokens.mean))
        lengths_label = f"{lengths[0]}x{lengths[1]} (means)"
    release = (row.vllm_version if row is not None else run.release) or ""
    conc = run.max_concurrency
    rate = run.rate_per_s if run.rate_per_s is not None else math.inf
    server = tuple(sorted((k, repr(v)) for k, v in run.server.items() if k not in KNOB_DERIVED_SERVER))
    return {
        "concurrency": ((conc if conc is not None else 0,), f"C {conc}" if conc is not None else "uncapped"),
        "rate": ((rate,), "all at once" if math.isinf(rate) else f"{rate:g}/s"),
        "layout": ((tp, ep, dp, t.enable_expert_parallel, t.pipeline_parallel_size), layout),
        "weights": ((-_bits(weights), weights or "", t.weight_dtype, formats,
                     row.gemm_quant if row is not None else "", row.moe_quant if row is not None else ""),
                    weights or t.weight_dtype),
        "kv": ((-_bits(t.kv_dtype), t.kv_dtype), f"KV {t.kv_dtype}"),
        "gpu": ((resolve_gpu(t.gpu).memory_bandwidth_bytes_per_s, t.gpu), t.gpu),
        "lengths": (lengths, lengths_label),
        "release": ((_release_key(release), release, str(run.server.get("vllm_version", ""))), release or "-"),
        "model": ((row.model_path if row is not None else (run.model or t.model),), t.model),
        "client": ((run.client or "", row.published_client if row is not None else True), run.client or "-"),
        "server": ((server,), "server"),
    }


def ground_truth_attributes(ground_truth: Path) -> tuple[dict, dict]:
    """(case name -> attributes, case name -> measured metrics) of every runnable ground-truth case."""
    from twin.fitting.joint import all_cases
    knobs, measured = {}, {}
    for c in all_cases(ground_truth):
        knobs[c.run.name] = case_attributes(c)
        measured[c.run.name] = dict(c.run.metrics)
    return knobs, measured


def report_pairs(report: FoldReport, kinds, knobs_of: dict, measured: dict, floor_scale: float = 1.0,
                 ignore=()) -> list[dict]:
    """Every fold's what-if pairs (``whatif_pairs.fold_pairs``), fold kinds in ``kinds`` order. A case name with a
    `` [...]`` suffix is read as the ground-truth case it names."""
    out = []
    for kind in kinds:
        for fold in report.folds(kind):
            errs = {n.split(" [", 1)[0]: e for n, e in report.errors(fold).items()}
            unknown = [n for n in errs if n not in knobs_of]
            if unknown:         # round 23: named with the report's file (find_pairs would say it without)
                raise report.error(f"case {quoted(unknown[0])} is not in the ground truth (--ground-truth?)")
            out += fold_pairs(kind, fold["held_out"], errs, knobs_of, measured, floor_scale, ignore)
    return out


def _pct(x: float | None, signed: bool = False) -> str:
    return "-" if x is None else (f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%")


def table_lines(summary: dict) -> list[str]:
    """The table as text: one line per fold kind x knob x metric."""
    out = [f"{'fold':7s} {'knob':12s} {'metric':11s} {'pairs':>5s} {'|ratio err|':>11s} {'signed':>8s} "
           f"{'|abs err|':>9s} {'direction':>10s} {'cancels':>7s} {'compounds':>9s}"]
    for kind, knobs in summary.items():
        for knob, metrics in knobs.items():
            for key, title in METRICS:
                s = metrics.get(key)
                if s is None:
                    continue
                right = "-" if s["direction_right"] is None else \
                    f"{round(s['direction_right'] * s['direction_judged'])}/{s['direction_judged']}"
                out.append(f"{kind:7s} {knob:12s} {title:11s} {s['n']:5d} {_pct(s['ratio_abs_median']):>11s} "
                           f"{_pct(s['ratio_signed_median'], True):>8s} {_pct(s['abs_error_median']):>9s} "
                           f"{right:>10s} {s['cancels']:7d} {s['compounds']:9d}")
    return out


def pair_lines(pairs: list[dict]) -> list[str]:
    """One line per pair and metric: fold, knob, from -> to, measured and predicted change, ratio error."""
    out = []
    for p in pairs:
        for key, title in METRICS:
            m = p["metrics"].get(key)
            if m is None:
                continue
            out.append(f"{p['kind']:7s} {p['held_out'][:10]:10s} {p['knob']:11s} {p['from']} -> {p['to']}  {title:10s} "
                       f"measured {_pct(m['measured_change'], True):>8s} predicted {_pct(m['predicted_change'], True):>8s}"
                       f" ratio err {_pct(m['ratio_error'], True):>7s} (abs {_pct(m['abs_error'])})  {p['small']} | "
                       f"{p['large']}")
    return out


def fold_kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    if not kinds:
        raise argparse.ArgumentTypeError(f"{text!r}: no fold kind")
    return kinds


def _ignore(text: str) -> tuple[str, ...]:
    items = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    bad = [k for k in items if k not in LOOSE]
    if bad or not items:
        raise argparse.ArgumentTypeError(f"{bad[0] if bad else text!r}: not one of {', '.join(LOOSE)}")
    return items


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="a fidelity_real.py --json held-out report")
    ap.add_argument("--ground-truth", type=Path, required=True, help="the ground truth the report was made on")
    ap.add_argument("--kinds", type=fold_kinds, default=None, help="fold kinds to read (default: every kind the report has)")
    ap.add_argument("--floor-scale", type=positive_float, default=1.0,
                    help="judge a pair's direction where its measured change exceeds this x the repeat floor "
                         "(3 %% TTFT, 0.4 %% TPOT / E2E / throughput; default 1)")
    ap.add_argument("--ignore", type=_ignore, default=(),
                    help="comma-separated attributes a pair may also differ in (release, server; default none: a "
                         "pair differs in its knob only)")
    ap.add_argument("--pairs", action="store_true", help="also print every pair and metric")
    ap.add_argument("--json", type=Path, default=None, help="write the table and every pair here")
    args = ap.parse_args()
    check_out_path(args.json, "--json")
    check_folder(args.ground_truth)
    report = load_report(args.report)
    kinds = args.kinds or tuple(sorted(report.kinds(), key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else 9))
    for k in kinds:
        report.folds(k)              # an absent kind: one line naming the kinds it has
    knobs_of, measured = ground_truth_attributes(args.ground_truth)
    pairs = report_pairs(report, kinds, knobs_of, measured, args.floor_scale, args.ignore)
    summary = table(pairs)
    print(f"{len(pairs)} what-if pairs (two held-out cases of one fold, one knob apart) in {args.report.name}; "
          f"knobs: {', '.join(KNOBS)}" + (f"; may also differ in: {', '.join(args.ignore)}" if args.ignore else ""))
    print("\n".join(table_lines(summary)))
    if args.pairs:
        print("\n" + "\n".join(pair_lines(pairs)))
    if args.json:
        doc = {"report": str(args.report), "kinds": list(kinds), "floor_scale": args.floor_scale,
               "ignore": list(args.ignore),
               "summary": summary, "pairs": pairs}
        args.json.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    run_script(main)
