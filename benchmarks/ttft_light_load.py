"""Where the light-load TTFT goes: the silicon rows at CONC <= 16 (whole runs), the twin's TTFT split into its
parts, and the gap to the measured TTFT (measured - twin) set against candidate drivers.

Per row (published client only: the gap-analysis rows have no TTFT):

* ``twin``: the replayed mean TTFT (all 10 x CONC requests, ``twin.fitting.replay``);
* ``path``: the request path's mean (``request_path_s`` + ``request_path_jitter_s``);
* ``prefill``: the prompt's own step(s), mean prompt length cut into chunks of ``max_num_batched_tokens``, each
  beside CONC - 1 decodes at the mean context (``explain()`` parts summed over the chunks: GEMM compute, exposed
  weight read, attention, all-reduce, overhead, MoE extras);
* ``wait``: the rest (twin - path - prefill): the in-flight step the request lands behind (async scheduling:
  the schedule after the next one) and any queueing behind other prompts.

Then ordinary least squares of the gap (ms) on candidate drivers, one at a time and jointly, and the same rows
re-simulated at set-A-like values (``--set-a``: Blackwell compute 0.5, MoE expert FLOPs 0.45, 2 us per token).

    python benchmarks/ttft_light_load.py [--max-conc 16] [--set-a] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.b200_moe_transfer import known_names  # noqa: E402
from benchmarks.cli_checks import check_out_path, number_list, positive_int  # noqa: E402
from twin.core.scheduler_output import SchedulerOutput  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import JOINT_NAMES, default_start, family_of  # noqa: E402
from twin.fitting.replay import cost_model_for, deployment_for  # noqa: E402
from twin.fitting.silicon import lengths, silicon_cases  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.scoped import parse_scoped_set_options  # noqa: E402

SET_A = {"compute_efficiency@blackwell": 0.5, "moe_expert_compute_efficiency": 0.45,
         "per_token_overhead_s": 2e-6}
PARTS = ("linear_compute_s", "weight_read_s", "attention_compute_s", "kv_read_s", "allreduce_s", "overhead_s",
         "moe_expert_compute_extra_s", "moe_expert_read_extra_s", "per_token_overhead_s")


def step(new: list[int], before: list[int]) -> SchedulerOutput:
    return SchedulerOutput(step_index=0, num_new_tokens=new, num_computed_before=before,
                           num_spec_tokens=[0] * len(new))


def prefill_parts(case, params: dict[str, float]) -> dict[str, float]:
    """The mean prompt's own prefill step(s) beside CONC - 1 decodes: explain() parts summed over its chunks,
    plus the number of chunks and the decode step alone."""
    dep = deployment_for(case.run, case.target)
    cost = cost_model_for(dep, case.target, params)
    row = case.row
    prompt, output = lengths(row)
    isl, osl = prompt.mean, output.mean
    ctx = int(isl + osl / 2)
    others = row.concurrency - 1
    budget = dep.scheduler_config.max_num_batched_tokens - others   # the decodes take their tokens first
    budget = max(budget, 1)
    done, total, n_chunks = 0, dict.fromkeys(PARTS + ("total_s",), 0.0), 0
    left = int(round(isl))
    while left > 0:
        n = min(left, budget)
        e = cost.explain(step([n] + [1] * others, [done] + [ctx] * others))
        for k in total:
            total[k] += e.get(k, 0.0)
        done += n
        left -= n
        n_chunks += 1
    dec = cost.explain(step([1] * row.concurrency, [ctx] * row.concurrency))["total_s"]
    alone = cost.explain(step([int(round(isl))], [0]))["total_s"] if n_chunks == 1 else float("nan")
    return {**total, "chunks": n_chunks, "decode_step_s": dec, "prefill_alone_s": alone,
            "path_s": cost.request_path_s + cost.request_path_jitter_s, "isl": isl,
            "budget": dep.scheduler_config.max_num_batched_tokens,
            "flops_per_gpu": 2.0 * cost.model.active_params * isl / case.target.tensor_parallel_size
            if hasattr(cost.model, "active_params") else float("nan"),
            "layers": cost.model.num_hidden_layers, "moe": bool(cost.model.is_moe)}


def ols(y: np.ndarray, cols: dict[str, np.ndarray]) -> tuple[dict[str, float], float]:
    """Least squares y ~ 1 + cols: (coefficient per column and the intercept, R^2)."""
    x = np.column_stack([np.ones(len(y))] + list(cols.values()))
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    res = y - x @ beta
    r2 = 1.0 - float(res @ res) / float(((y - y.mean()) ** 2).sum()) if len(y) > 1 else float("nan")
    return {"intercept": beta[0], **dict(zip(cols, beta[1:]))}, r2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-conc", type=positive_int, default=16)
    ap.add_argument("--set-a", action="store_true", help="also re-simulate at set-A-like values")
    ap.add_argument("--term", default="layer_token_overhead_s@blackwell",
                    help="a cost parameter (name[@scope]) to scan with --values-us")
    ap.add_argument("--values-us", default="", help="re-simulate with --term at these values (us), comma-separated")
    ap.add_argument("--with", dest="fixed", default="",
                    help="other parameters held at given values for the scan, e.g. compute_efficiency@blackwell=0.5")
    ap.add_argument("--skip-defaults", action="store_true")
    ap.add_argument("--every", type=positive_int, default=1, help="every k-th row only (all loads: --max-conc 4096)")
    ap.add_argument("--quiet", action="store_true", help="no per-row table, no regressions: the summary only")
    ap.add_argument("--csv", default=None)
    args = ap.parse_args()
    check_out_path(args.csv, "--csv")
    fixed = known_names(parse_scoped_set_options([kv for kv in args.fixed.split(",") if kv], "--with"), "--with")
    values_us = number_list(args.values_us, "--values-us", allow_empty=True)
    known_names({args.term: 0.0}, "--term")
    cases = [c for c in silicon_cases()[0][::args.every]
             if c.row.concurrency <= args.max_conc and c.row.published_client]
    base = default_start(JOINT_NAMES)
    settings = {"defaults": base}
    if args.set_a:
        settings["set A"] = base | SET_A
    for v in values_us:
        settings[f"{args.term.split('@')[0][:16]} {v:g} us"] = base | fixed | {args.term: v * 1e-6}
    if args.skip_defaults:
        settings.pop("defaults")
    rows = []
    for label, params in settings.items():
        preds = simulate_cases(cases, params, max_sim_s=None)
        for c, r in zip(cases, preds):
            p = prefill_parts(c, params)
            row = c.row
            rows.append({"set": label, "id": row.id, "family": family_of(c), "gpu": c.target.gpu,
                         "tp": c.target.tensor_parallel_size, "conc": row.concurrency, "isl": row.isl,
                         "osl": row.osl, "version": row.vllm_version or "", "precision": row.precision or "",
                         "measured_date": row.measured or "", "month": (row.measured or "")[:7],
                         "source": row.source,
                         "measured_ms": row.ttft_ms, "twin_ms": r.metrics["mean_ttft_ms"],
                         "tpot_meas_ms": row.tpot_ms, "tpot_twin_ms": r.metrics["mean_tpot_ms"],
                         "path_ms": 1e3 * p["path_s"], "prefill_ms": 1e3 * p["total_s"],
                         "decode_step_ms": 1e3 * p["decode_step_s"], "chunks": p["chunks"],
                         "budget": p["budget"], "layers": p["layers"], "moe": p["moe"],
                         "mean_isl": p["isl"], **{k[:-2] + "_ms": 1e3 * p[k] for k in PARTS}})
    for r in rows:
        r["wait_ms"] = r["twin_ms"] - r["path_ms"] - r["prefill_ms"]
        r["gap_ms"] = r["measured_ms"] - r["twin_ms"]
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    if not args.quiet:
        for label in settings:
            report([r for r in rows if r["set"] == label], label)
    summary(rows, list(settings), bands=args.max_conc > 16)


def band(conc: int) -> str:
    return "C<=16" if conc <= 16 else ("C32-64" if conc <= 64 else "C>=128")


def summary(rows: list[dict], labels: list[str], bands: bool = False) -> None:
    """Median signed error of mean TTFT and TPOT per (family, GPU, release or load band) for every setting."""
    groups: dict[tuple, dict[str, list[tuple[float, float]]]] = {}
    for r in rows:
        key = (r["family"], r["gpu"], band(r["conc"]) if bands else (r["version"][:7] or "-"))
        groups.setdefault(key, {}).setdefault(r["set"], []).append(
            (r["twin_ms"] / r["measured_ms"] - 1.0, r["tpot_twin_ms"] / r["tpot_meas_ms"] - 1.0))
    print(f"\nmedian signed error, TTFT mean / TPOT, per family, GPU and {'load' if bands else 'release'}")
    print(f"{'family':<8} {'gpu':<9} {'load' if bands else 'release':<8} {'n':>3} | " + " | ".join(f"{lab[:22]:>22}" for lab in labels))
    allv: dict[str, list[tuple[float, float]]] = {}
    for key, by in sorted(groups.items()):
        cells = []
        for lab in labels:
            v = by.get(lab, [])
            allv.setdefault(lab, []).extend(v)
            cells.append(f"{100 * np.median([a for a, _ in v]):+9.1f}% / {100 * np.median([b for _, b in v]):+7.1f}%"
                         if v else f"{'-':>22}")
        print(f"{key[0]:<8} {key[1]:<9} {key[2]:<8} {len(by[labels[0]]) if labels[0] in by else 0:>3} | "
              + " | ".join(cells))
    print(f"{'all':<8} {'':<9} {'':<8} {len(allv[labels[0]]):>3} | " + " | ".join(
        f"{100 * np.median([a for a, _ in allv[lab]]):+9.1f}% / {100 * np.median([b for _, b in allv[lab]]):+7.1f}%"
        for lab in labels))
    print(f"{'|error|':<8} {'':<9} {'':<8} {'':>3} | " + " | ".join(
        f"{100 * np.median([abs(a) for a, _ in allv[lab]]):9.1f}% / {100 * np.median([abs(b) for _, b in allv[lab]]):7.1f}%"
        for lab in labels))


def report(rows: list[dict], label: str) -> None:
    print(f"\n=== {label}: {len(rows)} light-load rows")
    print(f"{'family':<8} {'gpu':<9} {'TP':>2} {'C':>3} {'ISL':>5} {'ver':<7} | {'meas':>6} {'twin':>6} {'gap':>6} |"
          f" {'path':>5} {'wait':>5} {'pref':>6} {'dec':>5} {'ch':>2} | {'lin':>5} {'wgt':>5} {'attn':>5} {'ar':>5}"
          f" {'ovh':>5} {'moeX':>5}")
    for r in sorted(rows, key=lambda r: (r["family"], r["gpu"], r["tp"], r["conc"], r["isl"])):
        print(f"{r['family']:<8} {r['gpu']:<9} {r['tp']:>2} {r['conc']:>3} {r['isl']:>5} {r['version'][:7]:<7} | "
              f"{r['measured_ms']:6.1f} {r['twin_ms']:6.1f} {r['gap_ms']:+6.1f} | {r['path_ms']:5.1f} "
              f"{r['wait_ms']:5.1f} {r['prefill_ms']:6.1f} {r['decode_step_ms']:5.1f} {r['chunks']:>2} | "
              f"{r['linear_compute_ms']:5.1f} {r['weight_read_ms']:5.1f} {r['attention_compute_ms']:5.1f} "
              f"{r['allreduce_ms']:5.1f} {r['overhead_ms']:5.1f} "
              f"{r['moe_expert_compute_extra_ms'] + r['moe_expert_read_extra_ms']:5.1f}")
    gap = np.array([r["gap_ms"] for r in rows])
    ratio = np.array([r["measured_ms"] / r["twin_ms"] for r in rows])
    print(f"\nmedian gap {np.median(gap):+.1f} ms, median measured / twin {np.median(ratio):.2f}")
    isl = np.array([r["mean_isl"] for r in rows])
    drivers = {
        "prompt tokens (per 1k)": isl / 1e3,
        "prompt tokens / TP (per 1k)": isl / 1e3 / np.array([r["tp"] for r in rows]),
        "twin prefill ms": np.array([r["prefill_ms"] for r in rows]),
        "twin GEMM compute ms": np.array([r["linear_compute_ms"] for r in rows]),
        "twin attention ms": np.array([r["attention_compute_ms"] for r in rows]),
        "ISL^2 (per 1M)": isl ** 2 / 1e6,
        "chunks": np.array([r["chunks"] for r in rows], dtype=float),
        "layers": np.array([r["layers"] for r in rows], dtype=float),
        "layers x ktokens": np.array([r["layers"] for r in rows]) * isl / 1e3,
        "twin decode step ms": np.array([r["decode_step_ms"] for r in rows]),
        "measured TPOT ms": np.array([r["tpot_meas_ms"] for r in rows]),
        "TPOT gap ms (meas - twin)": np.array([r["tpot_meas_ms"] - r["tpot_twin_ms"] for r in rows]),
        "TP": np.array([r["tp"] for r in rows], dtype=float),
        "MoE": np.array([r["moe"] for r in rows], dtype=float),
        "B200": np.array([r["gpu"] == "B200" for r in rows], dtype=float),
    }
    print(f"\none driver at a time: gap_ms = a + b x driver  (n = {len(rows)})")
    for name, x in drivers.items():
        if np.ptp(x) == 0:
            continue
        beta, r2 = ols(gap, {name: x})
        print(f"  {name:<28} b = {beta[name]:+9.3f}   a = {beta['intercept']:+7.1f} ms   R^2 = {r2:.2f}")
    for combo in (("prompt tokens (per 1k)", "measured TPOT ms"),
                  ("prompt tokens (per 1k)", "TPOT gap ms (meas - twin)"),
                  ("twin prefill ms", "measured TPOT ms"),
                  ("prompt tokens (per 1k)", "layers x ktokens", "measured TPOT ms")):
        beta, r2 = ols(gap, {k: drivers[k] for k in combo})
        print("  joint: " + ", ".join(f"{k} {v:+.3f}" for k, v in beta.items()) + f"   R^2 = {r2:.2f}")
    for key in ("family", "gpu", "version"):
        groups: dict[str, list[float]] = {}
        for r in rows:
            groups.setdefault(r[key], []).append(r["measured_ms"] / r["twin_ms"])
        print(f"  measured / twin by {key}: " + ", ".join(f"{k} {np.median(v):.2f} (n={len(v)})"
                                                        for k, v in sorted(groups.items())))
    slopes(rows)
    slope_regression(rows)


def slope_regression(rows: list[dict], gpu: str = "B200", conc: int = 4) -> None:
    """Per (family, format, release, TP) group on ``gpu`` at ``conc`` (Kimi left out: its March offsets): the gap's
    slope from its 1k to its 8k rows (us per prompt token), fitted as u x layers, flat, v x the twin's GEMM time
    per token, and u x layers + v x GEMM time; rms residual of each (us per token)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["gpu"] == gpu and r["conc"] == conc and r["family"] != "kimi":
            groups.setdefault((r["family"], r["precision"], r["version"], r["tp"]), []).append(r)
    b, layers, gemm = [], [], []
    for rs in groups.values():
        one = [r for r in rs if r["isl"] <= 1024]
        eight = [r for r in rs if r["isl"] >= 8000]
        if not one or not eight:
            continue
        x1, x8 = np.mean([r["mean_isl"] for r in one]), np.mean([r["mean_isl"] for r in eight])
        b.append(1e3 * (np.median([r["gap_ms"] for r in eight]) - np.median([r["gap_ms"] for r in one])) / (x8 - x1))
        layers.append(float(rs[0]["layers"]))
        gemm.append(1e3 * np.median([r["linear_compute_ms"] / r["mean_isl"] for r in eight]))
    if len(b) < 3:
        return
    y = np.array(b)
    print(f"\nslope (us per prompt token) across {len(y)} {gpu} groups at C = {conc}:")
    for name, cols in (("u x layers", [layers]), ("flat", [np.ones(len(y))]), ("v x GEMM us/token", [gemm]),
                       ("u x layers + v x GEMM", [layers, gemm])):
        x = np.column_stack(cols)
        beta, *_ = np.linalg.lstsq(x, y, rcond=None)
        rms = float(np.sqrt(np.mean((y - x @ beta) ** 2)))
        print(f"  {name:<24} coefficients {np.round(beta, 3)}   rms residual {rms:.1f} us/token")


def slopes(rows: list[dict]) -> None:
    """Per (family, GPU, measurement month, CONC): the gap's growth with the prompt between the 1k and 8k rows
    (us per prompt token, and per token and decoder layer) and its intercept at no prompt (ms), from the median
    gaps of each length; the rows of one group differ in TP, weight format and release."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["family"], r["gpu"], r["month"] or "-", r["conc"]), []).append(r)
    print("\ngap growth with the prompt, 1k vs 8k rows (median gap of each): slope and intercept")
    print(f"{'family':<8} {'gpu':<9} {'month':<8} {'C':>3} {'n1k':>4} {'n8k':>4} | {'gap 1k':>7} {'gap 8k':>7} |"
          f" {'us/token':>8} {'us/token/layer':>14} {'at 0 tokens':>11}")
    for key, rs in sorted(groups.items()):
        one = [r for r in rs if r["isl"] <= 1024]
        eight = [r for r in rs if r["isl"] >= 8000]
        if not one or not eight:
            continue
        x1, x8 = np.mean([r["mean_isl"] for r in one]), np.mean([r["mean_isl"] for r in eight])
        g1, g8 = np.median([r["gap_ms"] for r in one]), np.median([r["gap_ms"] for r in eight])
        b = (g8 - g1) / (x8 - x1)
        layers = np.median([r["layers"] for r in rs])
        print(f"{key[0]:<8} {key[1]:<9} {key[2]:<8} {key[3]:>3} {len(one):>4} {len(eight):>4} | {g1:7.1f} {g8:7.1f} |"
              f" {1e3 * b:8.1f} {1e3 * b / layers:14.3f} {g1 - b * x1:9.1f} ms")


if __name__ == "__main__":
    run_script(main)
