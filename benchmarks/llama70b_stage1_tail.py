"""Llama-2-70B general stage 1's TTFT tail, term by term (issue 33, round 20): a reading, no model change.

Predicted whole, the stage's mean TTFT is 30 % short at the embedded defaults (measured 121.3 ms, p90 250 ms; the
twin's p90 75 ms) while its TPOT is 3 % short. This script tests where the tail comes from:

1. the measured side, no simulation: each ``general`` stage 1 (20 requests/s, ``max_num_seqs`` 128) with its
   slots in use by Little's law (request rate x mean E2E) against ``max_num_seqs``, beside its TTFT p50 / p90 / p99;
2. the twin's side: the stage simulated whole (as ``fidelity_real.py`` predicts it) over several seeds (the
   Poisson arrival draw; the measured stage is one such draw), under variants: as embedded; without the slot cap
   (``max_num_seqs`` raised to ``--uncapped-seqs``: is the tail the wait for a free slot?); and with every step
   ``k`` times as long (``--scales``: a trial knob standing in for the twin's TPOT shortfall; how far a few per cent
   of step time moves the tail), at fewer slots (``--caps``: how many slots the measured queue is worth), with a
   finished request's slot held through one more schedule as vLLM's async engine core holds it (``--hold slots``),
   at the embedded defaults or at a held-out fold's parameters from a saved report; for any of the four stages.

    python benchmarks/llama70b_stage1_tail.py [--seeds 0,1,2,3,4,5,6,7] [--scales 1,1.02,1.03] [--caps 128,125]
        [--uncapped-seqs 1024] [--stage llama-2-70b|mixtral|codellama-34b|llama-2-7b]
        [--hold none|blocks|slots|slot-knob]
        [--report REPORT.json --fold GPU:H100-SXM] [--ground-truth DIR] [--json F]

About 1-5 s a simulation on a loaded 2-core machine (8 seeds x 4 variants: ~1-2 min; ``--hold`` slots or blocks
turns the fast path off: ~4-5x; ``slot-knob``, the scheduler's ``async_hold_finished_slots``, keeps it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import check_out_path, number_list, positive_int  # noqa: E402
from benchmarks.fold_report import fold_params  # noqa: E402
from twin.errors import TwinInputError, run_script  # noqa: E402

# the four general stage 1s at 20 requests/s (max_num_seqs 128), by a short key; the first is this reading's
STAGES = {"llama-2-70b": "20260217-202857-llama-2-70b-tp4-general/stage1",
          "mixtral": "20260218-130541-mixtral-8x7b-v0-1-tp2-general/stage1",
          "codellama-34b": "20260218-150304-codellama-34b-tp2-general/stage1",
          "llama-2-7b": "20260217-231439-llama-2-7b-tp1-general/stage1"}
PERCENTILES = (50, 90, 95, 99)
HOLDS = ("none", "blocks", "slots", "slot-knob")   # what a finished request holds through one more schedule


def slots_in_use(rate_per_s: float, mean_e2e_ms: float, max_num_seqs: int) -> tuple[float, float]:
    """(mean requests in the server, that as a fraction of ``max_num_seqs``) by Little's law: rate x mean time
    in the server (the client's E2E: its queueing for a slot, prefill and decode)."""
    if not (rate_per_s > 0 and mean_e2e_ms > 0 and max_num_seqs > 0):
        raise TwinInputError(f"slots in use: rate {rate_per_s}, mean E2E {mean_e2e_ms} ms and max_num_seqs "
                             f"{max_num_seqs} must be positive")
    busy = rate_per_s * mean_e2e_ms / 1000.0
    return busy, busy / max_num_seqs


def summarize(ttft_s: np.ndarray, e2e_s: np.ndarray, tpot_ms: float, rate_per_s: float, max_num_seqs: int) -> dict:
    """One simulation's TTFT mean and percentiles (ms), its mean TPOT and E2E, the share of requests whose TTFT
    passed 100 ms (the measured p75 is 75 ms) and its slots in use."""
    ttft_ms, e2e_ms = 1000.0 * np.asarray(ttft_s, float), 1000.0 * np.asarray(e2e_s, float)
    busy, occupancy = slots_in_use(rate_per_s, float(e2e_ms.mean()), max_num_seqs)
    return {"mean_ttft_ms": float(ttft_ms.mean()),
            **{f"p{p}_ttft_ms": float(np.percentile(ttft_ms, p)) for p in PERCENTILES},
            "over_100ms": float(np.mean(ttft_ms > 100.0)), "mean_tpot_ms": float(tpot_ms),
            "mean_e2el_ms": float(e2e_ms.mean()), "slots_in_use": busy, "occupancy": occupancy}


def elasticity(base: tuple[float, float], other: tuple[float, float]) -> float:
    """d ln(mean TTFT) / d ln(TPOT) between two (mean TTFT, TPOT) points: how many per cent the mean TTFT moves
    per per cent of TPOT."""
    (t0, s0), (t1, s1) = base, other
    if min(t0, s0, t1, s1) <= 0 or s0 == s1:
        raise TwinInputError(f"elasticity: need positive values and two different TPOTs, got {base} and {other}")
    return math.log(t1 / t0) / math.log(s1 / s0)


class ScaledSteps:
    """A cost model whose every step takes ``k`` times the inner model's (a trial knob of this reading)."""

    def __init__(self, inner, k: float) -> None:
        self.inner, self.k, self.name = inner, float(k), inner.name
        self.request_path_s = inner.request_path_s
        self.request_path_jitter_s = inner.request_path_jitter_s

    def step_time_s(self, step) -> float:
        return self.k * self.inner.step_time_s(step)

    def explain(self, step) -> dict[str, float]:
        return {key: self.k * value for key, value in self.inner.explain(step).items()}


def holding_slots(scheduler):
    """``scheduler`` (one with ``async_free_after_next_schedule``: the requests that finished in step t wait in
    ``free_after_schedule`` until schedule t + 1 ends) with those requests also counted against
    ``max_num_seqs`` while schedule t + 1 admits: vLLM's async engine core schedules step t + 1 before it applies
    step t's output, and only applying the output takes a finished request out of ``running``. The wrapper is
    this scheduler's own attribute (no module state changes); a trial of this reading."""
    admit = scheduler.schedule_waiting
    config = scheduler.config
    fewer: dict[int, object] = {}

    def schedule_waiting(out, token_budget, sched_reqs, sched_tokens, prefill_scheduled):
        held = len(scheduler.free_after_schedule or ())
        if not held:
            return admit(out, token_budget, sched_reqs, sched_tokens, prefill_scheduled)
        if held not in fewer:
            fewer[held] = config.model_copy(update={"max_num_seqs": max(config.max_num_seqs - held, 0)})
        scheduler.config = fewer[held]
        try:
            return admit(out, token_budget, sched_reqs, sched_tokens, prefill_scheduled)
        finally:
            scheduler.config = config
    scheduler.schedule_waiting = schedule_waiting
    return scheduler


def simulate_stage(case, params: dict[str, float], *, scale: float, max_num_seqs: int, seed: int,
                   hold: str = "none") -> dict:
    """The stage simulated whole (``replay``'s traffic, server and warm-up cut) with every step ``scale`` times
    as long and ``max_num_seqs`` slots; ``hold``: ``none`` (the twin as embedded), ``blocks`` (a finished
    request's KV blocks held through one more schedule: ``async_free_after_next_schedule``), ``slots`` (its
    blocks and its slot: ``holding_slots``) or ``slot-knob`` (its slot alone, the scheduler's own
    ``async_hold_finished_slots``, round 20: the fast path stays on). ``summarize`` of its requests after the cut."""
    if hold not in HOLDS:
        raise TwinInputError(f"hold {hold!r}: one of {', '.join(HOLDS)}")
    from twin.core.schedulers import make_scheduler
    from twin.fitting.replay import build_requests, cost_model_for, deployment_for, warmup_cut
    from twin.sim.simulate import simulate
    run = dataclasses.replace(case.run, server={**case.run.server, "max_num_seqs": max_num_seqs})
    dep = deployment_for(run, case.target)
    config = dep.scheduler_config
    if hold != "none":
        if not config.async_scheduling:
            raise TwinInputError(f"{run.name}: hold {hold!r} needs async scheduling (a vLLM release >= 0.14)")
        knob = "async_hold_finished_slots" if hold == "slot-knob" else "async_free_after_next_schedule"
        config = config.model_copy(update={knob: True})
    wrap = holding_slots if hold == "slots" else (lambda sched: sched)
    specs = build_requests(run, seed)
    cost = cost_model_for(dep, case.target, params)
    model = cost if scale == 1.0 else ScaledSteps(cost, scale)
    result = simulate(specs, lambda i: wrap(make_scheduler(config, dep.num_gpu_blocks)), lambda i: model,
                      seed=seed)
    cut = warmup_cut(specs, run)
    done = [r for r in result.requests if r.arrival_s >= cut and r.first_token_s is not None]
    metrics = result.metrics(window=(cut, None))
    return summarize(np.array([r.first_token_s - r.arrival_s for r in done]),
                     np.array([r.finish_s - r.arrival_s for r in done]), metrics["mean_tpot_ms"],
                     float(run.rate_per_s), max_num_seqs)


def measured_row(run) -> dict:
    m, seqs = run.metrics, int(run.server["max_num_seqs"])
    busy, occupancy = slots_in_use(float(run.rate_per_s), float(m["mean_e2el_ms"]), seqs)
    return {"stage": run.name, "max_num_seqs": seqs, "slots_in_use": busy, "occupancy": occupancy,
            **{k: float(m[k]) for k in ("mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
                                         "mean_tpot_ms", "mean_e2el_ms")}}


def pooled(runs: list[dict]) -> dict:
    """A variant's seeds: each key's mean, and the range of the mean TTFT."""
    out = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
    out["mean_ttft_ms_min"] = min(r["mean_ttft_ms"] for r in runs)
    out["mean_ttft_ms_max"] = max(r["mean_ttft_ms"] for r in runs)
    return out


def share_at_least(values: list[float], threshold: float) -> float:
    """The share of ``values`` at or above ``threshold`` (how often one draw of the twin reaches the measured)."""
    if not values:
        raise TwinInputError("share_at_least: no values")
    return sum(v >= threshold for v in values) / len(values)


def variants(scales: list[float], uncapped_seqs: int, cap: int, caps: list[int] | None = None
             ) -> list[tuple[str, float, int]]:
    """(label, step factor, max_num_seqs): each scale at each of ``caps`` (default: the server's ``cap``; another
    cap is named in the label), then the uncapped variant."""
    out = [(f"steps x{s:g}" + ("" if c == cap else f", max_num_seqs {c}"), float(s), c)
           for c in (caps or [cap]) for s in scales]
    return out + [(f"steps x1, max_num_seqs {uncapped_seqs}", 1.0, uncapped_seqs)]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ground-truth", type=Path, default=None)
    ap.add_argument("--stage", choices=tuple(STAGES), default="llama-2-70b",
                    help="which general stage 1 the twin simulates (default %(default)s)")
    ap.add_argument("--seeds", default="0,1,2,3,4,5,6,7")
    ap.add_argument("--scales", default="1,1.02,1.03", help="step-time factors (1: the twin as embedded)")
    ap.add_argument("--caps", default=None, help="max_num_seqs values for the scaled variants (default: the "
                    "server's; fewer: how many slots the measured queue is worth)")
    ap.add_argument("--uncapped-seqs", type=positive_int, default=1024,
                    help="max_num_seqs of the variant without a slot cap (default %(default)s)")
    ap.add_argument("--hold", choices=HOLDS, default="none", help="what a finished request holds through one more "
                    "schedule, every variant (default %(default)s: the twin as embedded; slots: vLLM's async engine "
                    "core, a trial; about 4x slower; slot-knob: the slot alone, the scheduler's "
                    "async_hold_finished_slots, fast path kept)")
    ap.add_argument("--report", type=Path, default=None, help="a fidelity_real.py --json report (with --fold)")
    ap.add_argument("--fold", default=None, help="KIND:GROUP of --report whose parameters to use (default: the "
                    "embedded defaults)")
    ap.add_argument("--json", type=Path, default=None)
    return ap


def main() -> None:
    args = parser().parse_args()
    check_out_path(args.json, "--json")
    seeds = number_list(args.seeds, "--seeds", whole=True, low=0)
    scales = number_list(args.scales, "--scales", low=0.0, low_open=True)
    caps = None if args.caps is None else number_list(args.caps, "--caps", whole=True, low=1)
    if any(len(set(v)) != len(v) for v in (seeds, scales, caps or [])):
        raise TwinInputError("--seeds, --scales and --caps: give each value once")
    if (args.report is None) != (args.fold is None):
        raise TwinInputError("--report and --fold go together (a saved report and KIND:GROUP of one of its folds)")
    params: dict[str, float] = {}
    if args.fold is not None:
        kind, _, group = args.fold.partition(":")
        if not group:
            raise TwinInputError(f"--fold {args.fold!r}: KIND:GROUP, e.g. GPU:H100-SXM")
        params = fold_params(args.report, kind, group)
    from twin.fitting.ground_truth import h100_cases
    cases = h100_cases(args.ground_truth)[0]
    name = STAGES[args.stage]
    stage = next((c for c in cases if c.run.name == name), None)
    if stage is None:
        raise TwinInputError(f"{name}: not among the inference-perf runs (--ground-truth)")
    measured = [measured_row(c.run) for c in cases if c.run.name in STAGES.values()]
    print("measured general stage 1s (20 requests/s): slots in use = rate x mean E2E (Little's law)")
    print(f"{'stage':<58} {'slots':>6} {'of cap':>7} {'TTFT mean':>10} {'p50':>6} {'p90':>6} {'p99':>6} {'TPOT':>6}")
    for m in sorted(measured, key=lambda r: -r["occupancy"]):
        print(f"{m['stage']:<58} {m['slots_in_use']:6.1f} {100 * m['occupancy']:6.1f}% {m['mean_ttft_ms']:10.1f} "
              f"{m['median_ttft_ms']:6.1f} {m['p90_ttft_ms']:6.1f} {m['p99_ttft_ms']:6.1f} {m['mean_tpot_ms']:6.2f}")
    target = measured_row(stage.run)
    cap = target["max_num_seqs"]
    print(f"\nthe twin on {name}, whole, {args.fold or 'embedded defaults'}, hold {args.hold}, seeds {args.seeds} "
          f"(mean over seeds; TTFT mean's range over seeds; >=meas: the share of seeds at or over the measured)")
    print(f"{'variant':<32} {'TTFT mean':>10} {'(range)':>15} {'>=meas':>6} {'err':>7} {'p50':>6} {'p90':>6} "
          f"{'p95':>6} {'p99':>7} >100ms {'TPOT':>6} {'err':>6} {'slots':>6}")
    out = {"stage": name, "fold": args.fold, "hold": args.hold, "seeds": seeds, "measured": measured, "variants": []}
    for name, scale, seqs in variants(scales, args.uncapped_seqs, cap, caps):
        t0 = time.time()
        runs = [simulate_stage(stage, params, scale=scale, max_num_seqs=seqs, seed=s, hold=args.hold) for s in seeds]
        p = pooled(runs)
        p["seeds_at_or_over_measured"] = share_at_least([r["mean_ttft_ms"] for r in runs], target["mean_ttft_ms"])
        out["variants"].append({"variant": name, "scale": scale, "max_num_seqs": seqs, "pooled": p, "seeds": runs,
                                "wall_s": time.time() - t0})
        print(f"{name:<32} {p['mean_ttft_ms']:10.1f} {p['mean_ttft_ms_min']:7.1f}-{p['mean_ttft_ms_max']:<7.1f} "
              f"{100 * p['seeds_at_or_over_measured']:5.0f}% "
              f"{100 * (p['mean_ttft_ms'] / target['mean_ttft_ms'] - 1):+6.1f}% {p['p50_ttft_ms']:6.1f} "
              f"{p['p90_ttft_ms']:6.1f} {p['p95_ttft_ms']:6.1f} {p['p99_ttft_ms']:7.1f} {100 * p['over_100ms']:5.1f}% "
              f"{p['mean_tpot_ms']:6.2f} {100 * (p['mean_tpot_ms'] / target['mean_tpot_ms'] - 1):+5.1f}% "
              f"{p['slots_in_use']:6.1f}", flush=True)
    capped = [v["pooled"] for v in out["variants"] if v["max_num_seqs"] == cap]
    if len(capped) > 1:
        base = capped[0]
        out["elasticity"] = [elasticity((base["mean_ttft_ms"], base["mean_tpot_ms"]),
                                        (v["mean_ttft_ms"], v["mean_tpot_ms"])) for v in capped[1:]]
        print("d ln(TTFT mean) / d ln(TPOT) from the first scale: "
              + ", ".join(f"{e:.1f}" for e in out["elasticity"]))
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
