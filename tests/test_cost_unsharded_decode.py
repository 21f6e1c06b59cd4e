"""The fixed time per decoder layer a step without tensor parallelism still pays (twin.cost.unsharded_decode):
charged at TP 1 on a generation with a link part (Blackwell), at 2 x layers x (the path's all-reduce latency -
the link part), never at TP > 1, on Hopper or beside an expert-parallel exchange; its explain() part; and the
light-load split of the measured rows that reads it (benchmarks/tp1_decode.py)."""

from __future__ import annotations

import types

import pytest
from benchmark_module import load_benchmark
from core_helpers import step_shape

from twin.cost.default_terms import GENERATION_TERMS
from twin.cost.roofline import RooflineCostModel
from twin.cost.unsharded_decode import LINK_KEY, unsharded_floor_s

LINK_S = GENERATION_TERMS["blackwell"][LINK_KEY]


def _model(gpu: str = "B200", tp: int = 1, **kw) -> RooflineCostModel:
    return RooflineCostModel("llama-3.1-70b", gpu, tp, "fp8", "fp8", **kw)


def test_the_link_part_is_blackwells_only():
    assert LINK_S == 6e-6
    assert LINK_KEY not in GENERATION_TERMS.get("hopper", {})


def test_a_tp1_blackwell_step_pays_the_layers_floor(monkeypatch):
    m = _model(allreduce_latency_s=20e-6)
    expected = 2 * 80 * (20e-6 - LINK_S)
    assert m.unsharded_floor_s == pytest.approx(expected, rel=1e-12)
    decode = step_shape([1] * 4, [1500] * 4)
    parts = m.explain(decode)
    assert parts["unsharded_layer_floor_s"] == pytest.approx(expected, rel=1e-12)
    assert sum(v for k, v in parts.items() if k != "total_s") == pytest.approx(parts["total_s"], rel=1e-12)
    # without the link part (a generation that has none) the same step is exactly that much shorter
    monkeypatch.setitem(GENERATION_TERMS["blackwell"], LINK_KEY, None)
    off = _model(allreduce_latency_s=20e-6)
    assert off.unsharded_floor_s == 0.0
    assert m.step_time_s(decode) - off.step_time_s(decode) == pytest.approx(expected, rel=1e-9)


def test_the_path_fused_latency_sets_it_and_it_never_goes_negative():
    assert _model(allreduce_latency_s=20e-6, fused_allreduce_latency_s=11e-6).unsharded_floor_s == pytest.approx(
        2 * 80 * (11e-6 - LINK_S), rel=1e-12)
    assert _model(allreduce_latency_s=4e-6).unsharded_floor_s == 0.0


@pytest.mark.parametrize("gpu, tp", [("B200", 2), ("B200", 8), ("H100-SXM", 1), ("H100-SXM", 4)])
def test_no_floor_at_tp_above_one_or_on_hopper(gpu, tp):
    m = _model(gpu, tp)
    assert m.unsharded_floor_s == 0.0
    assert "unsharded_layer_floor_s" not in m.explain(step_shape([1] * 4, [1500] * 4))


def test_no_floor_beside_an_expert_parallel_exchange():
    fake = types.SimpleNamespace(gpu=_model().gpu, fused_allreduce_latency_s=24.7e-6,
                                 model=types.SimpleNamespace(num_hidden_layers=10))
    assert unsharded_floor_s(fake, 1, 0.0, LINK_S) == pytest.approx(2 * 10 * (24.7e-6 - LINK_S), rel=1e-12)
    assert unsharded_floor_s(fake, 1, 1e-4, LINK_S) == 0.0
    assert unsharded_floor_s(fake, 2, 0.0, LINK_S) == 0.0


def test_the_split_recovers_a_fixed_time_a_tp_divided_part_and_an_allreduce_part():
    mod = load_benchmark("tp1_decode")
    rows = []
    for isl, k, w in ((1024, 5.0, 11.0), (8192, 6.0, 12.0)):
        for tp in (1, 2, 4, 8):
            tpot = k + w / tp + (0.5 if tp > 1 else 0.0)
            rows.append({"isl": str(isl), "osl": "1024", "batch_size": "4", "tp_size": str(tp),
                         "silicon_tpot_ms": str(tpot)})
    groups, a, rms = mod.split(rows)
    assert a == pytest.approx(0.5, abs=1e-9) and rms < 1e-9
    assert groups[(1024, 1024, 4)] == pytest.approx((5.0, 11.0), abs=1e-9)
    assert groups[(8192, 1024, 4)] == pytest.approx((6.0, 12.0), abs=1e-9)
    assert mod.split(rows, with_allreduce=False)[2] > 0.01        # K + w / TP alone cannot fit it
