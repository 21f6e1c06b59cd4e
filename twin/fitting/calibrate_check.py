"""How far to trust a calibration (``twin calibrate --check``): leave-one-run-out errors (fit on every run but
one, predict that one) and each fitted parameter's spread over five seeds, against its standard error."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from twin.fitting.calibrate_fit import CalibrationFit, calibrate_fit, predict_metrics
from twin.fitting.fit import Case

CHECKED_METRICS = ("median_ttft_ms", "mean_tpot_ms", "mean_e2el_ms", "output_throughput")
SEEDS = 5


@dataclass
class HeldOut:
    run: str
    errors: dict[str, float]          # relative error of each CHECKED_METRICS the run measured
    note: str = ""


def leave_one_run_out(result: CalibrationFit, *, seed: int = 0, replications: int = 2, max_sim_s: float = 60.0,
                      outer_iterations: int = 2) -> list[HeldOut]:
    """Each run the fit used, predicted by a fit on the others (started from the full fit's parameters)."""
    used = result.latency_cases + result.capacity_cases
    seeds = [seed * 1009 + r for r in range(replications)]
    out = []
    for i, case in enumerate(used):
        train = used[:i] + used[i + 1:]
        if not any(c in result.latency_cases for c in train):
            out.append(HeldOut(case.run.name, {}, "no other run the server kept up with: not predicted"))
            continue
        fold = calibrate_fit(train, seed=seed, replications=replications, max_sim_s=max_sim_s,
                             outer_iterations=outer_iterations, start=result.params, report=False)
        [pred] = predict_metrics([case], fold.params, seeds=seeds, max_sim_s=max_sim_s)
        saturated = case in result.capacity_cases
        # an unsaturated open loop's throughput is its offered rate, a saturated run's TTFT its queue's length:
        # neither says anything about the server
        skip = {"median_ttft_ms"} if saturated else \
            (set() if case.run.closed_loop else {"output_throughput"})
        errors = {k: pred[k] / case.run.metrics[k] - 1.0 for k in CHECKED_METRICS
                  if k not in skip and case.run.metrics.get(k) and pred.get(k) is not None}
        out.append(HeldOut(case.run.name, errors))
    return out


def seed_spread(cases: Sequence[Case], result: CalibrationFit, *, seed: int = 0, replications: int = 2,
                max_sim_s: float = 60.0, seeds: int = SEEDS) -> dict[str, tuple[float, float]]:
    """{fitted parameter: (spread over ``seeds`` fits, the first fit's standard error)} (model units; the
    spread is the sample standard deviation; ``result`` is the fit at ``seed``)."""
    fits = [result] + [calibrate_fit(cases, seed=seed + k, replications=replications, max_sim_s=max_sim_s,
                                     report=False) for k in range(1, seeds)]
    return {n: (float(np.std([f.params[n] for f in fits], ddof=1)), result.std[n]) for n in result.names}
