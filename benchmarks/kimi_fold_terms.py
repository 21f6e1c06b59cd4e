"""Which terms carry Kimi-K2.5's held-out error by family, and how far repeated runs of one Kimi configuration
disagree (issue 33, round 14; docs/fidelity.md "Round 14: Kimi-K2.5 held out by family").

Two readings, no fit and nothing embedded:

* ``terms``: the Kimi family fold's own parameters (a ``fidelity_real.py --folds family --groups kimi --json``
  file), with the Kimi cases simulated as the fold simulates them, then with ONE of the terms whose evidence the
  fold holds out (its plan resets them) set back to the value Kimi's own rows read (the embedded table, or the
  round-12 reading ``twin.cost.mla_request.READINGS`` for the per-request time, which is not embedded), then all of
  them. It says what each term carries of the fold's error; it is not a prior (those values are read off the rows
  the fold holds out). ``--every 16``: the default report's cases (8 Kimi cases); ``--every 1``: every runnable
  Kimi row (the same fold parameters; a wider view, same caveat).
* ``repeats``: the light-load (CONC <= 8) Kimi rows grouped by what the twin is given (checkpoint format, vLLM
  release, TP, ISL, CONC), one entry per distinct measurement (the file's copies of one run carry the same
  figures); per group the measured mean TTFT's spread (max - min) in ms and in the runs' own TPOT. Runs of one
  group differ in their measurement date and output length, neither of which moves the twin's light-load TTFT by
  more than a few ms. ``seeds``: the twin's own spread on one such configuration over simulation seeds.

    python benchmarks/fidelity_real.py --ground-truth G --folds family --groups kimi --workers 1 --json K.json
    python benchmarks/kimi_fold_terms.py terms K.json [--every 16]      # ~1 min (--every 1: ~20 min)
    python benchmarks/kimi_fold_terms.py repeats                          # seconds
    python benchmarks/kimi_fold_terms.py seeds [K.json] [--seeds 5]       # the twin's own spread, ~1 min
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks.cli_checks import positive_int  # noqa: E402
from twin.cost.marlin_moe import MARLIN_W4A16_MOE_TERMS  # noqa: E402
from twin.cost.mla_decode import MLA_TERMS  # noqa: E402
from twin.cost.mla_request import READINGS  # noqa: E402
from twin.errors import run_script  # noqa: E402
from benchmarks.error_medians import metric_medians  # noqa: E402
from benchmarks.fold_report import fold_params  # noqa: E402

METRICS = ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "request_throughput")
# the fold-reset terms and the values Kimi's own rows read (model units); what each carries, not a prior
KIMI_READ_VALUES: dict[str, dict[str, float]] = {
    "MLA time per layer (13.2 us)": {"layer_overhead_s@mla": MLA_TERMS["layer_overhead_s"]},
    "Marlin INT4 fixed time + stream (38.2 us, 0.618)": {
        "moe_layer_overhead_s@experts_int4": MARLIN_W4A16_MOE_TERMS["moe_layer_overhead_s"],
        "moe_expert_efficiency@experts_int4": MARLIN_W4A16_MOE_TERMS["moe_expert_efficiency"]},
    "NVFP4 per-request time (20.9 ms, a reading)": {
        "expert_path_request_s@mla+experts_nvfp4": READINGS["nvfp4"]},
}


def settings() -> list[tuple[str, dict[str, float]]]:
    """(label, parameter overrides): the fold as it is, each Kimi-read value alone, all of them."""
    out = [("the fold (its own parameters)", {})]
    out += [(f"+ {label}", dict(values)) for label, values in KIMI_READ_VALUES.items()]
    out.append(("+ all three", {k: v for values in KIMI_READ_VALUES.values() for k, v in values.items()}))
    return out


def case_slice(fmt: str, tp: int, isl: int, osl: int, conc: int) -> dict[str, str]:
    """The slices one case belongs to (format, format + TP, format + ISL/OSL, format + load)."""
    f = "INT4" if fmt.lower() == "int4" else "NVFP4"
    return {"format": f, "format, TP": f"{f} TP{tp}", "format, ISL/OSL": f"{f} {isl}/{osl}",
            "format, load": f"{f} {'C <= 8' if conc <= 8 else 'C >= 16'}"}


def summary(errs: list[dict[str, float]]) -> dict[str, tuple[float, float, int] | None]:
    """Per metric: (median |error|, median signed error, n), or None without a value."""
    return metric_medians(errs, METRICS)


def cell(s: tuple[float, float, int] | None) -> str:
    return f"{100 * s[0]:5.1f}% ({100 * s[1]:+5.1f}%)" if s else f"{'-':>15}"


def repeat_groups(rows: list[dict]) -> dict[tuple, list[dict]]:
    """Light-load rows (dicts with format, release, script, tp, isl, osl, conc, date, ttft_ms, tpot_ms) grouped by
    what the twin is given at light load (format, release, the server script's flags, TP, ISL, CONC), one entry per
    distinct measurement (rounded TTFT and TPOT: the file's copies of a run), groups of two or more only."""
    groups: dict[tuple, dict[tuple, dict]] = collections.defaultdict(dict)
    for r in rows:
        key = (r["format"], r["release"], r["script"], r["tp"], r["isl"], r["conc"])
        groups[key].setdefault((round(r["ttft_ms"], 1), round(r["tpot_ms"], 2)), r)
    return {k: sorted(v.values(), key=lambda r: r["ttft_ms"]) for k, v in groups.items() if len(v) >= 2}


def spread(runs: list[dict]) -> tuple[float, float]:
    """(max - min of the runs' mean TTFT in ms, the same in units of the runs' median TPOT)."""
    ttft = [r["ttft_ms"] for r in runs]
    return max(ttft) - min(ttft), (max(ttft) - min(ttft)) / statistics.median(r["tpot_ms"] for r in runs)


def floor(groups: dict[tuple, list[dict]], key: str = "ttft_ms") -> float:
    """The median over every run in ``groups`` of |run / its group's median - 1|: what the best constant per group
    (any deterministic term: the twin gives a group's runs one prediction) still misses on ``key``."""
    devs = []
    for runs in groups.values():
        mid = statistics.median(r[key] for r in runs)
        devs += [abs(r[key] / mid - 1) for r in runs]
    return statistics.median(devs)


def kimi_light_rows(ground_truth: Path | None = None, max_conc: int = 8) -> list[dict]:
    from twin.fitting.silicon import kimi_april_fp4, model_family, silicon_cases
    out = []
    for c in silicon_cases(ground_truth)[0]:
        r = c.row
        if model_family(r.model_path) != "kimi" or r.concurrency > max_conc or not r.published_client:
            continue
        script = "2026-04-20 script" if kimi_april_fp4(r) else "March scripts"
        out.append({"format": (r.precision or "").lower(), "release": r.vllm_version or "", "script": script,
                    "tp": r.tp, "isl": r.isl, "osl": r.osl, "conc": r.concurrency, "date": r.measured or "-",
                    "ttft_ms": r.ttft_ms, "tpot_ms": r.tpot_ms})
    return out


def print_repeats(ground_truth: Path | None) -> None:
    groups = repeat_groups(kimi_light_rows(ground_truth))
    print("Kimi-K2.5 light-load runs of one configuration (format, release, script, TP, ISL, CONC): measured mean TTFT")
    spreads = []
    for key, runs in sorted(groups.items()):
        ms, steps = spread(runs)
        spreads.append((ms, steps))
        runs_txt = ", ".join(f"{r['ttft_ms']:.1f} ({r['date'][:10]}, OSL {r['osl']})" for r in runs)
        print(f"  {str(key):<58} spread {ms:5.1f} ms = {steps:4.2f} TPOT | {runs_txt}")
    if spreads:
        print(f"median spread over {len(spreads)} groups: {statistics.median(s[0] for s in spreads):.1f} ms = "
              f"{statistics.median(s[1] for s in spreads):.2f} TPOT")
        print(f"the best constant per group still misses (median |run / group median - 1| over "
              f"{sum(len(v) for v in groups.values())} runs): TTFT {100 * floor(groups):.1f} %, "
              f"TPOT {100 * floor(groups, 'tpot_ms'):.1f} %")


def kimi_fold_params(fold_json: Path) -> dict[str, float]:
    """The Kimi family fold's parameters in a ``fidelity_real.py --json`` report."""
    return fold_params(fold_json, "family", "kimi")


def print_terms(fold_json: Path, every: int, workers: int) -> None:
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import all_cases, errors, family_of
    fold_params = kimi_fold_params(fold_json)
    cases = [c for c in all_cases(silicon_every=every) if family_of(c) == "kimi"]
    print(f"{len(cases)} Kimi cases (silicon every {every}) at the Kimi family fold's parameters ({fold_json.name})")
    for label, overrides in settings():
        t0 = time.perf_counter()
        res = simulate_cases(cases, {**fold_params, **overrides}, seed=0, max_sim_s=60.0, workers=workers)
        errs = [errors(c, r.metrics) for c, r in zip(cases, res)]
        print(f"\n== {label}  ({time.perf_counter() - t0:.0f} s)")
        print(f"  {'slice':<26} {'n':>3} | " + " | ".join(f"{m[5:-3]:^15}" for m in METRICS))
        by: dict[tuple[str, str], list] = collections.defaultdict(list)
        for c, e in zip(cases, errs):
            r = c.row
            for kind, name in case_slice(r.precision or "", r.tp, r.isl, r.osl, r.concurrency).items():
                by[(kind, name)].append(e)
            by[("all", "all")].append(e)
        for (kind, name), es in sorted(by.items()):
            print(f"  {name:<26} {len(es):3d} | " + " | ".join(cell(s) for s in summary(es).values()))


def print_seeds(fold_json: Path | None, seeds: int, workers: int) -> None:
    """The twin's own run-to-run spread: the light-load March NVFP4 TP 4 1k C = 4 runs simulated with ``seeds``
    seeds (the fold's parameters, or the embedded defaults without a fold file)."""
    from twin.fitting.fit import simulate_cases
    from twin.fitting.joint import default_start
    from twin.fitting.silicon import kimi_april_fp4
    from kimi_slices import kimi_cases
    params = default_start()
    if fold_json is not None:
        params = kimi_fold_params(fold_json)
    cases = [c for c in kimi_cases() if (c.row.precision or "").lower() == "fp4" and c.row.tp == 4
             and c.row.isl == 1024 and c.row.concurrency == 4 and not kimi_april_fp4(c.row)]
    for c in cases:
        ttft = [simulate_cases([c], params, seed=k, max_sim_s=60.0, workers=workers)[0].metrics["mean_ttft_ms"]
                for k in range(seeds)]
        print(f"  OSL {c.row.osl:5d} measured {c.row.ttft_ms:6.1f} ms ({c.row.measured}); twin over {seeds} seeds "
              f"{min(ttft):.1f}..{max(ttft):.1f} ms (spread {max(ttft) - min(ttft):.1f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("terms", help="what each fold-reset term carries")
    t.add_argument("fold_json", type=Path)
    t.add_argument("--every", type=positive_int, default=16)
    t.add_argument("--workers", type=positive_int, default=1)
    r = sub.add_parser("repeats", help="the spread of repeated light-load runs")
    r.add_argument("--ground-truth", type=Path, default=None)
    d = sub.add_parser("seeds", help="the twin's own spread over seeds on one repeated configuration")
    d.add_argument("fold_json", type=Path, nargs="?", default=None)
    d.add_argument("--seeds", type=positive_int, default=5)
    d.add_argument("--workers", type=positive_int, default=1)
    args = ap.parse_args()
    if args.cmd == "terms":
        if args.every < 1:
            raise SystemExit("--every must be >= 1")
        print_terms(args.fold_json, args.every, args.workers)
    elif args.cmd == "seeds":
        if args.seeds < 1:
            raise SystemExit("--seeds must be >= 1")
        print_seeds(args.fold_json, args.seeds, args.workers)
    else:
        print_repeats(args.ground_truth)


if __name__ == "__main__":
    run_script(main)
