"""Is there a serving front-end ceiling at high concurrency, and what does it scale with? (issue 33, round 14)

Round 13 (``benchmarks/pool_edge.py``) found gpt-oss-120b's nine H100 C = 512 rows running ~88-98 requests at
once whatever the TP and prompt length, and read a front-end or client ceiling of 17-22 requests/s. This reads
every row of both ground-truth sources by Little's law and tests the forms such a ceiling could take.

Per row: ``rps`` and ``out tok/s`` (a closed loop of C users: C / E2E and that x mean OSL; an inference-perf
stage: its measured throughput) and the achieved concurrency: for a silicon row the requests decoding at once,
``N = C x decode / E2E`` (``pool_edge.running_requests``); for an inference-perf stage the served rate x mean E2E.
A closed-loop row *falls short* when ``N < deficit x C`` (at ``C >= --min-conc``); an open-loop stage when it
served less than ``deficit`` x its offered rate (stages with failed requests, the reasoning runs whose client
timed out, are left out).

* **A rate** the front end (or the client) cannot exceed: a serial time per request ``h_s`` plus one per streamed
  token ``c_s``, saturated when ``rps x h_s + out tok/s x c_s = 1``. If row A ran at least row B's requests/s
  *and* its output tokens/s (``dominates``), A's load is at least B's for every ``h_s, c_s >= 0``: B cannot be
  at such a ceiling while A, on the same machines, client and stream interval, ran at it or below. For each row
  that fell short the script counts the rows above it on both rates that did not fall short, and those that fell
  short too (with how many of them are of its own fleet: family, GPU and month). Rows of other fleets may stream
  differently (the 2026 MiniMax scripts pass ``--stream-interval 20``), so the same-fleet count is the test.
* **A count** of requests in flight: ``N`` the same whatever the rates. ``--simulate`` runs the short rows
  (``--match``) at the embedded defaults as measured and with the server's ``max_num_seqs`` at ``--cap`` (in a
  closed loop the requests held back count in TTFT wherever they wait), and prints the TTFT / TPOT / E2E errors.

    python benchmarks/frontend_ceiling.py [--deficit 0.9] [--min-conc 64] [--simulate --cap 100] [--json out.json]

Reads the rows only (a few seconds); ``--simulate`` takes ~5 minutes for the nine gpt-oss rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, finite_float, positive_int, refuse_given  # noqa: E402
from benchmarks.pool_edge import running_requests  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402


class Load(NamedTuple):
    """One row's Little's-law reading."""

    source: str
    id: str
    group: str          # model family, GPU, TP / DP, release, month, ISL x OSL
    conc: float         # the client's concurrency (closed loop) or max_num_seqs (open loop)
    rps: float          # requests per second
    out_tok_s: float    # output tokens per second
    running: float      # requests decoding at once (silicon) or rate x E2E (inference-perf)
    ttft_ms: float
    offered_rps: float = math.inf   # an open loop's offered rate (inference-perf); inf for a closed loop

    @property
    def fleet(self) -> str:
        """Model family, GPU and month: rows measured on the same machines with the same client."""
        parts = self.group.split()
        return " ".join(parts[:2] + parts[-2:-1]) if self.source == "silicon" else "inference-perf"

    def short(self, deficit: float) -> bool:
        """A closed loop ran fewer than ``deficit`` x C at once; an open loop served less than ``deficit`` x
        its offered rate."""
        if math.isfinite(self.offered_rps):
            return self.rps < deficit * self.offered_rps
        return self.running < deficit * self.conc


def silicon_loads(ground_truth: Path | None = None) -> list[Load]:
    """Every aggregated silicon row with a published client (duplicates of one configuration kept once)."""
    from twin.fitting.silicon import derived_metrics, lengths, model_family, read_silicon, silicon_dir
    out, seen = [], set()
    for r in read_silicon(silicon_dir(ground_truth)):
        if r.mode != "agg" or not r.published_client:
            continue
        key = (r.model_path, r.system, r.precision, r.tp, r.attention_dp, r.moe_ep, r.isl, r.osl, r.concurrency,
               round(r.ttft_ms, 3), round(r.tpot_ms, 4))
        if key in seen:
            continue
        seen.add(key)
        osl, m = lengths(r)[1].mean, derived_metrics(r)
        group = (f"{model_family(r.model_path)} {r.system[:4]} tp{r.tp} dp{r.attention_dp} ep{r.moe_ep} "
                 f"v{r.vllm_version or '-'} {r.month} {r.isl}x{r.osl}")
        out.append(Load("silicon", r.id, group, r.concurrency, m["request_throughput"], m["output_throughput"],
                        running_requests(r.concurrency, r.ttft_ms, r.tpot_ms, osl), r.ttft_ms))
    return out


def inference_perf_loads(ground_truth: Path | None = None) -> list[Load]:
    """Every stage of the inference-perf runs (open loop) with no failed request (the reasoning runs' client
    timed out; their shortfall is the server's 128-sequence cap, not a rate): achieved concurrency = served
    rate x mean E2E, beside the server's ``max_num_seqs``."""
    from twin.fitting.readers.inference_perf import is_inference_perf, read_inference_perf
    from twin.fitting.silicon import silicon_dir
    root = silicon_dir(ground_truth).parent / "h100-vllm-inference-perf"
    out = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and is_inference_perf(p)):
        for run in read_inference_perf(folder):
            m = run.metrics
            if m.get("failed") or not all(k in m for k in ("request_throughput", "output_throughput",
                                                           "mean_e2el_ms", "mean_ttft_ms")):
                continue
            seqs = float((run.server or {}).get("max_num_seqs") or math.inf)
            out.append(Load("inference-perf", run.name, folder.name[16:], seqs, m["request_throughput"],
                            m["output_throughput"], m["request_throughput"] * m["mean_e2el_ms"] / 1e3,
                            m["mean_ttft_ms"], run.rate_per_s))
    return out


def dominates(a: Load, b: Load) -> bool:
    """``a`` ran at least ``b``'s requests/s and output tokens/s: under any front-end rate ceiling
    (``h_s, c_s >= 0``) ``a``'s load is at least ``b``'s, so if ``b`` saturated the front end, so did ``a``."""
    return a is not b and a.rps >= b.rps and a.out_tok_s >= b.out_tok_s


def reading(loads: list[Load], deficit: float, min_conc: float) -> dict:
    """The tests of the module docstring: the rows that fell short, and for each the rows that ran at least
    its requests/s and its output tokens/s, on the same deployment group or anywhere, and did not fall short
    (a rate ceiling cannot be the reason) or fell short by the same count (a count, not a rate)."""
    short = [r for r in loads if r.short(deficit) and r.conc >= min_conc]
    full = [r for r in loads if not r.short(deficit)]
    rows = []
    for r in short:
        rows.append({"row": r,
                     "full_above": [f for f in full if dominates(f, r)],
                     "short_above": [s for s in short if dominates(s, r)]})
    return {"short": rows,
            "full_max_rps": max((r.rps for r in full), default=0.0),
            "full_max_tok": max((r.out_tok_s for r in full), default=0.0)}


def simulate_capped(ids: list[str], cap: int, ground_truth: Path | None = None) -> list[dict]:
    """The silicon rows ``ids`` at the embedded defaults, as measured and with ``max_num_seqs = cap``."""
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import default_start
    from twin.fitting.silicon import read_silicon, silicon_cases, silicon_dir
    rows = [r for r in read_silicon(silicon_dir(ground_truth)) if r.id in set(ids)]
    cases, _ = silicon_cases(ground_truth, max_requests=None, rows=rows)
    capped = [dataclasses.replace(c, run=dataclasses.replace(c.run, server={**(c.run.server or {}),
                                                                               "max_num_seqs": cap}))
              for c in cases]
    start = default_start(())
    out = []
    for c, a, b in zip(cases, simulate_cases(cases, start, max_sim_s=None), simulate_cases(capped, start,
                                                                                         max_sim_s=None)):
        m = c.run.metrics
        rec = {"id": c.row.id}
        for tag, rep in (("as measured", a), (f"cap {cap}", b)):
            rec[tag] = {k: rep.metrics[k] / m[k] - 1.0 for k in ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")
                        if rep.metrics.get(k) and m.get(k)}
        out.append(rec)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--deficit", type=finite_float, default=0.9, help="a row falls short below this x its concurrency")
    ap.add_argument("--min-conc", type=finite_float, default=64,
                    help="only rows at this concurrency or more fall short "
                         "(below it a short fall is a slow prompt, not a ceiling)")
    ap.add_argument("--simulate", action="store_true", help="simulate the silicon rows that fell short")
    ap.add_argument("--cap", type=positive_int, default=None, help="the count cap --simulate tries (default 100)")
    ap.add_argument("--match", default=None,
                    help="--simulate only short rows whose id has this (default gpt_oss_120b_h100)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    check_out_path(args.json, "--json")
    if not args.simulate:
        refuse_given(args, ("--cap", "--match"), "with --simulate")
    args.cap = 100 if args.cap is None else args.cap
    args.match = "gpt_oss_120b_h100" if args.match is None else args.match
    if not 0 < args.deficit <= 1 or args.cap < 1:
        raise TwinInputError("--deficit must be in (0, 1] and --cap >= 1")
    loads = silicon_loads(args.ground_truth) + inference_perf_loads(args.ground_truth)
    res = reading(loads, args.deficit, args.min_conc)
    print(f"{len(loads)} rows ({sum(r.source == 'silicon' for r in loads)} silicon, "
          f"{sum(r.source != 'silicon' for r in loads)} inference-perf stages); fell short (C >= "
          f"{args.min_conc:g}): {len(res['short'])}; the others reach {res['full_max_rps']:.1f} requests/s and "
          f"{res['full_max_tok']:.0f} output tokens/s")
    head = "row (family GPU TP DP EP release month ISL x OSL)"
    print(f"{head:<58} {'C':>5} {'N':>5} {'rps':>5} {'tok/s':>6} {'TTFT s':>6}  above it on both rates: "
          f"full rows / short rows (same fleet)")
    for d in res["short"]:
        r = d["row"]
        same = sum(x.fleet == r.fleet for x in d["short_above"])
        print(f"{r.group[:58]:<58} {r.conc:5.0f} {r.running:5.0f} {r.rps:5.1f} {r.out_tok_s:6.0f} "
              f"{r.ttft_ms / 1e3:6.1f}  {len(d['full_above']):3d} / {len(d['short_above']):2d} ({same})")
    sims = []
    if args.simulate and res["short"]:
        ids = [d["row"].id for d in res["short"] if d["row"].source == "silicon" and args.match in d["row"].id]
        sims = simulate_capped(ids, args.cap, args.ground_truth)
        print(f"\n{'row':<62} {'as measured: TTFT / TPOT / E2E':>32} | {f'cap {args.cap}':>24}")
        for s in sims:
            a, b = s["as measured"], s[f"cap {args.cap}"]
            cell = lambda d: " ".join(f"{d.get(k, float('nan')):+7.0%}" for k in  # noqa: E731
                                      ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms"))
            print(f"{s['id'][:62]:<62} {cell(a):>32} | {cell(b):>24}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({
            "short": [{**d["row"]._asdict(), "full_above": [f.id for f in d["full_above"]],
                       "short_above": [x.id for x in d["short_above"]]} for d in res["short"]],
            "full_max_rps": res["full_max_rps"], "full_max_tok": res["full_max_tok"],
            "simulated": sims}, indent=1))


if __name__ == "__main__":
    run_script(main)
