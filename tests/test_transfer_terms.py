"""benchmarks/transfer_terms.py and benchmarks/transfer_readings.py (issue 33, round 13): which carried term a
one-generation fold hands to the other generation, and what each fold read."""

from __future__ import annotations

import json
import math

import pytest
from benchmark_module import load_benchmark
from twin.cost import default_terms, mla_request


def _report(tmp_path, name: str, folds: dict) -> object:
    path = tmp_path / name
    path.write_text(json.dumps({"folds": folds}))
    return path


def _gpu_folds(h100: dict, b200: dict, std: dict | None = None) -> dict:
    std = std or {}
    return {"GPU": {"folds": [{"held_out": "H100-SXM", "params": h100, "std": std, "identification": {}},
                              {"held_out": "B200", "params": b200, "std": std, "identification": {}}]}}


def test_fold_params_pick_the_held_out_group(tmp_path):
    m = load_benchmark("transfer_terms")
    path = _report(tmp_path, "r.json", _gpu_folds({"step_overhead_s": 1e-3}, {"step_overhead_s": 2e-3}))
    assert m.fold_params(path, "GPU", "H100-SXM") == {"step_overhead_s": 1e-3}
    assert m.fold_params(path, "GPU", "B200") == {"step_overhead_s": 2e-3}


def test_variants_swap_one_group_at_a_time():
    m = load_benchmark("transfer_terms")
    base = {"memory_efficiency": 0.92, "memory_efficiency@blackwell": 0.92, "per_seq_overhead_s": 14e-6,
            "step_overhead_s": 1.8e-3}
    other = {"memory_efficiency": 0.90, "memory_efficiency@blackwell": 0.90, "per_seq_overhead_s": 17e-6,
             "step_overhead_s": 1.9e-3}
    v = m.variants(base, other, {"request_path_s": 5e-3})
    assert v["base"] == base | {"request_path_s": 5e-3}
    assert v["other"] == other | {"request_path_s": 5e-3}
    bw = v["base + other's bandwidth"]
    assert bw["memory_efficiency"] == bw["memory_efficiency@blackwell"] == 0.90
    assert bw["per_seq_overhead_s"] == 14e-6 and bw["step_overhead_s"] == 1.8e-3
    ps = v["base + other's per_seq"]
    assert ps["per_seq_overhead_s"] == 17e-6 and ps["memory_efficiency"] == 0.92
    assert "per_seq_overhead_s@sync" not in ps            # a name neither fold carries is not invented
    assert set(v) == {"base", "other"} | {f"base + other's {g}" for g in m.GROUPS}


def test_embed_readings_switches_both_round_12_terms_on():
    m = load_benchmark("transfer_terms")
    with m.embedded_readings():      # scoped: tests/test_no_leaked_state.py checks the tables come back
        assert mla_request.MLA_EXPERT_REQUEST_S == mla_request.READINGS
        assert default_terms.EXPERT_FORMAT_TERMS["mxfp4"] == {"moe_active_expert_share": 0.75}
    assert mla_request.MLA_EXPERT_REQUEST_S == {} and "mxfp4" not in default_terms.EXPERT_FORMAT_TERMS


def test_readings_and_agreement(tmp_path):
    m = load_benchmark("transfer_readings")
    folds = _gpu_folds({"memory_efficiency@blackwell": 0.92, "step_overhead_s": 1.8e-3},
                       {"memory_efficiency": 0.97, "step_overhead_s": 2.0e-3},
                       std={"memory_efficiency@blackwell": 0.03, "memory_efficiency": 0.04,
                            "step_overhead_s": 1e-4})
    rows = m.readings(json.loads(_report(tmp_path, "r.json", folds).read_text()))
    assert [(k, g, t) for k, g, t, _ in rows] == [("GPU", "H100-SXM", "B200 rows"), ("GPU", "B200", "H100 rows")]
    b, h = rows[0][3], rows[1][3]
    assert b["memory_efficiency@blackwell"] == (0.92, 0.03, True)
    assert m.agreement(b["memory_efficiency@blackwell"], h["memory_efficiency"]) == pytest.approx(0.05 / 0.05)
    assert m.agreement(b["step_overhead_s"], h["step_overhead_s"]) == pytest.approx(2e-4 / math.hypot(1e-4, 1e-4))
    assert m.agreement((1.0, None, True), (2.0, 0.1, True)) is None       # no standard error: no verdict


def test_readings_mark_a_held_term(tmp_path):
    m = load_benchmark("transfer_readings")
    folds = {"family": {"folds": [{"held_out": "kimi", "params": {"per_seq_overhead_s": 1e-5}, "std": {},
                                   "identification": {"per_seq_overhead_s": "not identified, held at its prior"}}]}}
    rows = m.readings(json.loads(_report(tmp_path, "r.json", folds).read_text()))
    assert rows == [("family", "kimi", "both", {"per_seq_overhead_s": (1e-5, None, False)})]
