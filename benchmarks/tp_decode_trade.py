"""The decode trade between Llama-2-70B TP 4 and CodeLlama-34B TP 2 (issue 33, round 21): a reading, no model change.

At the embedded defaults every Llama-2-70B TP 4 inference-perf stage decodes a little slower than the twin says
(TPOT -0.7..-4.0 %) and every CodeLlama-34B TP 2 stage faster (+5.1..+8.6 %), while Llama-2-7B TP 1 and
Mixtral-8x7B TP 2 sit near 0: the shared decode terms split the difference. The two models stream nearly the same
weight bytes per GPU (70B / 4 and 34B / 2 in bf16: 34.5 and 33.7 GB), so what differs is the number of decoder
layers (80 / 48), of all-reduces (2 per layer) and the TP degree (4 / 2) they run over, the GEMM shard shapes and
the KV bytes per token per GPU. This script asks which physical term could carry the difference:

1. each inference-perf stage's decode step, decomposed by ``explain()`` of the cost model (the embedded defaults,
   or one fold's fitted values from a saved report) at the stage's batch (slots in use by Little's law: measured
   throughput x mean E2E) and mean context (mean prompt + half the mean output), beside the measured TPOT and the
   twin's simulated TPOT (from a ``--defaults-only`` report);
2. for each candidate term (``CANDIDATES``: a time per decoder layer, the all-reduce's latency growing with the TP
   degree as a ring's hops 2 (n - 1) or as log2 n, the KV read's rate, the weight stream's rate), a least-squares
   fit over the stages (reasoning, a queue-bound stage, left out) of the measured minus the twin's TPOT on the term
   plus a per-step constant (what the shared step overhead would absorb), with its standard error; the per-model
   mean residual before and after, and the 70B - 34B trade (the difference of their means) before and after;
3. each fitted candidate applied, to first order (TPOT moves by the step time it adds), to the report's H100
   silicon rows with TP >= 2 (Llama-3.1-70B TP 2 / 4 / 8, Qwen3-32B TP 8, ...): a term that closes the trade must
   not open a TP-dependent error on the other source's rows, which already sit near 0 at TP 2 to 8.

    python benchmarks/tp_decode_trade.py --defaults DEFAULTS.json [--report REPORT.json --fold source:inference-perf]
        [--ground-truth DIR] [--json OUT.json]

No simulation (a few seconds; the cost models of the report's cases only).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path  # noqa: E402
from benchmarks.fold_report import defaults_cases, load_report  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

TRADE = ("llama-2-70b", "codellama-34b")          # the pair whose decode the shared terms trade
LEFT_OUT = ("reasoning",)
SHORT = {"codellama-34b": "34B", "llama-2-70b": "70B", "llama-2-7b": "7B", "mixtral-8x7b": "Mixtral"}                          # queue-bound stages (a 512-sequence batch, client timeouts)


def feature_ms(feature: str, row: dict) -> float:
    """The step time (ms) one unit of ``feature`` adds to ``row``'s decode step: per us of a per-layer time, per us
    of an all-reduce latency (any TP, per ring hop, per log2 n), per unit fraction of the KV, weight or all-reduce
    bytes' time, per ms of a per-step constant.

    ``row``: ``layers``, ``tp``, ``parts`` (explain()'s parts, ms), ``allreduce_bytes_ms`` (the step's all-reduce
    bytes over the link, ms)."""
    layers, tp, parts = row["layers"], row["tp"], row["parts"]
    all_reduces = 2 * layers if tp > 1 else 0
    if feature == "step_ms":                        # what the shared step overhead absorbs
        return 1.0
    if feature == "layer_us":
        return layers * 1e-3
    if feature == "allreduce_us":                   # the shared latency itself (the fitted allreduce_latency_s)
        return all_reduces * 1e-3
    if feature == "allreduce_ring_hop_us":          # NCCL's ring: 2 (n - 1) hops per all-reduce
        return all_reduces * 2 * (tp - 1) * 1e-3
    if feature == "allreduce_log2_us":              # a tree / one-shot exchange: log2 n rounds
        return all_reduces * math.log2(tp) * 1e-3
    if feature == "kv_time_fraction":
        return parts.get("kv_read_s", 0.0) + parts.get("attention_compute_s", 0.0) + parts.get("kv_write_s", 0.0)
    if feature == "weight_time_fraction":
        return parts.get("weight_read_s", 0.0) + parts.get("linear_compute_s", 0.0)
    if feature == "allreduce_bytes_fraction":       # the ring's bytes, 2 (n - 1) / n of the hidden state per token
        return row["allreduce_bytes_ms"]
    raise TwinInputError(f"unknown feature {feature!r}")


# each candidate: the terms fitted together (the first is the candidate, the others the shared terms it would
# move: a per-step constant, or the all-reduce latency a TP-dependent part splits off)
CANDIDATES: dict[str, tuple[str, ...]] = {
    "layer_us": ("layer_us", "step_ms"),
    "layer_us + allreduce_us": ("layer_us", "allreduce_us"),
    "allreduce_us": ("allreduce_us", "step_ms"),
    "allreduce_ring_hop_us": ("allreduce_ring_hop_us", "step_ms"),
    "ring_hop + allreduce_us": ("allreduce_ring_hop_us", "allreduce_us"),
    "log2 + allreduce_us": ("allreduce_log2_us", "allreduce_us"),
    "kv_time_fraction": ("kv_time_fraction", "step_ms"),
    "weight_time_fraction": ("weight_time_fraction", "step_ms"),
    "allreduce_bytes_fraction": ("allreduce_bytes_fraction", "step_ms"),
}


def fit_candidate(rows: list[dict], candidate: str) -> dict:
    """Least squares of each row's residual (measured - twin TPOT, ms) on ``candidate``'s features
    (``CANDIDATES``): the values (the first is the candidate's), their standard errors and the rms before / after.
    Rows that cannot separate the features (a rank-deficient design, or no more rows than features) leave the
    candidate not identified (``identified`` False, values None)."""
    names = CANDIDATES[candidate]
    x = np.array([[feature_ms(f, r) for f in names] for r in rows])
    y = np.array([r["measured_ms"] - r["twin_ms"] for r in rows])
    out = {"candidate": candidate, "features": list(names), "identified": False, "values": None, "se": None,
           "rms_before_ms": float(np.sqrt(np.mean(y ** 2))), "rms_after_ms": None}
    if len(rows) <= len(names) or np.linalg.matrix_rank(x) < len(names):
        return out
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ beta
    cov = np.linalg.inv(x.T @ x) * float(resid @ resid) / (len(rows) - len(names))
    out.update(identified=True, values=[float(b) for b in beta], se=[float(v) for v in np.sqrt(np.diag(cov))],
               rms_after_ms=float(np.sqrt(np.mean(resid ** 2))))
    return out


def shifted_ms(row: dict, fit: dict) -> float:
    """The twin's TPOT (ms) of ``row`` with ``fit``'s terms added (first order: TPOT moves by the step time)."""
    if not fit["identified"]:
        return row["twin_ms"]
    return row["twin_ms"] + sum(v * feature_ms(f, row) for f, v in zip(fit["features"], fit["values"]))


def model_means(rows: list[dict], fit: dict | None = None) -> dict[str, float]:
    """Per model: the mean signed TPOT error (twin / measured - 1) of its rows, before (``fit`` None) or with
    ``fit`` applied."""
    out: dict[str, list[float]] = {}
    for r in rows:
        twin = r["twin_ms"] if fit is None else shifted_ms(r, fit)
        out.setdefault(r["model"], []).append(twin / r["measured_ms"] - 1.0)
    return {m: float(np.mean(v)) for m, v in sorted(out.items())}


def trade(means: dict[str, float]) -> float | None:
    """The 70B - 34B difference of mean signed TPOT errors (0: no trade), or None without both models."""
    a, b = TRADE
    return means[a] - means[b] if a in means and b in means else None


def by_family_tp(rows: list[dict], fit: dict | None = None) -> dict[str, tuple[int, float]]:
    """(count, median signed TPOT error) of ``rows`` per 'family TP n', before or with ``fit`` applied."""
    out: dict[str, list[float]] = {}
    for r in rows:
        twin = r["twin_ms"] if fit is None else shifted_ms(r, fit)
        out.setdefault(f"{r['family']} TP {r['tp']}", []).append(twin / r["measured_ms"] - 1.0)
    return {k: (len(v), float(statistics.median(v))) for k, v in sorted(out.items())}


def stage_batch(run) -> tuple[int, float]:
    """(decode batch, mean context) of a measured run: slots in use by Little's law (measured request throughput x
    mean E2E) where the run has both, else its client's concurrency; the mean prompt plus half the mean output."""
    m = run.metrics
    thr, e2e = m.get("request_throughput"), m.get("mean_e2el_ms")
    if thr and e2e:
        batch = thr * e2e / 1000.0
    elif run.max_concurrency:
        batch = float(run.max_concurrency)
    else:
        raise TwinInputError(f"{run.name}: neither a throughput and E2E nor a concurrency to size its batch")
    return max(1, round(batch)), mean_length(run.prompt_tokens) + mean_length(run.output_tokens) / 2.0


def mean_length(sample) -> float:
    """The mean of a ``LengthSample`` (its values, else its quantile function integrated)."""
    if sample.values is not None:
        return float(np.mean(sample.values))
    ps, vs = zip(*sample.quantiles)
    return float(np.mean(np.interp(np.linspace(0.0, 1.0, 1001), ps, vs)))


def decomposed_rows(cases: list[dict], ground_truth: Path | None, params: dict[str, float]) -> list[dict]:
    """The report's H100 cases (inference-perf stages and silicon rows), each with its decode step's parts (ms)
    at ``params`` at its batch and context, its layers and TP, measured and twin TPOT (ms)."""
    from types import SimpleNamespace
    from twin.fitting import joint
    from twin.fitting.replay import cost_model_for, deployment_for
    wanted = {c["name"]: c for c in cases if c.get("gpu") == "H100-SXM"}
    rows = []
    for case in joint.all_cases(ground_truth, silicon_every=1):
        rec = wanted.get(case.run.name)
        if rec is None or rec["measured"].get("mean_tpot_ms") is None or rec["predicted"].get("mean_tpot_ms") is None:
            continue
        dep = deployment_for(case.run, case.target)
        cost = cost_model_for(dep, case.target, params)
        batch, context = stage_batch(case.run)
        parts = cost.explain(SimpleNamespace(num_new_tokens=[1] * batch, num_computed_before=[int(context)] * batch,
                                             num_spec_tokens=[0] * batch))
        rows.append({"name": case.run.name, "source": rec["source"], "family": rec["family"],
                     "model": case.target.model, "tp": case.target.tensor_parallel_size,
                     "layers": dep.model.num_hidden_layers, "batch": batch, "context": context,
                     "parts": {k: 1e3 * v for k, v in parts.items()},
                     "allreduce_bytes_ms": 1e3 * batch * cost.constants.collectives_s_per_token,
                     "measured_ms": rec["measured"]["mean_tpot_ms"], "twin_ms": rec["predicted"]["mean_tpot_ms"]})
    if not any(r["source"] == "inference-perf" for r in rows):
        raise TwinInputError("no inference-perf stage of the report is among the ground truth's runs")
    return rows


def fold_cases(cases: list[dict], errors: dict[str, dict[str, float]]) -> list[dict]:
    """The ``--defaults`` case records a fold held out, each with its predicted TPOT replaced by the fold's
    (measured x (1 + the fold's signed error)): the fold's own residuals. A fold that held none of them out is one
    line."""
    out = []
    for case in cases:
        err = errors.get(case["name"], {}).get("mean_tpot_ms")
        if err is not None and case["measured"].get("mean_tpot_ms") is not None:
            predicted = dict(case["predicted"], mean_tpot_ms=case["measured"]["mean_tpot_ms"] * (1.0 + err))
            out.append(dict(case, predicted=predicted))
    if not out:
        raise TwinInputError("--fold: the fold held out none of the --defaults report's cases")
    return out


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--defaults", type=Path, required=True,
                    help="a fidelity_real.py --defaults-only --json report (measured and twin TPOT per case)")
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--report", type=Path, default=None, help="a fidelity_real.py --json report (with --fold)")
    ap.add_argument("--fold", default=None, help="KIND:GROUP of --report: the decomposition at its fitted values "
                    "and the residuals of its held-out cases (default: the embedded defaults, every H100 case)")
    ap.add_argument("--json", type=Path, default=None)
    return ap


def print_decomposition(stages: list[dict]) -> None:
    keys = ("weight", "allreduce", "overhead", "kv", "other")
    print(f"{'stage':<44} {'B':>4} {'ctx':>5} {'meas':>6} {'twin':>6} {'err':>6} | "
          + " ".join(f"{k:>9}" for k in keys) + " (ms)")
    for r in stages:
        p = r["parts"]
        w = p.get("weight_read_s", 0) + p.get("linear_compute_s", 0)
        kv = p.get("kv_read_s", 0) + p.get("attention_compute_s", 0) + p.get("kv_write_s", 0)
        ar, ov = p.get("allreduce_s", 0), p.get("overhead_s", 0)
        other = p["total_s"] - w - kv - ar - ov
        print(f"{r['name'][16:60]:<44} {r['batch']:4d} {r['context']:5.0f} {r['measured_ms']:6.2f} "
              f"{r['twin_ms']:6.2f} {100 * (r['twin_ms'] / r['measured_ms'] - 1):+5.1f}% | "
              + " ".join(f"{v:9.2f}" for v in (w, ar, ov, kv, other)))


def main() -> None:
    args = parser().parse_args()
    check_out_path(args.json, "--json")
    if (args.report is None) != (args.fold is None):
        raise TwinInputError("--report and --fold go together (a saved report and KIND:GROUP of one of its folds)")
    params: dict[str, float] = {}
    cases = defaults_cases(args.defaults, need=("source", "gpu", "family"), metrics=("mean_tpot_ms",))
    if args.fold is not None:
        kind, _, group = args.fold.partition(":")
        if not group:
            raise TwinInputError(f"--fold {args.fold!r}: KIND:GROUP, e.g. source:inference-perf")
        rep = load_report(args.report)
        fold = rep.fold(kind, group)
        params = rep.params(fold)
        cases = fold_cases(cases, rep.errors(fold, ("mean_tpot_ms",)))
    rows = decomposed_rows(cases, args.ground_truth, params)
    stages = [r for r in rows if r["source"] == "inference-perf" and not any(k in r["name"] for k in LEFT_OUT)]
    silicon = [r for r in rows if r["source"] != "inference-perf" and r["tp"] > 1]
    print(f"decode steps at {args.fold or 'the embedded defaults'} (explain() at the stage's batch B and context; "
          f"twin = {'the fold' if args.fold else 'the --defaults report'}'s simulated TPOT)")
    print_decomposition(stages)
    out = {"fold": args.fold, "stages": stages, "silicon_tp_rows": len(silicon), "fits": []}
    before, sil_before = model_means(stages), by_family_tp(silicon)
    print("\nmean signed TPOT error per model: " + ", ".join(f"{m} {100 * v:+.1f}%" for m, v in before.items())
          + f"; 70B - 34B trade {100 * trade(before):+.1f} points")
    print("H100 silicon rows, TP >= 2 (median signed TPOT): "
          + ", ".join(f"{k} (n {n}) {100 * v:+.1f}%" for k, (n, v) in sil_before.items()))
    print(f"\n{'candidate (+ what it moves)':<26} {'values +/- se':<30} {'rms ms':>11} {'trade':>6} | per model "
          "after | H100 silicon TP >= 2 after (median signed TPOT %)")
    for cand in CANDIDATES:
        fit = fit_candidate(stages, cand)
        out["fits"].append(fit)
        if not fit["identified"]:
            print(f"{cand:<26} not identified by these stages")
            continue
        after, sil_after = model_means(stages, fit), by_family_tp(silicon, fit)
        fit.update(per_model_after=after, trade_after=trade(after), silicon_after=sil_after)
        vals = " ".join(f"{v:.2f}+/-{e:.2f}" for v, e in zip(fit["values"], fit["se"]))
        print(f"{cand:<26} {vals:<30} {fit['rms_before_ms']:4.2f}->{fit['rms_after_ms']:4.2f} "
              f"{100 * trade(after):+5.1f} | "
              + ", ".join(f"{SHORT.get(m, m)} {100 * v:+.1f}" for m, v in after.items()) + " | "
              + ", ".join(f"{k.replace(' TP ', '')} {100 * v:+.1f}" for k, (_, v) in sil_after.items()))
    out.update(per_model_before=before, trade_before=trade(before), silicon_before=sil_before)
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
