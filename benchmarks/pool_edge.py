"""The silicon rows whose real server queued: how many requests it actually ran, and whether the KV pool can say why.

A row's client is a closed loop of C users, so Little's law reads the server's running set off the two means the
row gives: each request spends TTFT waiting (plus its own prefill) and (mean OSL - 1) x TPOT decoding, so on
average

    N = C x decode / (TTFT + decode)         (requests decoding at once; per DP rank: N / dp)

For every runnable row that queued (N < ``--deficit`` x C, or TTFT above ``--ttft-s``), this prints beside N:

* ``pool``: the twin's KV pool in tokens per DP rank (``twin.hardware.kv_sizing``) and the closed loop's
  steady-state demand over it (users x (mean prompt + half the mean output), ``kv_pool_rows.demand``);
* ``eff``: the pool the real server behaved as if it had, N x (mean prompt + half the mean output) per rank, and
  ``gap GiB``: (twin pool - eff) x the KV bytes per token per GPU, the memory the real server held outside its
  KV cache beyond what the twin reserves (if the pool is what limited it);
* ``floor``: the weight-streaming floor of one decode step at batch N (``ModelSpec.weight_read_bytes`` at N
  tokens, uniform routing, over the datasheet bandwidth), in ms. A measured TPOT below it cannot be the
  step time of N running requests: the row's TTFT / TPOT split is not the engine's (its tokens reached the
  client late and in bursts), and only E2E = TTFT + (OSL - 1) x TPOT, hence the throughput, is the engine's.

Reads the rows only (no simulation, ~3 s); ``--simulate`` also runs each listed row whole at the embedded
defaults (``default_start(())``, as ``fidelity_real.py --defaults-only`` does) and prints the twin's TTFT, TPOT,
peak KV use and preemptions beside the measured ones:

    python benchmarks/pool_edge.py [--match gpt_oss] [--deficit 0.9] [--ttft-s 2] [--simulate] [--json out.json]
        [--rule exact_cuda]

``--rule`` reads the pool (and the gap) under one of ``pool_release_rows.RULES`` instead of the embedded one (e.g.
``exact_cuda``: the sampler by the row's own release, the budget from CUDA's device total), without simulating.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, positive_float  # noqa: E402
from benchmarks.kv_pool_rows import demand  # noqa: E402
from benchmarks.pool_release_rows import RULES, rule_case, rule_context  # noqa: E402
from twin.errors import run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import default_start  # noqa: E402
from twin.fitting.replay import deployment_for  # noqa: E402
from twin.hardware.parallel import ParallelLayout  # noqa: E402
from twin.fitting.silicon import lengths, read_silicon, silicon_cases, silicon_dir  # noqa: E402

GIB = 2**30


def running_requests(conc: int, ttft_ms: float, tpot_ms: float, mean_osl: float) -> float:
    """Little's law on a closed loop of ``conc`` users: the mean number of requests in their decode phase."""
    decode_ms = (mean_osl - 1.0) * tpot_ms
    return conc * decode_ms / (ttft_ms + decode_ms)


def row_reading(case, rule: str | None = None) -> dict:
    """The Little's-law reading of one silicon case against its twin deployment (see the module docstring); the
    pool under ``rule`` (``pool_release_rows.RULES``; None: the embedded one)."""
    row = case.row
    dep = deployment_for(case.run, case.target)
    pool = dep.kv_pool
    if rule is not None:
        with rule_context(rule):
            c = rule_case(case, rule)
            pool = deployment_for(c.run, c.target).kv_pool
    dp = dep.engines_per_replica
    mean_demand, _ = demand(row, dp)
    held = mean_demand / math.ceil(row.concurrency / dp)          # one request's tokens at a uniform age
    n = running_requests(row.concurrency, row.ttft_ms, row.tpot_ms, lengths(row)[1].mean)
    eff = n / dp * held
    model, formats = dep.model, dep.weight_formats
    layout = dep.layout or ParallelLayout(tensor_parallel_size=case.target.tensor_parallel_size)
    read = model.weight_read_bytes(formats, layout.tp, tokens=max(1, round(n / dp)),
                                   moe_shards=layout.moe_shards, moe_tokens=max(1, round(n)))
    floor_ms = read / dep.gpu.memory_bandwidth_bytes_per_s * 1e3
    return {"id": row.id, "version": row.vllm_version, "conc": row.concurrency, "isl": row.isl, "osl": row.osl,
            "tp": layout.tp, "dp": dp, "ttft_ms": row.ttft_ms, "tpot_ms": row.tpot_ms, "running": n,
            "pool_tokens": pool.capacity_tokens, "demand_over_pool": mean_demand / pool.capacity_tokens,
            "effective_pool_tokens": eff,
            "gap_gib": (pool.capacity_tokens - eff) * pool.kv_bytes_per_token / GIB,
            "floor_ms": floor_ms, "below_floor": row.tpot_ms < floor_ms}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--match", default="", help="only rows whose id contains this")
    ap.add_argument("--deficit", type=positive_float, default=0.9, help="list rows running fewer than this x C")
    ap.add_argument("--ttft-s", type=positive_float, default=2.0, help="and rows whose measured TTFT exceeds this")
    ap.add_argument("--simulate", action="store_true", help="simulate the listed rows at the embedded defaults")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--rule", default=None, choices=RULES, help="the pool under this pool_release_rows rule")
    args = ap.parse_args()
    check_out_path(args.json, "--json")
    rows = [r for r in read_silicon(silicon_dir(args.ground_truth)) if args.match in r.id and r.published_client]
    cases, _ = silicon_cases(args.ground_truth, max_requests=None, rows=rows)
    out, seen, listed = [], set(), []
    print(f"{'row':<58} {'ver':>7} {'C':>4} {'tp':>2} {'TTFT ms':>8} {'TPOT':>5} {'N':>5} {'pool tok':>9} "
          f"{'dem/pool':>8} {'eff tok':>8} {'gap GiB':>7} {'floor':>5}")
    for c in cases:
        r = c.row
        key = (r.model_path, r.system, r.precision, r.isl, r.osl, r.concurrency, r.tp, round(r.ttft_ms))
        if key in seen:
            continue
        seen.add(key)
        rec = row_reading(c, args.rule)
        if rec["running"] >= args.deficit * r.concurrency and r.ttft_ms < args.ttft_s * 1e3:
            continue
        out.append(rec)
        listed.append(c)
        print(f"{r.id[:58]:<58} {str(r.vllm_version or '-')[:7]:>7} {r.concurrency:4d} {rec['tp']:2d} "
              f"{r.ttft_ms:8.0f} {r.tpot_ms:5.1f} {rec['running']:5.0f} {rec['pool_tokens']:9d} "
              f"{rec['demand_over_pool']:8.2f} {rec['effective_pool_tokens']:8.0f} {rec['gap_gib']:7.1f} "
              f"{rec['floor_ms']:5.1f}{' <' if rec['below_floor'] else ''}")
    if args.simulate:
        print(f"\n{'row':<58} {'TTFT meas':>9} {'twin':>8} {'err':>6} | {'TPOT meas':>9} {'twin':>6} {'err':>6} | "
              f"{'max KV':>6} {'preempt':>7}")
        for rec, c, r in zip(out, listed, simulate_cases(listed, default_start(()), max_sim_s=None)):
            m = r.metrics
            rec["twin"] = {k: m.get(k) for k in ("mean_ttft_ms", "mean_tpot_ms", "max_kv_usage", "num_preemptions",
                                                  "max_in_flight_requests")}
            ttft, tpot = m["mean_ttft_ms"], m["mean_tpot_ms"]
            print(f"{rec['id'][:58]:<58} {rec['ttft_ms']:9.0f} {ttft:8.0f} {ttft / rec['ttft_ms'] - 1:+6.0%} | "
                  f"{rec['tpot_ms']:9.1f} {tpot:6.1f} {tpot / rec['tpot_ms'] - 1:+6.0%} | "
                  f"{m.get('max_kv_usage') or 0:6.2f} {m.get('num_preemptions') or 0:7d}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    run_script(main)
