"""Kimi-K2.5 on B200: the embedded defaults' errors on every runnable Kimi silicon row, by expert format, layout,
ISL/OSL and concurrency (issue 33, round 5), optionally with parameters set (``--set name=value``, model units,
scoped names allowed: ``moe_layer_overhead_s@experts_int4=50e-6``) or the round-5 INT4 expert terms removed
(``--without-int4-terms``: the embedded defaults before round 5, to print before / after in one session).

Rows: one per distinct run (the same runs appear up to three times in the file: ``2026-03-25.csv``,
``2026-04-06.csv`` / ``db-dump`` and the gap-analysis copy; the copies with a published client are kept, the
gap-analysis copies, which have fixed lengths and TPOT only, are left out). Errors: predicted / measured - 1
(negative: the twin is too fast); medians per slice.

    python benchmarks/kimi_slices.py                       # the embedded defaults
    python benchmarks/kimi_slices.py --without-int4-terms  # the defaults before round 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, positive_int  # noqa: E402
from twin.cost.marlin_moe import MARLIN_W4A16_MOE_TERMS  # noqa: E402
from twin.fitting.fit import simulate_cases  # noqa: E402
from twin.fitting.joint import METRICS, default_start, errors  # noqa: E402
from twin.fitting.silicon import model_family, silicon_cases  # noqa: E402
from twin.fitting.silicon_layout import row_layout  # noqa: E402
from twin.errors import run_script  # noqa: E402

KEYS = ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "request_throughput")


def kimi_cases(ground_truth: Path | None = None) -> list:
    """One case per distinct Kimi-K2.5 run with a published client (first copy in file order)."""
    cases, _ = silicon_cases(ground_truth)
    out, seen = [], set()
    for c in cases:
        r = c.row
        if model_family(r.model_path) != "kimi" or not r.published_client:
            continue
        # the file's copies of one run carry the same figures up to the last digits of their float text
        key = (r.precision, r.isl, r.osl, r.concurrency, r.tp, round(r.ttft_ms, 3), round(r.tpot_ms, 4))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def slice_of(case) -> str:
    r = case.row
    lay = row_layout(r)
    fmt = "INT4 (Marlin W4A16)" if (r.precision or "").lower() == "int4" else "NVFP4"
    return f"{fmt} TP{lay['tensor_parallel_size']}" + (" EP" if lay["enable_expert_parallel"] else "")


def parse_set(items: list[str]) -> dict[str, float]:
    """``--set NAME=NUMBER`` items (``twin.fitting.scoped.parse_scoped_set_options``: a bad one is one line)."""
    from twin.fitting.scoped import parse_scoped_set_options
    return parse_scoped_set_options(items)


def run(cases: list, params: dict[str, float], workers: int = 1) -> list[dict]:
    """Per case: slice, lengths, concurrency, measured, predicted and signed errors."""
    recs = []
    for c, r in zip(cases, simulate_cases(cases, params, max_sim_s=None, workers=workers)):
        recs.append({"name": c.run.name, "slice": slice_of(c), "isl": c.row.isl, "osl": c.row.osl,
                     "conc": c.row.concurrency, "errors": errors(c, r.metrics),
                     "measured": {k: c.run.metrics.get(k) for k, _ in METRICS},
                     "predicted": {k: r.metrics.get(k) for k in KEYS + ("mean_running_batch",)}})
    return recs


def _med(xs: list[float]) -> str:
    return f"{100 * statistics.median(xs):+6.1f}%" if xs else "     -"


def _abs(xs: list[float]) -> str:
    return f"{100 * statistics.median(abs(x) for x in xs):5.1f}%" if xs else "    -"


def table(recs: list[dict], group) -> list[str]:
    lines = [f"{'slice':<44} {'n':>3} | " + " | ".join(f"{k:^16}" for k in ("TTFT mean", "TPOT", "E2E mean",
                                                                            "throughput"))]
    groups: dict[str, list[dict]] = {}
    for r in recs:
        groups.setdefault(group(r), []).append(r)
    for g in sorted(groups):
        part = groups[g]
        cells = []
        for k in KEYS:
            xs = [r["errors"][k] for r in part if k in r["errors"]]
            cells.append(f"{_abs(xs)} ({_med(xs)})")
        lines.append(f"{g:<44} {len(part):3d} | " + " | ".join(cells))
    return lines


def report(recs: list[dict]) -> str:
    out = ["== by expert format and layout"] + table(recs, lambda r: r["slice"])
    out += ["", "== by format, ISL/OSL"] + table(recs, lambda r: f"{r['slice']} {r['isl']}/{r['osl']}")
    out += ["", "== by format, concurrency"] + table(
        recs, lambda r: f"{r['slice']} C={r['conc']:>3}")
    out += ["", "== all Kimi rows"] + table(recs, lambda r: "all")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], help="name=value in model units (repeatable)")
    ap.add_argument("--without-int4-terms", action="store_true",
                    help="the INT4 expert terms at their priors before round 5 (0 s, 1, 1)")
    ap.add_argument("--workers", type=positive_int, default=1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    check_out_path(args.json, "--json")
    t0 = time.perf_counter()
    params = default_start()
    if args.without_int4_terms:
        params |= {"moe_layer_overhead_s@experts_int4": 0.0, "moe_expert_efficiency@experts_int4": 1.0,
                   "moe_expert_compute_efficiency@experts_int4": 1.0}
    params |= parse_set(args.set)
    cases = kimi_cases()
    recs = run(cases, params, args.workers)
    int4 = {k.split("@")[0]: v for k, v in params.items() if k.endswith("@experts_int4")}
    int4 = {**MARLIN_W4A16_MOE_TERMS, **int4}           # those not passed are embedded (twin.cost.default_terms)
    print(f"{len(recs)} distinct Kimi-K2.5 runs; INT4 expert path: "
          + ", ".join(f"{k}={v:g}" for k, v in int4.items())
          + "; set: " + (", ".join(f"{k}={v:g}" for k, v in parse_set(args.set).items()) or "none"))
    print(report(recs))
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps({"params": params, "cases": recs}, indent=1, default=str))


if __name__ == "__main__":
    run_script(main)
