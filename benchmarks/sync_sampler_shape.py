"""Per sequence or per step? What the Qwen3-32B H100 rows (vLLM 0.12.0, no async scheduling, sampled with top-k /
top-p) say about the SHAPE of their extra time (issue 33, round 11; docs/fidelity.md "Round 11: Qwen3's sampler
and the sync step").

Every Qwen3 row is simulated (the embedded defaults, ``--sim-s`` seconds of traffic) at two values of
``per_seq_overhead_s@sync``: the embedded one and that plus ``--delta-us``. The twin's TPOT is linear in it (a
per-sequence cost per step), so each row's IMPLIED per-sequence value (the one its signed TPOT error is 0 at) is
read off by interpolation. A cost that is really per step (S seconds each step, whatever the batch) would show up
as implied(B) = a + S / B over the batch B; a cost per sequence as a flat implied value. The fit of a + S / B
over the rows (least squares, by TP and all together) is printed beside each batch's median. The implied values
carry every other error of these rows too (prefill interleaving, attention): a reading, not a measurement.

    python benchmarks/sync_sampler_shape.py --save runs.json          # ~20-30 min on a shared 2-core machine
    python benchmarks/sync_sampler_shape.py --from runs.json
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, finite_float, positive_float  # noqa: E402
from benchmarks.saved_rows import read_rows  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402
from twin.fitting.fit import check_simulation_options  # noqa: E402

SYNC = "per_seq_overhead_s@sync"


def simulate(sim_s: float, delta_us: float) -> list[dict]:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import default_start
    from twin.fitting.silicon import model_family, silicon_cases
    cases = [c for c in silicon_cases()[0] if model_family(c.row.model_path) == "qwen3"]
    base = default_start()
    out = []
    for v in (base[SYNC], base[SYNC] + delta_us * 1e-6):
        res = simulate_cases(cases, base | {SYNC: v}, max_sim_s=sim_s)
        out += [dict(v_us=v * 1e6, tp=c.row.tp, isl=c.row.isl, osl=c.row.osl, conc=c.row.concurrency,
                     fp8=bool(c.row.gemm_quant), meas=c.row.tpot_ms, pred=r.metrics["mean_tpot_ms"])
                for c, r in zip(cases, res)]
    return out


def implied(runs: list[dict]) -> list[dict]:
    """Per row: the per-sequence value (us) at which the twin's TPOT equals the measured one."""
    by = collections.defaultdict(dict)
    for r in runs:
        by[(r["tp"], r["isl"], r["osl"], r["conc"], r["fp8"], r["meas"])][r["v_us"]] = r
    out = []
    for key, vals in by.items():
        if len(vals) < 2:
            raise TwinInputError(f"row {key}: one value of {SYNC} only; the runs need two (a --save file)")
        (v0, r0), (v1, r1) = sorted(vals.items())[:2]
        slope = (r1["pred"] - r0["pred"]) / (v1 - v0)
        if slope <= 0:
            continue
        out.append(dict(r0, implied_us=v0 + (r0["meas"] - r0["pred"]) / slope, err0=r0["pred"] / r0["meas"] - 1))
    return out


def fit_a_s(rows: list[dict]) -> tuple[float, float]:
    """Least squares of implied = a + S / B: (a us per sequence, S us per step)."""
    xs = [1.0 / r["conc"] for r in rows]
    ys = [r["implied_us"] for r in rows]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    s = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - s * mx, s


def report(runs: list[dict]) -> None:
    rows = [r for r in implied(runs) if not r["fp8"]]
    print(f"{len(rows)} bf16 rows; embedded {SYNC} = {min(r['v_us'] for r in runs):.1f} us")
    print("\n| batch (C) | rows | median signed TPOT error at the embedded value | median implied us per sequence |")
    print("|---|---|---|---|")
    for c in sorted({r["conc"] for r in rows}):
        sel = [r for r in rows if r["conc"] == c]
        print(f"| {c} | {len(sel)} | {statistics.median(r['err0'] for r in sel):+.1%} | "
              f"{statistics.median(r['implied_us'] for r in sel):.1f} |")
    print("\n| rows | a (us per sequence) | S (us per step) |")
    print("|---|---|---|")
    for name, keep in (("TP2", lambda r: r["tp"] == 2), ("TP4", lambda r: r["tp"] == 4),
                       ("TP8", lambda r: r["tp"] == 8), ("all bf16", lambda r: True),
                       ("all bf16, OSL >= 512", lambda r: r["osl"] >= 512)):
        sel = [r for r in rows if keep(r)]
        a, s = fit_a_s(sel)
        print(f"| {name} ({len(sel)}) | {a:.1f} | {s:.0f} |")
    for r in (r for r in implied(runs) if r["fp8"]):
        print(f"FP8 {r['isl']}x{r['osl']} TP{r['tp']} C={r['conc']}: error {r['err0']:+.1%}, implied "
              f"{r['implied_us']:.1f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="saved", type=Path)
    ap.add_argument("--save", type=Path)
    ap.add_argument("--sim-s", type=positive_float, default=60.0)
    ap.add_argument("--delta-us", type=finite_float, default=30.0)
    args = ap.parse_args()
    check_out_path(args.save, "--save")
    check_simulation_options(args.sim_s, 1)
    runs = read_rows(args.saved, counts=("tp", "isl", "osl", "conc"), positive=("meas", "pred", "v_us"),
                     flags=("fp8",)) if args.saved else simulate(args.sim_s, args.delta_us)
    if args.save:
        args.save.write_text(json.dumps(runs))
    report(runs)


if __name__ == "__main__":
    run_script(main)
