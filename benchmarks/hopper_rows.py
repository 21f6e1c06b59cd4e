"""The H100 silicon rows (issue 33, round 5: Hopper): their slices before / after, and the held-out fits of the
Hopper FP8 expert path's two embedded values (``twin.cost.generation_experts``).

    # slices of two ``fidelity_real.py --defaults-only --json`` files (before, after), every family beside them
    python benchmarks/hopper_rows.py slices before.json after.json
    # the expert FLOP efficiency from MiniMax-M2.5 H100's 8k-minus-1k TTFT, one measurement date held out (~3 min)
    python benchmarks/hopper_rows.py prefill-fit
    # the fixed time per MoE layer from its OSL-8k rows' TPOT, the other shapes held out (~2 min)
    python benchmarks/hopper_rows.py decode-fit

The prefill fit uses differences: per (measurement date, CONC <= 16) the measured TTFT of the 8k/1k row minus the
1k/1k row's, against the twin's at each efficiency of a grid (log-interpolated); a per-request offset (request
path, the first step) cancels in the difference. The fitted value minimises the median log ratio on one date and
is tested on the other. Signed errors: predicted / measured - 1.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fold_report import defaults_cases  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import default_start  # noqa: E402
from twin.fitting.silicon import minimax_h100, silicon_cases  # noqa: E402
from twin.errors import run_script  # noqa: E402

EFF = "moe_expert_compute_efficiency@hopper+experts_fp8"
LAYER = "moe_layer_overhead_s@hopper+experts_fp8"
GRID = (1.0, 0.4, 0.25, 0.18, 0.13, 0.1)


def _band(c: int) -> str:
    return "C<=8" if c <= 8 else "C16-64" if c <= 64 else "C>64"


def _cell(rs: list[dict], metric: str) -> str:
    e = [r["errors"][metric] for r in rs if metric in r["errors"]]
    return f"{statistics.median(abs(x) for x in e):5.1%} ({statistics.median(e):+6.1%})" if e else "       -       "


def _slices(path: Path) -> dict[str, list[dict]]:
    cases = defaults_cases(path, need=("source", "family", "errors"), row_need=("gpu",))
    out: dict[str, list[dict]] = {}
    for r in cases:
        keys = [f"all {r['source']}", f"family {r['family']}"]
        if r.get("gpu") == "H100-SXM" and r["source"] != "inference-perf":
            shape = f"{r['isl']}/{r['osl']}" if "isl" in r else "?"
            keys += ["H100 all", f"H100 {r['family']}", f"H100 {r['family']} {shape}",
                     f"H100 {r['family']} {_band(r.get('conc', 0))}"]
        elif r["source"] != "inference-perf":
            keys.append(f"{r['gpu']} all")
        for k in keys:
            out.setdefault(k, []).append(r)
    return out


def slices(before: Path, after: Path) -> None:
    b, a = _slices(before), _slices(after)
    print(f"{'slice':<34} {'n':>4} | {'TTFT mean: before':>19} {'after':>15} | {'TPOT: before':>15} {'after':>15}")
    for k in sorted(set(b) | set(a), key=lambda k: (not k.startswith("all"), not k.startswith("family"),
                                                     k.split()[0] != "H100", k)):
        rb, ra = b.get(k, []), a.get(k, [])
        print(f"{k[:34]:<34} {len(ra):4d} | {_cell(rb, 'mean_ttft_ms'):>19} {_cell(ra, 'mean_ttft_ms'):>15} | "
              f"{_cell(rb, 'mean_tpot_ms'):>15} {_cell(ra, 'mean_tpot_ms'):>15}")


def _minimax_cases(keep) -> list:
    return [c for c in silicon_cases()[0] if minimax_h100(c.row) and keep(c.row)]


def _date(row) -> str:
    return (row.measured or "")[:10]


def _simulate(cases: list, params: dict) -> list[dict]:
    return [r.metrics for r in simulate_cases(cases, default_start() | params, max_sim_s=60.0)]


def prefill_fit() -> None:
    cases = _minimax_cases(lambda r: r.osl == 1024 and r.isl in (1024, 8192) and r.concurrency <= 16)
    pred = {e: _simulate(cases, {EFF: e}) for e in GRID}
    pairs: dict[tuple[str, int], dict[int, int]] = {}
    for i, c in enumerate(cases):
        pairs.setdefault((_date(c.row), c.row.concurrency), {})[c.row.isl] = i
    pairs = {k: v for k, v in pairs.items() if len(v) == 2}

    def delta(source, k):
        i1, i8 = pairs[k][1024], pairs[k][8192]
        return source[i8]["mean_ttft_ms"] - source[i1]["mean_ttft_ms"]

    measured = [c.run.metrics for c in cases]

    def at(e: float, k) -> float:        # the twin's difference at efficiency e, log-interpolated on the grid
        xs = [math.log(g) for g in GRID]
        ys = [math.log(delta(pred[g], k)) for g in GRID]
        x = math.log(e)
        for j in range(len(GRID) - 1):
            if xs[j] >= x >= xs[j + 1]:
                t = (x - xs[j]) / (xs[j + 1] - xs[j])
                return math.exp(ys[j] + t * (ys[j + 1] - ys[j]))
        raise ValueError(e)

    dates = sorted({d for d, _ in pairs})
    fine = [round(GRID[-1] + 0.005 * i, 3) for i in range(int((GRID[0] - GRID[-1]) / 0.005) + 1)]
    for train in [[d] for d in dates] + [dates]:
        ks = [k for k in pairs if k[0] in train]
        best = min(fine, key=lambda e: abs(statistics.median(math.log(at(e, k) / delta(measured, k)) for k in ks)))
        print(f"fit on {', '.join(train)}: {EFF} = {best}")
        for k in sorted(pairs):
            if k[0] in train and len(train) < len(dates):
                continue
            m = delta(measured, k)
            print(f"  {k[0]} C={k[1]:<3} 8k - 1k TTFT: measured {m:6.0f} ms, twin at 1.0 {delta(pred[1.0], k):5.0f} "
                  f"({delta(pred[1.0], k) / m - 1:+5.0%}), at {best} {at(best, k):5.0f} ({at(best, k) / m - 1:+5.0%})")


def decode_fit(values: tuple[float, ...] = (0.0, 16e-6, 24e-6)) -> None:
    cases = _minimax_cases(lambda r: True)
    train = [i for i, c in enumerate(cases) if c.row.osl == 8192 and c.row.concurrency <= 32]
    for v in values:
        pred = _simulate(cases, {LAYER: v})
        err = [p["mean_tpot_ms"] / c.run.metrics["mean_tpot_ms"] - 1 for c, p in zip(cases, pred)]

        def med(idx):
            return f"{statistics.median(err[i] for i in idx):+6.1%} (n {len(idx)})"
        held_11 = [i for i, c in enumerate(cases) if (c.row.isl, c.row.osl) == (1024, 1024)]
        held_81 = [i for i, c in enumerate(cases) if c.row.isl == 8192 and c.row.concurrency <= 16]
        print(f"{LAYER} = {v * 1e6:4.0f} us: fit rows 1k/8k C<=32 {med(train)}; held out 1k/1k {med(held_11)}, "
              f"8k/1k C<=16 {med(held_81)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("slices")
    s.add_argument("before", type=Path)
    s.add_argument("after", type=Path)
    sub.add_parser("prefill-fit")
    sub.add_parser("decode-fit")
    args = ap.parse_args()
    if args.cmd == "slices":
        slices(args.before, args.after)
    elif args.cmd == "prefill-fit":
        prefill_fit()
    else:
        decode_fit()


if __name__ == "__main__":
    run_script(main)
