"""Arrival processes: seeded statistics with stated tolerances (about 4 standard errors)."""

import numpy as np
import pytest

from twin.workload import build_workload, stream
from twin.workload.arrivals import arrival_times
from twin.workload.arrival_config import (
    ConstantArrivals,
    GammaArrivals,
    PiecewiseArrivals,
    PoissonArrivals,
)


def gaps(cfg, n=20000, seed=0):
    t = arrival_times(cfg, stream(seed, "arrivals"), num_requests=n)
    assert len(t) == n and t[0] == 0.0 and np.all(np.diff(t) >= 0)
    return np.diff(t)


def cv(g):
    return g.std() / g.mean()


def test_poisson_rate_and_cv():
    g = gaps(PoissonArrivals(process="poisson", rate_per_s=8))
    # mean gap 1/8: standard error 1/sqrt(n) = 0.7%; tolerance 3%
    assert g.mean() == pytest.approx(1 / 8, rel=0.03)
    # CV of exponential gaps is 1; standard error about 0.7%; tolerance 0.03
    assert cv(g) == pytest.approx(1.0, abs=0.03)


def test_poisson_count_over_duration():
    t = arrival_times(PoissonArrivals(process="poisson", rate_per_s=8), stream(1, "arrivals"), duration_s=2000)
    # 16000 expected, sd sqrt(16000) = 126; tolerance 4 sd
    assert abs(len(t) - 16000) < 4 * 126
    assert t.max() < 2000


@pytest.mark.parametrize("target", [0.5, 2.0, 3.0])
def test_gamma_cv_matches(target):
    g = gaps(GammaArrivals(process="gamma", rate_per_s=10, cv=target))
    assert g.mean() == pytest.approx(0.1, rel=0.03 * target + 0.01)
    # measured spread over seeds at n=20000: sd 0.002 (cv 0.5), 0.019 (cv 2); tolerance about 4 sd
    assert cv(g) == pytest.approx(target, rel=0.04 * target)


def test_vllm_burstiness_is_gamma_shape():
    a = gaps(GammaArrivals(process="gamma", rate_per_s=10, burstiness=0.25), n=1000)
    b = gaps(GammaArrivals(process="gamma", rate_per_s=10, cv=2.0), n=1000)
    assert np.allclose(a, b)


def test_constant_is_exact():
    g = gaps(ConstantArrivals(process="constant", rate_per_s=4), n=100)
    assert np.allclose(g, 0.25)


def test_piecewise_counts_per_piece():
    cfg = PiecewiseArrivals(process="piecewise", schedule=[
        {"until_s": 100, "rate_per_s": 0}, {"until_s": 600, "rate_per_s": 5},
        {"until_s": 1100, "rate_per_s": 20}, {"until_s": 1200, "rate_per_s": 0}])
    t = arrival_times(cfg, stream(0, "arrivals"))
    assert t[0] == 100.0  # first arrival when the rate first becomes positive
    assert t.max() < 1100
    n1 = np.count_nonzero(t < 600)
    n2 = np.count_nonzero((t >= 600) & (t < 1100))
    assert abs(n1 - 2500) < 4 * 50     # Poisson counts: sd sqrt(2500) = 50
    assert abs(n2 - 10000) < 4 * 100
    # gaps inside the second piece are exponential with mean 1/20
    g = np.diff(t[(t >= 600) & (t < 1100)])
    assert g.mean() == pytest.approx(0.05, rel=0.05)
    assert cv(g) == pytest.approx(1.0, abs=0.05)


def test_piecewise_open_ended_with_num_requests():
    cfg = PiecewiseArrivals(process="piecewise", schedule=[{"until_s": 10, "rate_per_s": 1}, {"rate_per_s": 100}])
    t = arrival_times(cfg, stream(0, "arrivals"), num_requests=3000)
    assert len(t) == 3000 and t[-1] > 10


def test_infinite_rate_puts_everything_at_zero():
    specs = build_workload({"arrivals": {"process": "poisson", "rate_per_s": float("inf")}, "num_requests": 50,
                            "classes": [{"name": "a", "share": 1, "prompt": {"suffix_tokens": 10},
                                         "output_tokens": 5}]})
    assert len(specs) == 50 and all(s.arrival_s == 0.0 for s in specs)
    assert [s.request_id for s in specs] == list(range(50))


def test_duration_and_count_stop_rules():
    base = {"arrivals": {"process": "poisson", "rate_per_s": 10},
            "classes": [{"name": "a", "share": 1, "prompt": {"suffix_tokens": 10}, "output_tokens": 5}]}
    by_time = build_workload(dict(base, duration_s=60), seed=3)
    by_count = build_workload(dict(base, num_requests=100), seed=3)
    both = build_workload(dict(base, num_requests=100, duration_s=5), seed=3)
    assert all(s.arrival_s < 60 for s in by_time)
    assert len(by_count) == 100
    assert by_count == by_time[:100]  # a prefix of the same stream
    assert both == [s for s in by_count if s.arrival_s < 5]
