"""twin.cost.gemm_occupancy and benchmarks/dense_stream_occupancy.py (issue 33, round 17): the decode GEMM shapes,
the Little's-law rate per SM, the SM-limited stream time and its fit are exact arithmetic."""

import contextlib

import pytest

from twin.cost.gemm_occupancy import (DECODE_KERNELS, DecodeKernel, gemm_stream_s, gqa_decode_gemms,
                                      occupancy_extra_s, sm_bytes_per_s)
from twin.errors import TwinInputError
from twin.hardware.catalog import resolve_model


def test_gqa_decode_gemms_are_the_four_shards_of_a_llama_layer():
    m = resolve_model("llama-3.1-70b")
    assert gqa_decode_gemms(m, 1) == [(10240, 8192), (8192, 8192), (57344, 8192), (8192, 28672)]
    assert gqa_decode_gemms(m, 8) == [(1280, 8192), (8192, 1024), (7168, 8192), (8192, 3584)]


def test_gqa_decode_gemms_reject_moe_models_and_tp_sizes_that_do_not_divide():
    with pytest.raises(TwinInputError, match="dense GQA"):
        gqa_decode_gemms(resolve_model("mixtral-8x7b"), 1)
    with pytest.raises(TwinInputError, match="does not divide"):
        gqa_decode_gemms(resolve_model("llama-3.1-70b"), 3)


def test_sm_rate_is_the_stages_that_fit_times_the_weight_tile_over_the_latency():
    # B200 FP8: a stage is 128 x (128 + 32) bytes = 20 KB; 227 KB holds 11; 11 x 16 KB in flight per us
    assert sm_bytes_per_s(DECODE_KERNELS[("B200", "fp8")], "fp8", 1e-6) == pytest.approx(11 * 16384 / 1e-6)
    assert sm_bytes_per_s(DECODE_KERNELS[("B200", "fp8")], "fp8", 2e-6) == pytest.approx(11 * 16384 / 2e-6)
    with pytest.raises(TwinInputError, match="latency_s"):
        sm_bytes_per_s(DECODE_KERNELS[("B200", "fp8")], "fp8", 0.0)


def test_gemm_stream_is_the_longer_of_the_bandwidth_and_the_sm_limited_time():
    kernel = DecodeKernel(tile_n=128, tile_k=128, tile_tokens=32, cluster_n=4)
    # 10 tiles -> 12 CTAs (3 clusters), one wave: one tile column (128 x 1000 bytes) at 1e9 B/s per SM
    assert gemm_stream_s(1280, 1000, kernel, 148, 1e9, 1e15, 1.0) == pytest.approx(128 * 1000 / 1e9)
    # many SMs' worth at a fast SM rate: the bandwidth bound
    assert gemm_stream_s(1280, 1000, kernel, 148, 1e15, 1e9, 1.0) == pytest.approx(1280 * 1000 / 1e9)
    # 200 CTAs on 148 SMs: two waves
    assert gemm_stream_s(25600, 10, kernel, 148, 1.0, 1e15, 1.0) == pytest.approx(2 * 128 * 10)
    with pytest.raises(TwinInputError):
        gemm_stream_s(0, 10, kernel, 148, 1.0, 1.0, 1.0)


def test_occupancy_extra_is_zero_where_every_gemm_saturates_or_no_kernel_is_known():
    m = resolve_model("llama-3.1-70b")
    assert occupancy_extra_s(m, "B200", "fp8", 1, 0.978 * 8e12) == 0.0
    assert occupancy_extra_s(m, "B200", "bf16", 8, 8e12) == 0.0           # cuBLAS's tiles: not in the table
    assert occupancy_extra_s(m, "A100-SXM", "fp8", 8, 2e12) == 0.0
    assert occupancy_extra_s(resolve_model("mixtral-8x7b"), "B200", "fp8", 8, 8e12) == 0.0
    assert occupancy_extra_s(m, "B200", "fp8", 8, 0.978 * 8e12) > 0.0     # QKV: 10 tiles on 148 SMs


def test_fit_fraction_recovers_the_fixed_part_and_the_fraction_exactly():
    from tests.benchmark_module import load_benchmark
    bench = load_benchmark("dense_stream_occupancy")
    k, f, rms = bench.fit_fraction([(tp, 5e-3 + (0.07 / tp) / 0.78) for tp in (1, 2, 4, 8)], lambda tp: 0.07 / tp)
    assert (k, f) == pytest.approx((5e-3, 0.78), rel=1e-9) and rms < 1e-12
    with pytest.raises(TwinInputError, match="two TP sizes"):
        bench.fit_fraction([(1, 1.0), (1, 2.0)], lambda tp: 1.0)


@pytest.mark.parametrize("workers", [["--workers", "2"], ["--workers=2"]])
def test_heldout_trial_refuses_worker_processes(monkeypatch, workers):
    from tests.benchmark_module import load_benchmark
    bench = load_benchmark("dense_stream_occupancy")
    monkeypatch.setattr("sys.argv", ["dense_stream_occupancy.py", "heldout", "--", "--folds", "GPU", *workers])
    with pytest.raises(TwinInputError, match="--workers 1"):
        bench.main()


def test_heldout_trial_keeps_its_own_options_before_the_separator(monkeypatch):
    from tests.benchmark_module import load_benchmark
    bench = load_benchmark("dense_stream_occupancy")
    seen = {}

    def install(latency_s):          # the trial's patch is a context manager (on for the run only)
        seen["latency_s"] = latency_s
        return contextlib.nullcontext()

    monkeypatch.setattr(bench, "install", install)
    import benchmarks.fidelity_real as fidelity_real
    monkeypatch.setattr(fidelity_real, "main", lambda: seen.setdefault("argv", list(__import__("sys").argv)))
    monkeypatch.setattr("sys.argv", ["d.py", "heldout", "--latency-us", "0.8", "--", "--folds", "GPU"])
    bench.main()
    assert seen == {"latency_s": pytest.approx(0.8e-6), "argv": ["fidelity_real.py", "--folds", "GPU"]}
    monkeypatch.setattr("sys.argv", ["d.py", "reading", "--", "--folds", "GPU"])
    with pytest.raises(TwinInputError, match="takes no fidelity_real options"):
        bench.main()


@pytest.mark.parametrize("latency_us", ["nan", "inf", "-1", "0"])
def test_a_latency_that_is_not_positive_and_finite_is_one_line(monkeypatch, capsys, latency_us):
    from tests.benchmark_module import load_benchmark
    bench = load_benchmark("dense_stream_occupancy")
    monkeypatch.setattr("sys.argv", ["d.py", "reading", "--latency-us", latency_us])
    with pytest.raises(SystemExit) as exc:
        bench.run_script(bench.main)
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == (f"error: --latency-us {float(latency_us)}: must be a positive finite "
                                               "number")


def test_non_finite_rates_and_latencies_are_refused():
    kernel = DECODE_KERNELS[("B200", "fp8")]
    for rates in ((float("nan"), 8e12), (1e11, float("inf")), (1e11, 0.0)):
        with pytest.raises(TwinInputError, match="positive and finite"):
            gemm_stream_s(1024, 1024, kernel, 148, *rates, 1.0)
    for latency in (float("nan"), float("inf"), -1e-6):
        with pytest.raises(TwinInputError, match="latency_s"):
            sm_bytes_per_s(kernel, "fp8", latency)
