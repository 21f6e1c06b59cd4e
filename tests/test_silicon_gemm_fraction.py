"""benchmarks/silicon_gemm_fraction.py's pure helpers (issue 33, round 16): the fraction of the datasheet the prompt
GEMMs would reach if the missing prompt time were GEMM time, its spread, and the pooled per-layer split."""

from __future__ import annotations

import math

import pytest

from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError

gf = load_benchmark("silicon_gemm_fraction")


def _row(gpu="B200", family="llama", fmt="fp8", tp=1, gemm_s=50e-6, x_s=25e-6, layers=80, ep=1, dp=1):
    return {"gpu": gpu, "family": family, "precision": fmt, "version": "0.10.2", "tp": tp, "ep": ep, "dp": dp,
            "gemm_s": gemm_s, "x_s": x_s, "layers": layers}


def test_reached_fraction_is_exact():
    assert gf.reached_fraction(0.6, 50e-6, 0.0) == pytest.approx(0.6)
    assert gf.reached_fraction(0.6, 50e-6, 50e-6) == pytest.approx(0.3)       # twice the GEMM time: half the rate
    for bad in ((0.0, 1e-6, 0.0), (1.2, 1e-6, 0.0), (0.6, 0.0, 0.0), (0.6, 1e-6, -1e-9)):
        with pytest.raises(TwinInputError):
            gf.reached_fraction(*bad)


def test_fraction_rows_drop_unreadable_and_layouts():
    rows = [_row(), _row(x_s=-math.inf), _row(x_s=math.inf), _row(ep=4), _row(dp=2)]
    out = gf.fraction_rows(rows, 0.6)
    assert len(out) == 1
    assert out[0]["gemm_layer_s"] == pytest.approx(50e-6 / 80) and out[0]["x_layer_s"] == pytest.approx(25e-6 / 80)
    assert out[0]["fraction"] == pytest.approx(0.4)


def test_a_gemm_fraction_is_flat_and_a_layer_constant_is_not():
    # a GEMM fraction: X proportional to G at every TP -> one f; a constant per layer: f falls with TP
    frac = gf.fraction_rows([_row(tp=t, gemm_s=50e-6 / t, x_s=25e-6 / t) for t in (1, 2, 4, 8)], 0.6)
    const = gf.fraction_rows([_row(gpu="H", tp=t, gemm_s=50e-6 / t, x_s=16e-6) for t in (1, 2, 4, 8)], 0.6)
    spread = gf.spread(frac + const)
    n, lo, hi = spread[("B200", "fp8")]
    assert n == 4 and lo == pytest.approx(0.4) and hi == pytest.approx(0.4)
    n, lo, hi = spread[("H", "fp8")]
    assert n == 4 and hi / lo > 2.0


def test_per_layer_fit_recovers_intercept_and_slope():
    a, b = 0.2e-6, 0.5
    rows = [_row(family=f, tp=t, gemm_s=g * 80, x_s=(a + b * g) * 80)
            for f, g0 in (("llama", 0.6e-6), ("minimax", 0.06e-6)) for t in (1, 2, 4, 8) for g in (g0 / t,)]
    rows = gf.fraction_rows(rows, 0.6)
    pooled = gf.per_layer_fit(rows)["B200 (all)"]
    assert pooled[0] == 8 and pooled[1] == pytest.approx(a) and pooled[2] == pytest.approx(b)
    assert pooled[3] == pytest.approx(0.0, abs=1e-15)
    fam = gf.per_layer_fit(rows, by_family=True)
    assert set(fam) == {"B200 llama", "B200 minimax"} and fam["B200 minimax"][1] == pytest.approx(a)
    # one GEMM size cannot separate a from b
    assert gf.per_layer_fit(gf.fraction_rows([_row(), _row()], 0.6)) == {}


def test_chunk_pairs_compare_one_deployment_at_two_chunk_sizes():
    rows = [_row(tp=2, x_s=16e-6) | {"chunk_tokens": 8192}, _row(tp=2, x_s=16e-6) | {"chunk_tokens": 2048},
            _row(tp=2, x_s=20e-6) | {"chunk_tokens": 2048}, _row(tp=4, x_s=9e-6) | {"chunk_tokens": 8192}]
    pairs = gf.chunk_pairs(gf.fraction_rows(rows, 0.6))
    assert len(pairs) == 1                                    # TP 4 has one chunk size only
    key, lo, x_lo, hi, x_hi = pairs[0]
    assert key == ("B200", "llama", "fp8", 2) and (lo, hi) == (2048, 8192)
    assert x_lo == pytest.approx(18e-6 / 80) and x_hi == pytest.approx(16e-6 / 80)     # median per chunk size
