"""inference-perf's ``constant`` load as the twin's ``poisson`` with ``scale_to_duration: true``: exponential
gaps scaled to sum to the stage's duration (its ``ConstantLoadTimer``), so the sends span the stage and the
throughput over first send to last completion (inference-perf's ``requests_per_sec``, and the twin's) is not
that of one random draw's span."""

from __future__ import annotations

import math

import numpy as np
import pytest

from twin.errors import TwinInputError
from twin.workload.arrival_config import PoissonArrivals
from twin.workload.arrivals import arrival_times, scaled_poisson_times
from twin.workload.config import load_workload_config
from twin.workload.generate import open_loop_requests


def test_the_gaps_are_scaled_to_sum_to_the_duration():
    times = scaled_poisson_times(4.0, 10.0, np.random.default_rng(7))
    gaps = np.random.default_rng(7).standard_exponential(40)      # int(4 x 10) draws, by hand
    gaps = gaps * (10.0 / gaps.sum())
    assert np.array_equal(times, np.cumsum(gaps) - gaps[0])
    assert times[0] == 0.0 and np.all(np.diff(times) >= 0)
    assert math.isclose(times[-1] + gaps[0], 10.0, rel_tol=1e-12)     # the last send ends the stage
    assert len(scaled_poisson_times(0.5, 1.9, np.random.default_rng(0))) == 0   # int(0.95): none


def test_a_stage_sends_its_count_inside_its_duration():
    cfg = PoissonArrivals(process="poisson", rate_per_s=20.0, scale_to_duration=True)
    times = arrival_times(cfg, np.random.default_rng(0), duration_s=600.0)
    assert len(times) == 12_000 and times[0] == 0.0 and 599.0 < times[-1] < 600.0
    wl = load_workload_config({"arrivals": {"process": "poisson", "rate_per_s": 5, "scale_to_duration": True},
                               "duration_s": 60, "dataset": {"kind": "random", "input_len": 64, "output_len": 8}})
    specs = open_loop_requests(wl, seed=3)
    assert len(specs) == 300 and 59.0 < specs[-1].arrival_s < 60.0
    # num_requests stays a stop rule: whichever comes first
    wl = load_workload_config({"arrivals": {"process": "poisson", "rate_per_s": 5, "scale_to_duration": True},
                               "duration_s": 60, "num_requests": 100,
                               "dataset": {"kind": "random", "input_len": 64, "output_len": 8}})
    assert len(open_loop_requests(wl, seed=3)) == 100


def test_left_out_the_draw_is_unchanged():
    plain = {"arrivals": {"process": "poisson", "rate_per_s": 5}, "duration_s": 60,
             "dataset": {"kind": "random", "input_len": 64, "output_len": 8}}
    off = {**plain, "arrivals": {**plain["arrivals"], "scale_to_duration": False}}
    a, b = (open_loop_requests(load_workload_config(x), seed=3) for x in (plain, off))
    assert [s.arrival_s for s in a] == [s.arrival_s for s in b]


def test_scaling_needs_a_duration():
    with pytest.raises(TwinInputError) as info:
        load_workload_config({"arrivals": {"process": "poisson", "rate_per_s": 5, "scale_to_duration": True},
                              "num_requests": 10, "dataset": {"kind": "random", "input_len": 64, "output_len": 8}})
    assert str(info.value) == ("workload.arrivals.scale_to_duration: needs duration_s (the span the sends are "
                               "scaled to)")
