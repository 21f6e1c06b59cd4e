"""benchmarks/kimi_int4_residual.py (issue 33, round 16): the expert bytes per decode step, the residual line with
its standard errors, the overrides, the shapes and the one-case-per-run selection."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from benchmark_module import load_benchmark
from twin.errors import TwinInputError
from twin.hardware.model_catalog import resolve_model


def test_the_expert_gb_are_the_touched_share_of_the_int4_g32_experts_over_tp():
    m = load_benchmark("kimi_int4_residual")
    kimi = resolve_model("kimi-k2.5")
    touched = 384 * (1 - (1 - 8 / 384) ** 4)                       # uniform top-8 of 384, four tokens
    per_expert = 3 * 7168 * 2048 * (0.5 + 2 / 32)                   # gate, up, down at 4 bits + a bf16 scale per 32
    got = m.expert_gb_per_step(384, 8, kimi.routed_expert_params, 4, 8)
    assert got == pytest.approx(60 * touched * per_expert / 8 / 1e9, rel=1e-9)


def test_an_exact_line_is_recovered_with_zero_standard_errors():
    m = load_benchmark("kimi_int4_residual")
    a, b, sa, sb = m.ols_line([(x, -1.8 + 0.006 * x) for x in (5.76, 11.06, 20.4, 34.97, 52.8)])
    assert (a, b) == (pytest.approx(-1.8, abs=1e-12), pytest.approx(0.006, abs=1e-12))
    assert sa == pytest.approx(0.0, abs=1e-9) and sb == pytest.approx(0.0, abs=1e-9)


def test_the_standard_errors_follow_the_residual_variance():
    m = load_benchmark("kimi_int4_residual")
    pts = [(0.0, 1.0), (1.0, 0.0), (2.0, 3.0)]                     # fit y = 1/3 + 1 x, residuals 2/3, -4/3, 2/3
    a, b, sa, sb = m.ols_line(pts)
    s2 = (4 + 16 + 4) / 9 / 1                                       # n - 2 = 1 degree of freedom
    assert (a, b) == (pytest.approx(1 / 3), pytest.approx(1.0))
    assert sb == pytest.approx(math.sqrt(s2 / 2.0))                 # sxx = 2
    assert sa == pytest.approx(math.sqrt(s2 * (1 / 3 + 1 / 2)))     # mean x 1


@pytest.mark.parametrize("pts", [[(1.0, 2.0)], [(1.0, 2.0), (1.0, 3.0)]])
def test_a_line_needs_two_distinct_x(pts):
    with pytest.raises(TwinInputError):
        load_benchmark("kimi_int4_residual").ols_line(pts)


def test_overrides_are_numbers_and_anything_else_is_an_error():
    from twin.yaml_input import parse_numeric_set_options
    got = parse_numeric_set_options(["moe_layer_overhead_s@experts_int4=3e-05", "moe_expert_efficiency@experts_int4=0.5",
                                     "request_path_s@client_vllm_bench+vllm_0.10=0.02"])
    assert got == {"moe_layer_overhead_s@experts_int4": 3e-05, "moe_expert_efficiency@experts_int4": 0.5,
                   "request_path_s@client_vllm_bench+vllm_0.10": 0.02}
    for bad, message in ((["x=abc"], "--set x='abc': expected a finite number"),
                         (["x=true"], "--set x='true': expected a finite number"),
                         (["x=nan"], "--set x='nan': expected a finite number"),
                         (["novalue"], "--set 'novalue': expected NAME=NUMBER"),
                         (["=1"], "--set '=1': expected NAME=NUMBER"),
                         (["x=1", "x=2"], "--set x: given twice")):
        with pytest.raises(TwinInputError) as err:
            parse_numeric_set_options(bad)
        assert str(err.value) == message


def test_shapes_parse_and_a_bad_one_is_an_error():
    m = load_benchmark("kimi_int4_residual")
    assert m.parse_shape("1024x8192") == (1024, 8192)
    with pytest.raises(TwinInputError):
        m.parse_shape("1024-8192")


def test_one_case_per_run_sorted_by_shape_and_load():
    m = load_benchmark("kimi_int4_residual")

    def case(isl, osl, conc, src):
        return SimpleNamespace(row=SimpleNamespace(isl=isl, osl=osl, concurrency=conc, source=src))
    cases = [case(8192, 1024, 4, "a"), case(1024, 1024, 8, "a"), case(1024, 1024, 8, "b"), case(1024, 1024, 4, "b")]
    got = m.distinct_int4_cases(cases)
    assert [(c.row.isl, c.row.concurrency, c.row.source) for c in got] == [(1024, 4, "b"), (1024, 8, "a"), (8192, 4, "a")]


def test_a_fold_is_read_from_a_report_and_a_missing_one_is_an_error(tmp_path):
    import json
    m = load_benchmark("kimi_int4_residual")
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"folds": {"family": {"folds": [{"held_out": "kimi", "params": {"a": 1.0}}]}}}))
    assert m.load_fold_params(report, "family", "kimi") == {"a": 1.0}
    for path, kind, group in ((report, "family", "llama"), (report, "GPU", "B200"), (tmp_path / "none.json", "family", "kimi")):
        with pytest.raises(TwinInputError):
            m.load_fold_params(path, kind, group)


def test_an_override_must_be_a_cost_model_keyword_whose_scope_covers_the_server():
    m = load_benchmark("kimi_int4_residual")
    from twin.fitting.replay import deployment_for
    from twin.fitting.silicon import model_family, silicon_cases
    case = next(c for c in silicon_cases()[0]
                if model_family(c.row.model_path) == "kimi" and (c.row.precision or "").lower() == "int4")
    dep = deployment_for(case.run, case.target)
    m.check_overrides({"moe_layer_overhead_s@experts_int4": 3e-5, "memory_efficiency@blackwell": 0.9}, dep)
    for bad in ({"foo": 1.0}, {"memory_efficiency@hopper": 0.9}, {"moe_expert_efficiency@experts_nvfp4": 0.5}):
        with pytest.raises(TwinInputError):
            m.check_overrides(bad, dep)
