"""benchmarks/mixtral_hopper_reading.py (issue 33, round 17): the MoE path's part of what the silicon-held-out fold
misses on the inference-perf Mixtral runs, against the dense runs at the same TP."""

from __future__ import annotations

import pytest
from benchmark_module import load_benchmark
from twin.errors import TwinInputError


def _row(p50, tpot):
    return {"median_ttft_ms": p50, "mean_ttft_ms": p50, "mean_tpot_ms": tpot}


def test_missed_is_measured_minus_predicted_and_needs_every_metric():
    m = load_benchmark("mixtral_hopper_reading")
    got = m.missed({"median_ttft_ms": 50.0, "mean_ttft_ms": 60.0, "mean_tpot_ms": 18.0},
                   {"median_ttft_ms": 48.5, "mean_ttft_ms": 61.0, "mean_tpot_ms": 18.5})
    assert got == pytest.approx({"median_ttft_ms": 1.5, "mean_ttft_ms": -1.0, "mean_tpot_ms": -0.5})
    with pytest.raises(TwinInputError):
        m.missed({"median_ttft_ms": 50.0}, {"median_ttft_ms": 48.5})


def test_reading_is_the_moe_median_less_the_dense_median_per_request_and_per_moe_layer():
    m = load_benchmark("mixtral_hopper_reading")
    moe = [_row(1.0, 0.0), _row(2.0, 0.2), _row(3.0, -0.1)]
    dense = [_row(-1.0, -1.0), _row(-2.0, -0.6)]
    out = m.reading(moe, dense, 32)
    assert out["request_ms"] == pytest.approx(2.0 - (-1.5))
    assert out["layer_us"] == pytest.approx(1e3 * (0.0 - (-0.8)) / 32)
    for args in (([], dense, 32), (moe, [], 32), (moe, dense, 0)):
        with pytest.raises(TwinInputError):
            m.reading(*args)


def test_reading_priors_name_the_block_fp8_paths_terms_in_seconds():
    m = load_benchmark("mixtral_hopper_reading")
    assert m.reading_priors(2.73, 28.5) == pytest.approx({"expert_path_request_s@hopper+experts_fp8": 2.73e-3,
                                                          "moe_layer_overhead_s@hopper+experts_fp8": 28.5e-6})
    with pytest.raises(TwinInputError):
        m.reading_priors(-1.0, 28.5)
