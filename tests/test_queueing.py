"""Queueing theory as an oracle for the engine's clock.

With ``ConstantCostModel`` and ``max_num_seqs=1`` the server is a single FCFS server whose service times
are known exactly, so

* each request's wait must equal Lindley's recursion W(n+1) = max(0, W(n) + S(n) - A(n+1)) on the same
  arrivals, to float precision (a deterministic check of the engine's event timing); and
* on a long seeded run the mean wait must match the M/D/1 and M/M/1 formulas. The tolerance there is
  statistical, 3 standard deviations of the run-to-run spread of the mean wait at the same load and length
  (measured over 60 seeds of the Lindley recursion): M/D/1 at rho=0.5 with 40k requests, sd 1.7% -> 5%;
  M/M/1 at rho=0.5 with 80k requests, sd 2.0% -> 6%.

Little's law L = lambda W is checked on a continuous-batching server with the roofline cost model, with L
measured two independent ways: from the request records (arrival/finish sweep) and from the engine's
own per-step log (running + waiting, weighted by step time).
"""

from __future__ import annotations

import numpy as np
import pytest

from twin.sim.run import metrics_of, run_body
from twin.cost.constant import ConstantCostModel
from twin.scenario import Scenario
from twin.core.scheduler_config import SchedulerConfig
from twin.core.schedulers import make_scheduler
from twin.sim.simulate import simulate
from twin.workload.spec import RequestSpec


def lindley_waits(arrivals: np.ndarray, service: np.ndarray) -> np.ndarray:
    waits = np.zeros(len(arrivals))
    for i in range(1, len(arrivals)):
        w = waits[i - 1] + service[i - 1] - (arrivals[i] - arrivals[i - 1])
        waits[i] = w if w > 0 else 0.0
    return waits


# ---- M/D/1 through the whole scenario machinery: Poisson workload, constant cost model, one sequence ----------
MD1_STEP_S = 0.025
MD1_OUTPUT_TOKENS = 4          # D = 4 steps: the prefill step emits token 1, three decode steps the rest
MD1_RHO = 0.5
MD1_REQUESTS = 40_000
MD1_TOLERANCE = 0.05


def md1_scenario(num_requests: int) -> Scenario:
    service = MD1_OUTPUT_TOKENS * MD1_STEP_S
    return Scenario({
        "name": "md1",
        "server": {"max_num_seqs": 1, "enable_prefix_caching": False},
        "cost_model": {"kind": "constant", "params": {"step_s": MD1_STEP_S}},
        "workload": {
            "arrivals": {"process": "poisson", "rate_per_s": MD1_RHO / service},
            "num_requests": num_requests,
            "classes": [{"name": "q", "share": 1.0, "prompt": {"suffix_tokens": 1},
                         "output_tokens": MD1_OUTPUT_TOKENS}],
        },
        "seed": 11,
    })


def test_md1_mean_wait():
    body = md1_scenario(MD1_REQUESTS).body()
    result = run_body(body)
    recs = result.requests
    assert len(recs) == MD1_REQUESTS and all(r.is_finished for r in recs)
    D = MD1_OUTPUT_TOKENS * MD1_STEP_S
    arrivals = np.array([r.arrival_s for r in recs])
    # wait = time to the start of service = TTFT minus the first (prefill) step
    waits = np.array([r.ttft_s for r in recs]) - MD1_STEP_S
    np.testing.assert_allclose(np.array([r.e2el_s for r in recs]), waits + D, rtol=0, atol=1e-9)
    np.testing.assert_allclose(waits, lindley_waits(arrivals, np.full(len(recs), D)), rtol=0, atol=1e-9)

    lam = MD1_REQUESTS / arrivals[-1]       # use the realised rate only for the report, not the check
    expected = MD1_RHO * D / (2 * (1 - MD1_RHO))
    assert waits.mean() == pytest.approx(expected, rel=MD1_TOLERANCE), (waits.mean(), expected, lam)
    # the server is busy a fraction rho of the time: the step log carries it
    busy = result.steps.column("duration_s").sum() / result.sim_end_s
    assert busy == pytest.approx(MD1_RHO, rel=0.02)


# ---- M/M/1: exponential service from the prefill cost of a geometric prompt --------------------------------------
# One output token, so the whole service is the prefill; with step_s = 0 and per_token_s = c the service of a
# P-token prompt is exactly c * P, chunked or not. P ~ Geometric(1/1000) on {1, 2, ...} is exponential up to
# the rounding: E[S^2] / (2 E[S]^2) = (2 - p) / 2 = 0.9995, i.e. the M/M/1 formula is exact to 0.05%.
MM1_MEAN_TOKENS = 1000
MM1_PER_TOKEN_S = 1e-4
MM1_RHO = 0.5
MM1_REQUESTS = 80_000
MM1_TOLERANCE = 0.06


def test_mm1_mean_wait():
    rng = np.random.default_rng(2024)
    mu = 1.0 / (MM1_MEAN_TOKENS * MM1_PER_TOKEN_S)
    lam = MM1_RHO * mu
    arrivals = np.cumsum(rng.exponential(1.0 / lam, MM1_REQUESTS))
    prompts = rng.geometric(1.0 / MM1_MEAN_TOKENS, MM1_REQUESTS)
    specs = [RequestSpec(i, float(arrivals[i]), int(prompts[i]), 1, ((("u", i), int(prompts[i])),))
             for i in range(MM1_REQUESTS)]
    # chunked prefill with an 8192-token budget: long prompts take several steps, their total is still c * P;
    # big blocks keep the block bookkeeping (irrelevant here) cheap
    cfg = SchedulerConfig(max_num_seqs=1, max_num_batched_tokens=8192, max_model_len=1 << 20, block_size=1024,
                          enable_prefix_caching=False)
    result = simulate(specs, lambda i: make_scheduler(cfg, 256),
                      lambda i: ConstantCostModel(0.0, per_token_s=MM1_PER_TOKEN_S))
    recs = result.requests
    assert all(r.is_finished for r in recs)
    assert int(prompts.max()) > 8192 and len(result.steps) > MM1_REQUESTS  # some prompts were chunked
    service = prompts * MM1_PER_TOKEN_S
    waits = np.array([r.e2el_s for r in recs]) - service
    np.testing.assert_allclose(waits, lindley_waits(arrivals, service), rtol=0, atol=1e-9)

    expected = MM1_RHO / (mu - lam)
    assert waits.mean() == pytest.approx(expected, rel=MM1_TOLERANCE), (waits.mean(), expected)
    # sojourn time in M/M/1 is exponential with mean 1 / (mu - lambda): check its median too
    sojourn = waits + service
    assert np.median(sojourn) == pytest.approx(np.log(2) / (mu - lam), rel=MM1_TOLERANCE)


# ---- Little's law on a continuous-batching server ---------------------------------------------------------------
def test_littles_law_on_a_batching_server():
    sc = Scenario({
        "name": "little",
        "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
        "server": {"max_num_seqs": 8},
        "workload": {
            "arrivals": {"process": "poisson", "rate_per_s": 3.0},
            "duration_s": 900,
            "classes": [{"name": "chat", "share": 1.0,
                         "prompt": {"suffix_tokens": {"lognormal": {"median": 600, "sigma": 0.7, "max": 6000}}},
                         "output_tokens": {"lognormal": {"median": 200, "sigma": 0.8, "max": 2000}}}],
        },
        "seed": 5,
    })
    body = sc.body()
    result = run_body(body)
    recs = [r for r in result.requests if r.is_finished]
    assert len(recs) == len(result.requests)
    t0, t1 = 100.0, 800.0                      # steady state: skip the start, stop before arrivals end
    arr = np.array([r.arrival_s for r in recs])
    fin = np.array([r.finish_s for r in recs])

    # lambda and W from the requests that arrived in the window
    inside = (arr >= t0) & (arr < t1)
    lam = inside.sum() / (t1 - t0)
    W = (fin[inside] - arr[inside]).mean()

    # L from the records: time-average of N(t) over [t0, t1] (every request's overlap with the window)
    L_records = (np.clip(fin, t0, t1) - np.clip(arr, t0, t1)).sum() / (t1 - t0)

    # L from the engine's step log: requests running or waiting after each step was scheduled, held over the
    # step (idle time between steps means an empty server)
    start = result.steps.column("start_s")
    dur = result.steps.column("duration_s")
    n = result.steps.column("num_running") + result.steps.column("num_waiting")
    overlap = np.clip(np.minimum(start + dur, t1) - np.maximum(start, t0), 0, None)
    L_steps = (n * overlap).sum() / (t1 - t0)

    metrics = metrics_of(result, body)
    assert metrics["mean_queue_length"] > 0.05                  # the cap of 8 makes requests queue
    assert 0.5 < result.steps.column("duration_s").sum() / result.sim_end_s <= 1.0
    assert L_records == pytest.approx(lam * W, rel=0.02)
    # arrivals mid-step enter the step log only at the next step: a bias of ~lambda x half a step (< 0.5%)
    assert L_steps == pytest.approx(lam * W, rel=0.03)
    assert L_steps == pytest.approx(L_records, rel=0.01)
