"""What the bench client's per-request time is: the light-load TTFT intercepts by unit (issue 33, round 9).

Reads a per-case JSON of ``benchmarks/fidelity_real.py --defaults-only --json`` (the embedded defaults; no
simulation here) and, for every silicon row with a published client at CONC <= ``--max-conc``, the gap = measured
- twin mean TTFT (the twin already charges every request ``request_path_s`` + the mean of its jitter, the
inference-perf runs' path). Each row is tagged with what its prompt step is in the twin (graphed: the step fits
the row's captured CUDA graphs; eager: it runs on the host floor, ``twin.cost.eager_steps``) and the twin's own
prompt-step time (the mean prompt beside CONC - 1 decodes, ``explain()``). Then, one unit at a time:

* per request, by client and GPU: the rows whose prompt step is graphed and split by TP >= 4 (the twin's GPU
  prompt time is small there), median gap per (GPU, family, format, release);
* by TP: gap = a + c / TP per group (``a``: the most a TP-flat per-request term can carry);
* per prompt token: the same group's 8k gap minus its 1k gap, per 1k extra prompt tokens;
* the inference-perf runs' TTFT p50 gap by prompt length (their server tokenises 575-1,082 tokens per request).

    python benchmarks/fidelity_real.py --defaults-only --silicon-every 3 --eval-sim-s 60 --json D.json
    python benchmarks/request_path_readings.py D.json [--max-conc 8]
    python benchmarks/request_path_readings.py --max-conc 8 --save L.json     # every light-load row, simulated
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, positive_int  # noqa: E402
from benchmarks.fold_report import defaults_cases  # noqa: E402
from twin.core.scheduler_output import SchedulerOutput  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import JOINT_NAMES, default_start  # noqa: E402
from twin.fitting.replay import cost_model_for, deployment_for  # noqa: E402
from twin.fitting.silicon import lengths, model_family, silicon_cases  # noqa: E402
from twin.errors import run_script  # noqa: E402


def _step(new: list[int], before: list[int]) -> SchedulerOutput:
    return SchedulerOutput(step_index=0, num_new_tokens=new, num_computed_before=before,
                           num_spec_tokens=[0] * len(new))


def prompt_step(case, params: dict[str, float]) -> dict[str, float]:
    """The twin's view of a row's mean prompt step at light load: its total time (ms), whether a captured graph
    covers it, and the request path it charges (ms, fixed part + jitter mean)."""
    dep = deployment_for(case.run, case.target)
    cost = cost_model_for(dep, case.target, params)
    row = case.row
    isl = int(round(lengths(row)[0].mean))
    others = row.concurrency - 1
    tokens = min(isl + others, dep.scheduler_config.max_num_batched_tokens)
    e = cost.explain(_step([tokens - others] + [1] * others, [0] + [isl] * others))
    limits = getattr(cost, "cudagraph_tokens", None)
    graphed = limits is None or tokens <= limits[1]
    return {"step_ms": 1e3 * e["total_s"], "graphed": graphed, "floor_ms": 1e3 * e.get("eager_host_floor_s", 0.0),
            "path_ms": 1e3 * (cost.request_path_s + cost.request_path_jitter_s)}


def simulated(max_conc: int) -> list[dict]:
    """Every silicon row with a published client at CONC <= ``max_conc``, simulated whole at the embedded
    defaults, as the per-case entries of a ``fidelity_real.py --json`` file (the fields read here)."""
    cases = [c for c in silicon_cases()[0] if c.row.published_client and c.row.concurrency <= max_conc]
    preds = simulate_cases(cases, default_start(JOINT_NAMES), max_sim_s=None)
    return [{"name": c.run.name, "source": "silicon", "gpu": c.target.gpu, "gemm_quant": c.row.gemm_quant,
             "measured": {"mean_ttft_ms": c.row.ttft_ms}, "predicted": {"mean_ttft_ms": r.metrics["mean_ttft_ms"]}}
            for c, r in zip(cases, preds)]


# what ``rows_from`` reads of a per-case JSON (this script's --save or fidelity_real.py --defaults-only --json)
READ_NEED = {"need": ("source", "measured", "predicted"), "row_need": ("gpu",)}


def rows_from(cases: list[dict], max_conc: int) -> list[dict]:
    by_id = {c["name"]: c for c in cases if c["source"] == "silicon"}
    params = default_start(JOINT_NAMES)
    out = []
    for case in silicon_cases()[0]:
        row = case.row
        c = by_id.get(case.run.name)
        if c is None or not row.published_client or row.concurrency > max_conc:
            continue
        m, p = c["measured"]["mean_ttft_ms"], c["predicted"]["mean_ttft_ms"]
        out.append({"gpu": c["gpu"][:4], "family": model_family(row.model_path), "format": c.get("gemm_quant"),
                    "release": (row.vllm_version or "")[:7], "month": (row.measured or "")[:7], "tp": row.tp,
                    "conc": row.concurrency, "isl": row.isl, "gap": m - p, "measured": m, "twin": p,
                    **prompt_step(case, params)})
    return out


def ac(rows: list[dict]) -> tuple[float, float] | None:
    """Least-squares (a, c) of gap = a + c / TP, or None with fewer than two TP sizes."""
    tp = np.array([r["tp"] for r in rows], dtype=float)
    if len(set(tp)) < 2:
        return None
    (a, c), *_ = np.linalg.lstsq(np.vstack([np.ones_like(tp), 1.0 / tp]).T, np.array([r["gap"] for r in rows]),
                                 rcond=None)
    return float(a), float(c)


def per_request(rows: list[dict], min_tp: int = 4, isl: int = 1024) -> dict[tuple, list[float]]:
    """The gaps of rows whose prompt step is graphed, at TP >= ``min_tp`` and prompt ``isl``, by (GPU, family,
    format, release): where the twin's GPU prompt time is small, the gap is what a per-request term could hold."""
    out: dict[tuple, list[float]] = collections.defaultdict(list)
    for r in rows:
        if r["graphed"] and r["tp"] >= min_tp and r["isl"] == isl:
            out[(r["gpu"], r["family"], r["format"], r["release"])].append(r["gap"])
    return dict(out)


def isl_slopes(rows: list[dict], mean_fraction: float = 0.9) -> dict[tuple, tuple[float, float, float]]:
    """Per (GPU, family, format, release, TP) with 1k and 8k rows: (median 1k gap, median 8k gap, their
    difference per 1,000 extra mean prompt tokens; the mean prompt is ``mean_fraction`` of the nominal one)."""
    by: dict[tuple, dict[int, list[float]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        by[(r["gpu"], r["family"], r["format"], r["release"], r["tp"])][r["isl"]].append(r["gap"])
    out = {}
    for key, v in by.items():
        if 1024 in v and 8192 in v:
            g1, g8 = float(np.median(v[1024])), float(np.median(v[8192]))
            out[key] = (g1, g8, (g8 - g1) / ((8192 - 1024) * mean_fraction / 1e3))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("defaults_json", nargs="?", help="a fidelity_real.py --defaults-only --json file; none: "
                    "simulate every light-load row here (--save: write them as such a file)")
    ap.add_argument("--max-conc", type=positive_int, default=8)
    ap.add_argument("--save", default=None)
    args = ap.parse_args()
    check_out_path(args.save, "--save")
    if args.defaults_json:
        cases = defaults_cases(Path(args.defaults_json), **READ_NEED)
    else:
        cases = simulated(args.max_conc)
        if args.save:
            Path(args.save).write_text(json.dumps({"cases": cases}))
    rows = rows_from(cases, args.max_conc)
    path = np.median([r["path_ms"] for r in rows])
    print(f"{len(rows)} silicon rows at CONC <= {args.max_conc}; the twin charges each request {path:.1f} ms of "
          "request path already (gap = measured - twin)")
    groups = collections.defaultdict(list)
    for r in rows:
        groups[(r["gpu"], r["family"], r["format"], r["release"], "G" if r["graphed"] else "E", r["isl"])].append(r)
    print(f"\n{'GPU, family, format, release, G/E, ISL':<48} {'n':>3} | {'a':>6} {'c':>6} | median gap by TP "
          "(twin prompt step ms)")
    for key, g in sorted(groups.items()):
        fit = ac(g)
        by_tp = collections.defaultdict(list)
        for r in g:
            by_tp[r["tp"]].append(r)
        cells = " ".join(f"TP{t} {np.median([r['gap'] for r in v]):+5.1f} ({np.median([r['step_ms'] for r in v]):.0f})"
                         for t, v in sorted(by_tp.items()))
        fa = f"{fit[0]:6.1f} {fit[1]:6.1f}" if fit else f"{'-':>6} {'-':>6}"
        print(f"{str(key):<48} {len(g):>3} | {fa} | {cells}")
    print("\nper request: graphed 1k prompt steps at TP >= 4 (the twin's GPU prompt time small), median gap (ms)")
    for key, v in sorted(per_request(rows).items()):
        print(f"  {str(key):<44} n {len(v):>2}  gap {np.median(v):+5.1f}  (range {min(v):+.1f} .. {max(v):+.1f})")
    print("\nper prompt token: 8k gap - 1k gap per group and TP (ms per 1k extra prompt tokens)")
    slopes = isl_slopes(rows)
    for key, (g1, g8, s) in sorted(slopes.items()):
        print(f"  {str(key):<50} 1k {g1:+6.1f}  8k {g8:+6.1f}  -> {s:+6.2f} ms/1k")
    if slopes:
        v = [s for *_, s in slopes.values()]
        print(f"  median {np.median(v):+.2f} ms per 1k prompt tokens over {len(v)} groups "
              f"(range {min(v):+.2f} .. {max(v):+.2f})")
    ip = [c for c in cases if c["source"] == "inference-perf" and "median_ttft_ms" in c.get("errors", {})]
    if ip:
        print("\ninference-perf runs: TTFT p50 gap (ms) by mean prompt tokens")
        for c in sorted(ip, key=lambda c: c["predicted"]["total_input_tokens"] / c["predicted"]["num_requests"]):
            n = c["predicted"]["total_input_tokens"] / c["predicted"]["num_requests"]
            if c["measured"]["median_ttft_ms"] < 1e3:
                gap = c["measured"]["median_ttft_ms"] - c["predicted"]["median_ttft_ms"]
                print(f"  {c['name'][16:62]:<46} {n:6.0f} tokens  gap {gap:+5.1f}")


if __name__ == "__main__":
    run_script(main)
