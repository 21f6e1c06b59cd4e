"""The request path (a delay outside the engine core) and vLLM's async scheduling, exactly, on a server whose
steps take a constant 10 ms."""

from __future__ import annotations

import numpy as np
import pytest

from twin.core.scheduler_config import SchedulerConfig
from twin.core.schedulers import make_scheduler
from twin.cost.constant import ConstantCostModel
from twin.sim.request_path import PathDraws, path_draws
from twin.sim.simulate import simulate
from twin.workload.spec import RequestSpec

STEP_S = 0.01


class PathCost(ConstantCostModel):
    """A constant step time with a request path."""

    def __init__(self, path_s: float = 0.0, jitter_s: float = 0.0) -> None:
        super().__init__(STEP_S)
        self.request_path_s = path_s
        self.request_path_jitter_s = jitter_s


def _spec(i: int, t: float, prompt: int = 32, out: int = 4) -> RequestSpec:
    return RequestSpec(i, t, prompt, out, ((("u", i), prompt),))


def _run(specs, *, async_scheduling: bool, path_s: float = 0.0, jitter_s: float = 0.0, seed: int = 0):
    cfg = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=256, max_model_len=1024,
                          async_scheduling=async_scheduling)
    return simulate(specs, lambda i: make_scheduler(cfg, 64), lambda i: PathCost(path_s, jitter_s), seed=seed)


def test_async_scheduling_runs_a_request_arriving_mid_step_in_the_step_after_next():
    specs = [_spec(0, 0.0), _spec(1, 0.005)]       # 1 arrives during step 1 ([0, 10 ms])
    sync = _run(specs, async_scheduling=False)
    asyn = _run(specs, async_scheduling=True)
    # synchronous: step 2 (10-20 ms) already holds request 1's prefill
    assert list(sync.steps.num_seqs[:3]) == [1, 2, 2]
    assert sync.requests[1].first_token_s == pytest.approx(0.02)
    # async: step 2's batch was chosen at 0 ms, while step 1 ran: request 1 first runs in step 3 (20-30 ms)
    assert list(asyn.steps.num_seqs[:3]) == [1, 1, 2]
    assert list(asyn.steps.num_prefill_seqs[:3]) == [1, 0, 1]
    assert asyn.requests[1].first_token_s == pytest.approx(0.03)
    # a request that finds the engine idle is scheduled at once either way
    assert asyn.requests[0].first_token_s == sync.requests[0].first_token_s == pytest.approx(STEP_S)


def test_async_scheduling_starts_an_idle_engine_at_once():
    specs = [_spec(0, 0.0, out=1), _spec(1, 0.5, out=1)]   # request 0 is long gone when 1 arrives
    r = _run(specs, async_scheduling=True)
    assert r.requests[1].first_token_s == pytest.approx(0.5 + STEP_S)


def test_request_path_shifts_ttft_and_e2e_but_not_tpot():
    specs = [_spec(i, 0.3 * i, out=6) for i in range(5)]     # far apart: no queueing
    base = _run(specs, async_scheduling=False)
    late = _run(specs, async_scheduling=False, path_s=0.025)
    for a, b in zip(base.requests, late.requests):
        assert b.arrival_s == a.arrival_s                      # the client's clock
        assert b.ttft_s == pytest.approx(a.ttft_s + 0.025)
        assert b.e2el_s == pytest.approx(a.e2el_s + 0.025)
        assert b.tpot_s == pytest.approx(a.tpot_s)


def test_request_path_jitter_is_exponential_seeded_and_regenerable():
    specs = [_spec(i, 0.3 * i, out=2) for i in range(400)]
    r = _run(specs, async_scheduling=False, path_s=0.004, jitter_s=0.003, seed=7)
    base = _run(specs, async_scheduling=False)
    extra = np.array([b.ttft_s - a.ttft_s for a, b in zip(base.requests, r.requests)])
    # exactly the k-th draw of the seeded stream, for the k-th request dispatched
    np.testing.assert_allclose(extra, 0.004 + 0.003 * path_draws(7, 400), rtol=0, atol=1e-12)
    # Exponential(1) draws: mean 1 within 4 standard errors (1/sqrt(n))
    assert abs(path_draws(7, 400).mean() - 1.0) < 4 / np.sqrt(400)
    assert _run(specs, async_scheduling=False, path_s=0.004, jitter_s=0.003, seed=7).requests[5].ttft_s == \
        r.requests[5].ttft_s
    d = PathDraws(1, block=3)
    assert [d.next() for _ in range(7)] == path_draws(1, 7).tolist()  # blocks join seamlessly
