"""Every vLLM silicon measurement (../shared/ground-truth/vllm-silicon-h100-b200/measurements.csv) as a twin
scenario: the rows that are not disaggregated are built into scenarios by `twin.fitting.silicon.row_scenario`
(the row's model and checkpoint formats, GPU, TP/PP/DP/EP layout, server flags and closed-loop client) and each
is resolved (KV pool sized, cost model built) and run briefly. Prints how many rows cannot be expressed, and
why (target: 0), how many failed to resolve or run, and the rows by model, GPU, format and layout.

    python benchmarks/silicon_scenarios.py [--requests-per-conc 1] [--every 1] [--compare] [--json out.json]

Short runs: ``--requests-per-conc`` waves of the client's concurrency (not its 10), optionally cut at
``--max-sim-s`` simulated seconds. All 860 aggregated rows run in ~85 s on this 2-core VM. ``--compare`` adds the measured and simulated mean TTFT / TPOT of every row (longer
runs make these meaningful; the fidelity itself is benchmarks/fidelity_real.py's business).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, positive_float, positive_int  # noqa: E402
from twin.errors import TwinInputError  # noqa: E402
from twin.fitting.silicon import (not_expressible, read_silicon, row_layout, row_scenario,  # noqa: E402
                                  silicon_dir, weight_dtype)
from twin.scenario import ScenarioBody  # noqa: E402
from twin.sim.deployment import resolve_deployment  # noqa: E402
from twin.sim.run import metrics_of, run_body  # noqa: E402


def layout_name(row) -> str:
    lay = row_layout(row)
    parts = [f"TP{lay['tensor_parallel_size']}"]
    if lay["pipeline_parallel_size"] > 1:
        parts.append(f"PP{lay['pipeline_parallel_size']}")
    if lay["data_parallel_size"] > 1:
        parts.append(f"DP{lay['data_parallel_size']}")
    if lay["enable_expert_parallel"]:     # the experts over the launched server's tp x dp GPUs
        parts.append(f"EP{lay['tensor_parallel_size'] * lay['data_parallel_size']}")
    return "+".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--requests-per-conc", type=positive_int, default=1)
    ap.add_argument("--max-sim-s", type=positive_float, default=None,
                    help="stop each run after this many simulated seconds (default: run the wave out)")
    ap.add_argument("--every", type=positive_int, default=1, help="run every N-th row (all are built and resolved)")
    ap.add_argument("--compare", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    check_out_path(args.json, "--json")

    folder = silicon_dir(args.ground_truth)
    rows = read_silicon(folder)
    agg = [r for r in rows if r.mode != "disagg"]
    unexpressed: list[tuple[str, str]] = []
    failed: list[tuple[str, str]] = []
    ran: list[dict] = []
    kinds: collections.Counter = collections.Counter()
    t0 = time.perf_counter()
    for i, row in enumerate(agg):
        reason = not_expressible(row)
        if reason:
            unexpressed.append((row.id, reason))
            continue
        data = row_scenario(row, folder, max_requests=None)
        data["workload"]["num_requests"] = args.requests_per_conc * row.concurrency
        if args.max_sim_s:
            data["max_sim_time_s"] = args.max_sim_s
        try:
            body = ScenarioBody.model_validate(data)
            dep = resolve_deployment(body)
            if i % args.every == 0:
                m = metrics_of(run_body(body, deployment=dep), body)
                if not m.get("completed") and not m.get("num_requests_started", 1):
                    raise RuntimeError("nothing ran")
            else:
                m = None
        except (TwinInputError, ValueError, RuntimeError) as exc:
            failed.append((row.id, str(exc).splitlines()[0][:300]))
            continue
        kinds[(row.model_path.split("/")[-1], row.system, weight_dtype(row), layout_name(row))] += 1
        entry = {"id": row.id, "blocks": dep.num_gpu_blocks, "block_size": dep.scheduler_config.block_size,
                 "weights_gib": round(dep.kv_pool.weight_bytes / 2**30, 2)}
        if m is not None and args.compare:
            entry.update(measured_ttft_ms=row.ttft_ms, measured_tpot_ms=row.tpot_ms,
                         sim_ttft_ms=m.get("mean_ttft_ms"), sim_tpot_ms=m.get("mean_tpot_ms"))
        ran.append(entry)
    wall = time.perf_counter() - t0

    print(f"{len(rows)} rows; {len(rows) - len(agg)} disaggregated (left out); {len(agg)} aggregated")
    print(f"cannot be expressed: {len(unexpressed)}")
    for ident, reason in unexpressed:
        print(f"  {ident}: {reason}")
    print(f"expressed but failed to resolve or run: {len(failed)}")
    for ident, reason in failed:
        print(f"  {ident}: {reason}")
    print(f"resolved: {len(ran)} (run: {sum(1 for i, _ in enumerate(agg) if i % args.every == 0)} "
          f"of them sampled every {args.every}), {wall:.1f} s")
    print("\nrows by model, GPU, weight format, layout:")
    for (model, gpu, fmt, lay), n in sorted(kinds.items()):
        print(f"  {n:4d}  {model:22s} {gpu:9s} {fmt:6s} {lay}")
    if args.compare:
        print("\nid | measured TTFT / TPOT ms | simulated TTFT / TPOT ms")
        for e in ran:
            if "sim_ttft_ms" in e:
                print(f"{e['id']} | {e['measured_ttft_ms']:.1f} / {e['measured_tpot_ms']:.2f} | "
                      f"{e['sim_ttft_ms'] or float('nan'):.1f} / {e['sim_tpot_ms'] or float('nan'):.2f}")
    if args.json:
        args.json.write_text(json.dumps({"unexpressed": unexpressed, "failed": failed, "ran": ran}, indent=1))
    return 0 if not unexpressed and not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
