"""What Blackwell's per-token-per-layer cost is: the per-prompt-token time the light-load silicon rows need beyond
the twin's, read off how TTFT grows from the 1k to the 8k prompt at CONC = 4, by model, GPU, TP, format and
release, and split into a part that TP divides (the GEMMs' achieved rate) and a part every TP rank repeats
(issue 33, round 9; docs/fidelity.md "Round 9: Blackwell's per-token prompt cost").

No simulation, no fit of the twin: per group of rows that differ only in the prompt length (same model, GPU,
format, release, measurement date, TP / EP / DP, OSL), the measured TTFT difference (8k - 1k, medians over
repeats) against the twin's: the prompt's own step(s) (the mean prompt cut into chunks of the server's
``max_num_batched_tokens`` beside CONC - 1 decodes, each step the longer of its GPU time and, where no CUDA graph
covers it, the eager host floor) plus 1.5 decode steps of wait (the in-flight step the prompt lands behind), at
the embedded defaults with ``layer_token_overhead_s`` at 0 on every generation. The reading ``X`` (us per prompt
token) is the GPU time per prompt token that, added to every chunk before the floor, makes the twin's difference
the measured one (bisection; "below" where the twin's difference at X = 0 already exceeds it, i.e. the floor
alone over-charges the long prompt). Then, per GPU and family, least squares over TP of
``X = k x GEMM + U``: GEMM is the twin's GEMM time per prompt token on one GPU (dense and expert GEMMs at the
defaults, so it falls as 1 / TP); ``k`` the GEMMs' missing share (achieved fraction of the datasheet
= compute_efficiency / (1 + k)), ``U`` the time per token that TP does not divide (per decoder layer: U / layers).

    python benchmarks/layer_token_reading.py [--conc 4]
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.joint import JOINT_NAMES, default_start, family_of  # noqa: E402
from twin.fitting.replay import cost_model_for, deployment_for  # noqa: E402
from twin.fitting.silicon import lengths, silicon_cases  # noqa: E402

WAIT_DECODE_STEPS = 1.5     # the in-flight step a light-load prompt lands behind (round 4's decomposition)
ZERO_TERM = {"layer_token_overhead_s@blackwell": 0.0, "layer_token_overhead_s": 0.0}
GEMM_PARTS = ("linear_compute_s", "moe_expert_compute_extra_s")


def chunk_step_s(gpu_s: float, tokens: int, floor_s: float, extra_per_token_s: float) -> float:
    """One prompt chunk's step (s): its GPU time plus ``extra_per_token_s`` per prompt token, at least the eager
    host floor (``floor_s``: 0 where a CUDA graph covers the step)."""
    return max(floor_s, gpu_s + extra_per_token_s * tokens)


def prompt_time_s(chunks: list[tuple[float, int, float]], extra_per_token_s: float) -> float:
    """A prompt's steps (s): ``chunks`` = (GPU s, prompt tokens, floor s) per chunk."""
    return sum(chunk_step_s(g, n, h, extra_per_token_s) for g, n, h in chunks)


def implied_extra_per_token_s(short: list[tuple[float, int, float]], long: list[tuple[float, int, float]],
                              wait_diff_s: float, measured_diff_s: float, hi_s: float = 500e-6) -> float:
    """The GPU time per prompt token (s) that makes the twin's TTFT difference, long prompt - short prompt
    (their steps plus ``wait_diff_s``), equal ``measured_diff_s``; -inf when the twin's difference without it is
    already longer (the floor over-charges the long prompt), +inf beyond ``hi_s``. Bisection (the difference
    does not fall as the extra time grows: a longer prompt pays at least as much of it)."""
    def diff(x: float) -> float:
        return prompt_time_s(long, x) - prompt_time_s(short, x) + wait_diff_s

    lo, hi = 0.0, hi_s
    if diff(lo) > measured_diff_s:
        return float("-inf")
    if diff(hi) < measured_diff_s:
        return float("inf")
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if diff(mid) < measured_diff_s else (lo, mid)
    return 0.5 * (lo + hi)


def prompt_chunks(case, params: dict[str, float]) -> dict:
    """The row's mean prompt as the twin schedules it beside CONC - 1 decodes: (GPU s, tokens, floor s) per chunk,
    the decode step, the twin's GEMM time per prompt token, and the model's shape."""
    dep = deployment_for(case.run, case.target)
    cost = cost_model_for(dep, case.target, params)
    row = case.row
    prompt, output = lengths(row)
    isl, ctx, others = prompt.mean, int(prompt.mean + output.mean / 2), row.concurrency - 1
    budget = max(dep.scheduler_config.max_num_batched_tokens - others, 1)
    chunks, done, left, gemm_s, ar_s, attn_s = [], 0, int(round(isl)), 0.0, 0.0, 0.0
    while left > 0:
        n = min(left, budget)
        e = cost.explain(SimpleNamespace(num_new_tokens=[n] + [1] * others, num_computed_before=[done] + [ctx] * others,
                                         num_spec_tokens=[0] * (others + 1)))
        gpu = sum(v for k, v in e.items() if k not in ("total_s", "eager_host_floor_s"))
        eager = n + others > cost.cudagraph_tokens[1]
        chunks.append((gpu, n, cost.eager_host_s_per_step if eager else 0.0))
        gemm_s += sum(e.get(k, 0.0) for k in GEMM_PARTS)
        ar_s += e.get("allreduce_s", 0.0)
        attn_s += e["attention_compute_s"]
        done, left = done + n, left - n
    dec = cost.explain(SimpleNamespace(num_new_tokens=[1] * row.concurrency, num_computed_before=[ctx] * row.concurrency,
                                       num_spec_tokens=[0] * row.concurrency))["total_s"]
    return {"chunks": chunks, "decode_s": dec, "gemm_per_token_s": gemm_s / isl, "allreduce_per_token_s": ar_s / isl,
            "attention_s": attn_s, "tokens": isl, "layers": cost.model.num_hidden_layers,
            "chunk_tokens": dep.scheduler_config.max_num_batched_tokens,
            "moe_layers": cost.model.moe_layers if cost.model.is_moe else 0}


def readings(conc: int) -> list[dict]:
    """One reading per group of rows that differ only in the prompt length (1k and 8k at ``conc``)."""
    params = default_start(JOINT_NAMES) | ZERO_TERM
    groups: dict[tuple, list] = collections.defaultdict(list)
    for c in silicon_cases()[0]:
        r = c.row
        if r.published_client and r.concurrency == conc:
            groups[(family_of(c), c.target.gpu, r.precision, r.vllm_version or "-", (r.measured or "")[:10],
                    c.target.tensor_parallel_size, r.moe_ep, r.attention_dp, r.osl)].append(c)
    out = []
    for key, cases in sorted(groups.items()):
        short = [c for c in cases if c.row.isl <= 1024]
        long = [c for c in cases if c.row.isl >= 8000]
        if not short or not long:
            continue
        a, b = prompt_chunks(short[0], params), prompt_chunks(long[0], params)
        m1 = statistics.median(c.row.ttft_ms for c in short) / 1e3
        m8 = statistics.median(c.row.ttft_ms for c in long) / 1e3
        wait = WAIT_DECODE_STEPS * (b["decode_s"] - a["decode_s"])
        x = implied_extra_per_token_s(a["chunks"], b["chunks"], wait, m8 - m1)
        twin0 = prompt_time_s(b["chunks"], 0.0) - prompt_time_s(a["chunks"], 0.0) + wait
        out.append(dict(zip(("family", "gpu", "precision", "version", "date", "tp", "ep", "dp", "osl"), key))
                   | {"x_s": x, "gemm_s": b["gemm_per_token_s"], "ar_s": b["allreduce_per_token_s"], "layers": b["layers"], "moe_layers": b["moe_layers"],
                      "chunk_tokens": b["chunk_tokens"],
                      "attn_slope_s": (b["attention_s"] - a["attention_s"]) / (b["tokens"] - a["tokens"]),
                      "meas_1k_s": m1, "meas_8k_s": m8, "twin0_diff_s": twin0,
                      "floor_8k": any(h > g for g, _, h in b["chunks"])})
    return out


def tp_split(points: list[tuple[float, float]], second: list[float] | None = None) -> tuple[float, float, float] | None:
    """Least squares of X = k x GEMM + U over (GEMM s, X s) points (two TP sizes at least): (k, U s, rms s);
    with ``second`` (one value per point), X = k x GEMM + c x second instead (U is then c)."""
    if len({round(g, 12) for g, _ in points}) < 2:
        return None
    g, x = np.array([p[0] for p in points]), np.array([p[1] for p in points])
    a = np.column_stack([g, np.ones(len(g)) if second is None else np.array(second)])
    (k, u), *_ = np.linalg.lstsq(a, x, rcond=None)
    return float(k), float(u), float(np.sqrt(np.mean((x - a @ np.array([k, u])) ** 2)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conc", type=positive_int, default=4)
    args = ap.parse_args()
    rows = readings(args.conc)
    print(f"CONC = {args.conc}: X = GPU time per prompt token the twin lacks (layer_token_overhead_s at 0), u = X / layers")
    print(f"{'family':<8} {'gpu':<9} {'fmt':<5} {'release':<8} {'date':<10} {'TP':>2} {'EP':>2} {'DP':>2} | "
          f"{'1k ms':>6} {'8k ms':>6} {'twin d':>6} | {'X us':>6} {'u us':>6} {'GEMM us':>7}")
    for r in rows:
        x = r["x_s"]
        xs = f"{1e6 * x:6.2f} {1e6 * x / r['layers']:6.3f}" if np.isfinite(x) else f"{'below' if x < 0 else 'above':>6} {'-':>6}"
        print(f"{r['family']:<8} {r['gpu']:<9} {r['precision']:<5} {r['version'][:8]:<8} {r['date']:<10} {r['tp']:>2} "
              f"{r['ep']:>2} {r['dp']:>2} | {1e3 * r['meas_1k_s']:6.1f} {1e3 * r['meas_8k_s']:6.1f} "
              f"{1e3 * r['twin0_diff_s']:6.1f} | {xs} {1e6 * r['gemm_s']:7.2f}")
    print("\nper GPU, family and format (EP 1, DP 1, every release): X = k x GEMM + U over TP")
    print(f"{'family':<8} {'gpu':<9} {'fmt':<5} {'TPs':<9} | {'k':>6} {'fraction':>8} {'U us':>6} {'U/layer':>7} {'rms us':>6}"
          f" | or X = k x GEMM + c x all-reduce: {'k':>5} {'fraction':>8} {'c':>5} {'rms us':>6}")
    by: dict[tuple, list[dict]] = collections.defaultdict(list)
    for r in rows:
        if np.isfinite(r["x_s"]) and r["ep"] == 1 and r["dp"] == 1:
            by[(r["family"], r["gpu"], r["precision"])].append(r)
    base_eff = default_start(JOINT_NAMES).get("compute_efficiency", 0.6)
    for key, rs in sorted(by.items()):
        fit = tp_split([(r["gemm_s"], r["x_s"]) for r in rs])
        tps = ",".join(str(t) for t in sorted({r["tp"] for r in rs}))
        if fit is None:
            med = statistics.median(r["x_s"] / r["layers"] for r in rs)
            print(f"{key[0]:<8} {key[1]:<9} {key[2]:<5} {tps:<9} | {'-':>6} {'-':>8} {'-':>6} {1e6 * med:7.3f} {'-':>6}"
                  "   (one TP: u only)")
            continue
        k, u, rms = fit
        alt = tp_split([(r["gemm_s"], r["x_s"]) for r in rs], [r["ar_s"] for r in rs]) \
            if len({r["tp"] for r in rs}) > 2 and any(r["ar_s"] > 0 for r in rs) else None
        alts = f"{alt[0]:5.2f} {base_eff / (1 + alt[0]):8.2f} {alt[1]:5.2f} {1e6 * alt[2]:6.2f}" if alt else "-"
        print(f"{key[0]:<8} {key[1]:<9} {key[2]:<5} {tps:<9} | {k:6.2f} {base_eff / (1 + k):8.2f} {1e6 * u:6.2f} "
              f"{1e6 * u / rs[0]['layers']:7.3f} {1e6 * rms:6.2f} | {'':>34}{alts}")


if __name__ == "__main__":
    run_script(main)
