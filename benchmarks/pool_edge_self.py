"""Is Little's law on a pool-bound closed loop a reading of the pool? The twin checked against itself.

``pool_edge.py`` reads a real server's pool off its row: N = C x decode / (TTFT + decode) requests past their
first token, each holding (mean prompt + half the mean output) tokens, so the pool the server behaved as if it
had is N x held. This script applies the same reading to the twin's own run of the row, whose pool is known
exactly: ``self`` = N_twin x held / twin pool. If the reading were exact, ``self`` would be 1.00; what it is
instead is the bias of the reading at that row (requests preempted after their first token count as decoding but
hold nothing; a request's tokens do not grow uniformly over its life once preemptions stall it). The real
server's pool by the same reading, corrected by the twin's bias, is then eff / self.

``--scale`` also reruns each row with the twin's pool scaled (``num_gpu_blocks_override``), so the pool at which
the twin reproduces the measured TTFT can be read off directly:

    python benchmarks/pool_edge_self.py --match ROW_ID_PART [--conc 64] [--scale 1.0,0.97]
        [--server async_free_after_next_schedule=true] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, positive_int  # noqa: E402
from benchmarks.pool_edge import row_reading, running_requests  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import default_start  # noqa: E402
from twin.fitting.replay import deployment_for  # noqa: E402
from twin.fitting.silicon import lengths, read_silicon, silicon_cases, silicon_dir  # noqa: E402
from twin.yaml_input import parse_set_options  # noqa: E402


def scaled_case(case, scale: float, server: dict | None = None):
    """The case with its KV pool scaled by ``scale`` (whole blocks, vLLM's ``num_gpu_blocks_override``) and
    ``server`` knobs set."""
    extra = dict(server or {})
    if scale != 1.0:
        blocks = deployment_for(case.run, case.target).num_gpu_blocks
        extra["num_gpu_blocks_override"] = max(2, round(blocks * scale))
    if not extra:
        return case
    run = dataclasses.replace(case.run, server={**case.run.server, **extra})
    return dataclasses.replace(case, run=run)


def parse_server(items: list[str]) -> dict:
    """``KEY=VALUE`` server knobs (VALUE read as a YAML scalar), as ``twin run --set`` reads them."""
    try:
        return parse_set_options(items)
    except TwinInputError as exc:
        raise SystemExit(f"--server: expected KEY=VALUE ({exc})") from None


def self_reading(rec: dict, conc: int, mean_osl: float, ttft_ms: float, tpot_ms: float, pool_tokens: int) -> dict:
    """Little's law on the twin's own means, against the twin's own pool (``rec``: ``pool_edge.row_reading``)."""
    n = running_requests(conc, ttft_ms, tpot_ms, mean_osl)
    held = rec["effective_pool_tokens"] / rec["running"] * rec["dp"]       # per request per rank
    return {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "running": n, "pool_tokens": pool_tokens,
            "self": n / rec["dp"] * held / pool_tokens}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--match", required=True, help="rows whose id contains this")
    ap.add_argument("--scale", default="1.0", help="comma-separated pool scales to simulate")
    ap.add_argument("--server", action="append", default=[], help="KEY=VALUE server knob (repeatable)")
    ap.add_argument("--conc", type=positive_int, default=None, help="only rows at this concurrency")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    check_out_path(args.json, "--json")
    server = parse_server(args.server)
    try:
        scales = [float(s) for s in args.scale.split(",") if s]
    except ValueError:
        raise SystemExit(f"--scale: not a list of numbers: {args.scale!r}") from None
    if not scales or any(not 0.1 <= s <= 2.0 for s in scales):
        raise SystemExit("--scale: each scale must lie in [0.1, 2.0]")
    rows = [r for r in read_silicon(silicon_dir(args.ground_truth)) if args.match in r.id and r.published_client
            and (args.conc is None or r.concurrency == args.conc)]
    cases, _ = silicon_cases(args.ground_truth, max_requests=None, rows=rows)
    if not cases:
        raise SystemExit(f"--match {args.match!r}: no runnable row")
    out = []
    print(f"{'row':<58} {'scale':>5} {'pool tok':>9} {'TTFT meas':>9} {'twin':>7} {'err':>5} | {'TPOT':>5} "
          f"{'twin':>5} | {'N meas':>6} {'N twin':>6} {'self':>5} {'eff/self':>8} {'preempt':>6}")
    for scale in scales:
        sc = [scaled_case(c, scale, server) for c in cases]
        for c, r in zip(sc, simulate_cases(sc, default_start(()), max_sim_s=None)):
            row = c.row
            rec = row_reading(c)
            m = r.metrics
            s = self_reading(rec, row.concurrency, lengths(row)[1].mean, m["mean_ttft_ms"], m["mean_tpot_ms"],
                             rec["pool_tokens"])
            s |= {"id": row.id, "scale": scale, "measured": {k: rec[k] for k in ("ttft_ms", "tpot_ms", "running",
                                                                                  "effective_pool_tokens")},
                  "num_preemptions": m.get("num_preemptions"), "server": server}
            out.append(s)
            print(f"{row.id[:58]:<58} {scale:5.3f} {rec['pool_tokens']:9d} {row.ttft_ms:9.0f} {s['ttft_ms']:7.0f} "
                  f"{s['ttft_ms'] / row.ttft_ms - 1:+5.0%} | {row.tpot_ms:5.1f} {s['tpot_ms']:5.1f} | "
                  f"{rec['running']:6.1f} {s['running']:6.1f} {s['self']:5.3f} "
                  f"{rec['effective_pool_tokens'] / s['self']:8.0f} {s['num_preemptions'] or 0:6d}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    run_script(main)
