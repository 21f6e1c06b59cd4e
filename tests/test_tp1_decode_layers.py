"""The fixed decode time per step against the decoder layers across TP sets (benchmarks/tp1_decode.py; issue 33,
round 12)."""

from __future__ import annotations

import math

import pytest

from tests.benchmark_module import load_benchmark

tp1 = load_benchmark("tp1_decode")


def _rows(tpots: dict[int, float], group=(1024, 1024, 4)) -> list[dict]:
    isl, osl, conc = group
    return [{"tp_size": str(tp), "isl": str(isl), "osl": str(osl), "batch_size": str(conc),
             "silicon_tpot_ms": str(t)} for tp, t in tpots.items()]


def test_step_and_layer_recovers_the_per_step_and_per_layer_parts_exactly():
    points = [(n, 0.4 + 0.065 * n) for n in (36, 62, 80)]
    s0, l0, se_s, se_l = tp1.step_and_layer(points)
    assert (s0, l0) == (pytest.approx(0.4, abs=1e-12), pytest.approx(0.065, abs=1e-12))
    assert se_s == pytest.approx(0.0, abs=1e-9) and se_l == pytest.approx(0.0, abs=1e-9)
    assert all(math.isnan(x) for x in tp1.step_and_layer(points[:2])[2:])     # no residual: no standard error


def test_fixed_time_is_k_with_a_tp1_row_and_k_plus_a_without():
    # K 3.0, w 4.0, A 0.5
    with_tp1 = _rows({tp: 3.0 + 4.0 / tp + (0.5 if tp > 1 else 0.0) for tp in (1, 2, 4, 8)})
    assert tp1.fixed_at_reference(with_tp1) == pytest.approx(3.0, abs=1e-9)
    without = _rows({tp: 3.0 + 4.0 / tp + 0.5 for tp in (2, 4, 8)})
    assert tp1.fixed_at_reference(without) == pytest.approx(3.5, abs=1e-9)
