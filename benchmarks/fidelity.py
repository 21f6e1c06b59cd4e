"""Fidelity benchmark: the twin against the calibration engine serving the same traffic for real.

Configurations on the tiny Llama-shaped model on the CPU: concurrency caps, prefix caching on and off, chunked
prefill on and off, loads from 30% to 90% of saturation, a closed-loop client and one trace replay. For each,
the engine serves the workload in real time and the twin predicts it with a calibrated profile; the table shows
the twin's relative error per metric. Targets: throughput and mean TPOT within 5%, p50 and p99 TTFT within 10%.

    python benchmarks/fidelity.py [--profile calibration/profiles/tiny-llama-cpu.json] [--calibrate]
                                  [--duration 20] [--only NAME] [--json out.json]

``--calibrate`` first recalibrates on this machine (quick mode), so that the engine and the profile are measured
under the same conditions. Saturation is estimated with the twin (closed loop, high concurrency).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from calibration.validation_run import validate_body  # noqa: E402
from twin.sim.run import metrics_of, run_body  # noqa: E402
from twin.scenario import load_scenario  # noqa: E402
from twin.workload.paths import traces_dir  # noqa: E402
from benchmarks.cli_checks import positive_float  # noqa: E402

SCENARIO = ROOT / "scenarios" / "validate_tiny_cpu.yaml"
REPORTED = ("request_throughput", "mean_tpot_ms", "median_ttft_ms", "p99_ttft_ms", "mean_e2el_ms")
TARGETS = {"request_throughput": 0.05, "mean_tpot_ms": 0.05, "median_ttft_ms": 0.10, "p99_ttft_ms": 0.10}


def saturation_rate(scenario, profile: str) -> float:
    """Requests per second the twin serves with every slot busy (closed loop at 4x max_num_seqs)."""
    body = scenario.body("baseline", {
        "cost_model": {"kind": "profile", "profile": profile},
        "workload": {"arrivals": {"_replace": True, "process": "closed_loop", "concurrency": 64},
                     "duration_s": None, "num_requests": 400}})
    return metrics_of(run_body(body, scenario.base_dir), body)["request_throughput"]


def configurations(rate_sat: float, duration_s: float) -> dict[str, dict]:
    load = lambda f: {"workload": {"arrivals": {"rate_per_s": round(f * rate_sat, 3)}, "duration_s": duration_s}}
    configs = {
        "load-30%": load(0.3),
        "load-60%": load(0.6),
        "load-90%": load(0.9),
        "cap-4 @60%": {**load(0.6), "server": {"max_num_seqs": 4}},
        "no-prefix-caching @60%": {**load(0.6), "server": {"enable_prefix_caching": False}},
        "no-chunked-prefill @60%": {**load(0.6), "server": {"enable_chunked_prefill": False,
                                                             "max_num_batched_tokens": 2048}},
        "closed-loop 8 users": {"workload": {"arrivals": {"_replace": True, "process": "closed_loop",
                                                          "concurrency": 8},
                                             "duration_s": duration_s}},
    }
    return configs


def trace_replay(scenario, profile: str, duration_s: float, busy_target: float = 0.6) -> dict | None:
    """The Azure conversation trace's arrivals and lengths, sped up or slowed down until the twin predicts the
    server busy ``busy_target`` of the time (the trace's lengths differ from the synthetic ones, so the rate
    alone does not say the load)."""
    trace = traces_dir() / "azure_llm_2023_conv.csv"
    if not trace.exists():
        return None

    def overrides(scale: float) -> dict:
        return {"cost_model": {"kind": "profile", "profile": profile},
                "workload": {"_replace": True, "trace": {"path": str(trace), "format": "azure",
                                                          "time_scale": scale, "window_s": duration_s * scale}}}

    lo, hi = 0.01, 2.0
    for _ in range(8):  # bisection on the log scale
        mid = (lo * hi) ** 0.5
        body = scenario.body("baseline", overrides(mid))
        busy = metrics_of(run_body(body, scenario.base_dir), body).get("busy_fraction") or 0.0
        lo, hi = (mid, hi) if busy < busy_target else (lo, mid)
    return overrides(round((lo * hi) ** 0.5, 4))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default=str(ROOT / "calibration" / "profiles" / "tiny-llama-cpu.json"))
    ap.add_argument("--calibrate", action="store_true", help="recalibrate (quick) on this machine first")
    ap.add_argument("--duration", type=positive_float, default=20.0, help="seconds of traffic per configuration")
    ap.add_argument("--only", help="run only configurations whose name contains this")
    ap.add_argument("--json", help="write the table as JSON")
    args = ap.parse_args(argv)
    with warnings.catch_warnings():          # the foreign-profile filter below holds for this run only
        return compare(args)


def compare(args) -> int:
    """``main``'s table at its options (``args``)."""
    profile = args.profile
    if args.calibrate:
        from calibration.calibrate import calibrate

        profile = str(Path("/tmp") / "fidelity-tiny-llama-cpu.json")
        print("calibrating (quick mode)...", flush=True)
        calibrate("tiny-llama", device="cpu", quick=True, output=profile)
    scenario = load_scenario(SCENARIO)
    from calibration.environment import cpu_name
    from twin.cost.profile import ForeignProfileWarning, ProfileCostModel, foreign_machine

    foreign = foreign_machine(ProfileCostModel(profile).profile, cpu_name(), profile)
    if foreign:
        print(f"warning: {foreign}; expect large errors, or run with --calibrate", flush=True)
        warnings.simplefilter("ignore", ForeignProfileWarning)   # said once, here
    rate_sat = saturation_rate(scenario, profile)
    print(f"machine: CPU, tiny-llama fp32; profile {profile}; twin saturation {rate_sat:.2f} req/s", flush=True)
    configs = configurations(rate_sat, args.duration)
    replay = trace_replay(scenario, profile, args.duration)
    if replay is not None:
        configs["azure-conv replay, 60% busy"] = replay
    rows = []
    for name, overrides in configs.items():
        if args.only and args.only not in name:
            continue
        overrides = {**overrides, "cost_model": {"kind": "profile", "profile": profile}}
        body = scenario.body("baseline", overrides)
        t0 = time.perf_counter()
        run = validate_body(body, scenario.base_dir)
        errors = {m: run.comparison.error(m) for m in REPORTED}
        rows.append({"config": name, "errors": errors, "wall_s": time.perf_counter() - t0,
                     "residuals": run.residuals, "measured": {m: run.measured_metrics.get(m) for m in REPORTED},
                     "predicted": {m: run.predicted_metrics.get(m) for m in REPORTED}})
        cells = "  ".join(f"{m}={'-' if e is None else f'{e:+.1%}'}" for m, e in errors.items())
        print(f"{name:28s} {cells}  (step MAPE {run.residuals.get('mape', float('nan')):.1%})", flush=True)
        for note in run.comparison.notes:
            print(f"{'':28s} note: {note}", flush=True)
    print()
    header = f"{'configuration':28s}" + "".join(f"{m:>18s}" for m in REPORTED)
    print(header)
    for row in rows:
        print(f"{row['config']:28s}" + "".join(
            f"{'-' if row['errors'][m] is None else format(row['errors'][m], '+.1%'):>18s}" for m in REPORTED))
    within = {m: sum(1 for r in rows if r["errors"][m] is not None and abs(r["errors"][m]) <= t)
              for m, t in TARGETS.items()}
    print("within target: " + ", ".join(f"{m} {within[m]}/{len(rows)} (±{t:.0%})" for m, t in TARGETS.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"saturation_req_s": rate_sat, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    from twin.errors import run_script
    run_script(lambda: sys.exit(main()))
