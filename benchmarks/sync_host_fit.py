"""The held-out fit of ``sync_seq_host_s`` (twin.cost.sync_host, issue 33 round 6) on the Qwen3-32B H100 rows
(vLLM 0.12.0, no async scheduling): fitted on the TP8 rows, checked on the TP2 and TP4 rows held out.

Each row is simulated (the embedded defaults, 60 s of traffic) at two values of the sync servers' per-sequence
cost ``per_seq_overhead_s@sync`` (the fit's name for 18.7 us + ``sync_seq_host_s``): the prior (0 exposed) and a
trial value; the twin's TPOT is linear in it between the two (a per-sequence cost per step), so the value whose
median signed TPOT error on the TP8 rows is 0 is read off by interpolation, then the held-out rows are judged at
it (interpolated, then checked by the full before/after run of ``fidelity_real.py``).

    python benchmarks/sync_host_fit.py                       # ~25 min on a shared 2-core machine
    python benchmarks/sync_host_fit.py --from a.json b.json  # from saved runs of the two values
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.saved_rows import read_rows  # noqa: E402
from twin.errors import run_script  # noqa: E402

SAVED = {"counts": ("tp", "isl", "osl", "conc"), "positive": ("meas", "pred"), "numbers": ("v",), "text": ("fam",)}

PRIOR_US, TRIAL_US = 18.7, 63.7


def simulate(value_us: float) -> list[dict]:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import default_start
    from twin.fitting.silicon import model_family, silicon_cases
    cases = [c for c in silicon_cases()[0] if model_family(c.row.model_path) == "qwen3"]
    res = simulate_cases(cases, default_start() | {"per_seq_overhead_s@sync": value_us * 1e-6}, max_sim_s=60.0)
    return [dict(v=value_us, fam="qwen3", tp=c.row.tp, isl=c.row.isl, osl=c.row.osl, conc=c.row.concurrency,
                 meas=c.row.tpot_ms, pred=r.metrics["mean_tpot_ms"]) for c, r in zip(cases, res)]


def _key(r: dict) -> tuple:
    return r["tp"], r["isl"], r["osl"], r["conc"], r["meas"]


def report(prior: list[dict], trial: list[dict]) -> None:
    t = {_key(r): r for r in trial}
    rows = [(r, t[_key(r)]) for r in prior if r["fam"] == "qwen3" and r["tp"] >= 2 and _key(r) in t]

    def err(r0, r1, x):      # the twin's TPOT at exposed value x (us), interpolated, as a signed error
        p = r0["pred"] + (r1["pred"] - r0["pred"]) * x / (TRIAL_US - PRIOR_US)
        return p / r0["meas"] - 1.0

    fit = [(a, b) for a, b in rows if a["tp"] == 8]
    lo, hi = 0.0, 2 * (TRIAL_US - PRIOR_US)
    for _ in range(60):                       # bisection: the median signed error on the TP8 rows is 0
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if statistics.median(err(a, b, mid) for a, b in fit) < 0 else (lo, mid)
    x = round(0.5 * (lo + hi))
    print(f"fitted on the TP8 rows ({len(fit)}): sync_seq_host_s = {x} us (per_seq_overhead_s@sync "
          f"{PRIOR_US + x:.1f} us)")
    for name, keep in (("TP8 (fit)", lambda r: r["tp"] == 8), ("TP4 held out", lambda r: r["tp"] == 4),
                       ("TP2 held out", lambda r: r["tp"] == 2),
                       ("TP2 held out, C <= 32", lambda r: r["tp"] == 2 and r["conc"] <= 32),
                       ("TP2 + TP4 held out", lambda r: r["tp"] in (2, 4))):
        sel = [(a, b) for a, b in rows if keep(a)]
        for label, v in (("prior 0", 0.0), (f"{x} us", float(x))):
            e = [err(a, b, v) for a, b in sel]
            print(f"  {name:<22} n {len(sel):>3} at {label:>7}: TPOT {statistics.median(map(abs, e)):5.1%} "
                  f"({statistics.median(e):+6.1%})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="saved", nargs=2, type=Path, metavar=("PRIOR_JSON", "TRIAL_JSON"))
    args = ap.parse_args()
    if args.saved:
        prior, trial = (read_rows(p, **SAVED) for p in args.saved)
        prior = [r for r in prior if r["v"] == PRIOR_US]
    else:
        prior, trial = simulate(PRIOR_US), simulate(TRIAL_US)
    report(prior, trial)


if __name__ == "__main__":
    run_script(main)
