"""benchmarks/gptoss_bench_path_reading.py (issue 33, round 16): the missed light-load TTFT split into a time per
request and a time per decoder layer."""

from __future__ import annotations

import pytest

from benchmark_module import load_benchmark
from twin.errors import TwinInputError


def test_per_layer_split_recovers_a_time_per_request_and_per_layer_exactly():
    r = load_benchmark("gptoss_bench_path_reading")
    points = [(layers, 2.0 + 0.15 * layers) for layers in (36, 36, 61, 62, 80, 80)]
    a, b, rms = r.per_layer_split(points)
    assert (a, b) == pytest.approx((2.0, 0.15), abs=1e-9) and rms < 1e-9


def test_one_depth_is_a_one_line_input_error():
    r = load_benchmark("gptoss_bench_path_reading")
    with pytest.raises(TwinInputError, match="one depth"):
        r.per_layer_split([(36, 1.0), (36, 2.0)])
