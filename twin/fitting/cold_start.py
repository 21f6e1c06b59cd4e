"""A cold run's one-off compile stalls, priced into its means (issue 33, round 11).

A measured run that was its server's first traffic (``MeasuredRun.cold_start``: inference-perf's stage 0, the
server freshly started, no warm-up) paid the one-off kernel compiles of its first steps
(``twin.cost.cold_compile``), and its means are over every request it sent. The replay measures a steady-state
window after the warm-up (``replay.warmup_cut``), which those stalls precede. So the replay simulates the same
traffic twice, on a warm server (the window's metrics) and on a cold one (the same steps plus the compile of each
specialisation at the first step that meets it), and adds to each mean what the stalls added to every request of
the run, spread over all of them:

    mean_x(cold run) = mean_x(window, warm) + sum over requests (x_cold - x_warm) / requests sent

for x = TTFT, E2E latency and TPOT. Nothing is fitted: the count of specialisations a run meets comes from its own
simulated steps, their compile time is the measured prior. Medians and percentiles are left alone (the stalls touch
~1-3 % of requests). Deployments without a priced table (``cold_compiles_for`` is None) are unchanged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from twin.cost.cold_compile import ColdCompiles, ColdStartClock
from twin.fitting.measured_run import MeasuredRun
from twin.sim.cold_server import cold_compiles_of
from twin.sim.deployment import Deployment

ENABLED = True     # False: cold runs replayed warm, as before round 11 (set it with twin.fitting.switches)


@dataclass(frozen=True)
class ColdStart:
    """What the compiles added to a cold run: specialisations met (stalls), and per metric the mean's increase
    (ms) over the run's requests."""

    stalls: int
    specialisations: int
    stall_s: float
    added_ms: dict[str, float]


def compiles_for(run: MeasuredRun, dep: Deployment) -> ColdCompiles | None:
    """The cold compiles ``run`` pays on ``dep``, or None (a warm run, switched off, or none priced for the
    deployment: ``twin.sim.cold_server.cold_compiles_of``)."""
    if not (ENABLED and run.cold_start):
        return None
    return cold_compiles_of(dep)


def _per_request(requests) -> dict:
    out = {}
    for r in requests:
        if r.first_token_s is None:
            continue
        tpot = ((r.finish_s - r.first_token_s) / (r.num_output_tokens - 1)
                if r.finish_s is not None and r.num_output_tokens > 1 else None)
        out[r.request_id] = (r.first_token_s - r.arrival_s,
                             None if r.finish_s is None else r.finish_s - r.arrival_s, tpot)
    return out


def cold_added(run: MeasuredRun, warm_requests, simulate_cold: Callable[[Callable], list],
               compiles: ColdCompiles) -> ColdStart:
    """Simulate the run cold (``simulate_cold(wrap)`` runs the same traffic with each replica's cost model passed
    through ``wrap``) and return what it adds to the run's means (module doc)."""
    clocks: list[ColdStartClock] = []

    def wrap(cost):
        clocks.append(ColdStartClock(cost, compiles))
        return clocks[-1]

    cold = _per_request(simulate_cold(wrap))
    warm = _per_request(warm_requests)
    sums = [0.0, 0.0, 0.0]
    for rid, w in warm.items():
        c = cold.get(rid)
        if c is None:
            continue
        for i in range(3):
            if w[i] is not None and c[i] is not None:
                sums[i] += c[i] - w[i]
    n = max(run.num_requests, len(warm))
    added = {k: 1e3 * s / n for k, s in zip(("mean_ttft_ms", "mean_e2el_ms", "mean_tpot_ms"), sums)}
    return ColdStart(sum(c.num_stalls for c in clocks), compiles.num_cold, compiles.stall_s, added)


def with_cold_start(metrics: dict, cold: ColdStart | None) -> dict:
    """``metrics`` with the cold run's additions to its means (unchanged when ``cold`` is None)."""
    if cold is None:
        return metrics
    out = dict(metrics)
    for k, v in cold.added_ms.items():
        if out.get(k) is not None:
            out[k] = out[k] + v
    return out
