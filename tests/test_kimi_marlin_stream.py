"""benchmarks/kimi_marlin_stream.py (issue 33, round 15): the expert bytes a Kimi-K2.5 INT4 decode step streams per
GPU and the slope of TPOT against them."""

from __future__ import annotations

import pytest
from benchmark_module import load_benchmark
from twin.hardware.model_catalog import resolve_model


def test_the_expert_bytes_are_the_touched_share_of_the_int4_g32_experts_over_tp():
    m = load_benchmark("kimi_marlin_stream")
    kimi = resolve_model("kimi-k2.5")
    touched = 384 * (1 - (1 - 8 / 384) ** 4)                       # uniform top-8 of 384, four tokens
    per_expert = 3 * 7168 * 2048 * (0.5 + 2 / 32)                   # gate, up, down at 4 bits + a bf16 scale per 32
    assert m.expert_bytes_per_gpu(kimi, 4, 8) == pytest.approx(60 * touched * per_expert / 8, rel=1e-9)


def test_the_slope_is_bytes_over_seconds_of_a_least_squares_line():
    m = load_benchmark("kimi_marlin_stream")
    pts = [(b, 2e-3 + b / 3e12) for b in (5e9, 11e9, 20e9, 35e9)]   # 3 TB/s on top of a fixed 2 ms
    assert m.slope_rate(pts) == pytest.approx(3e12, rel=1e-9)
