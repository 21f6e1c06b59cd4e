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


def test_non_finite_readings_name_their_option():
    m = load_benchmark("mixtral_hopper_reading")
    with pytest.raises(TwinInputError, match="--request-ms nan: must be a finite number >= 0"):
        m.reading_priors(float("nan"), 28.5)
    with pytest.raises(TwinInputError, match="--layer-us inf: must be a finite number >= 0"):
        m.reading_priors(2.73, float("inf"))


@pytest.mark.parametrize("argv, message", [
    (["--sim-s", "-1"], "--sim-s -1.0: must be a positive finite number of seconds"),
    (["--workers", "0"], "--workers 0: must be a whole number >= 1"),
    (["--try-fold", "family:minimax", "--request-ms", "1"], "--try-fold, --request-ms and --layer-us go together")])
def test_bad_options_are_one_line(tmp_path, monkeypatch, capsys, argv, message):
    import sys
    m = load_benchmark("mixtral_hopper_reading")
    monkeypatch.setattr(sys, "argv", ["mixtral_hopper_reading.py", str(tmp_path / "r.json"), *argv])
    with pytest.raises(SystemExit) as exc:
        m.run_script(m.main)
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
