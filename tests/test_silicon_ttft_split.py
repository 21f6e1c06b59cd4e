"""benchmarks/silicon_ttft_split.py (issue 33, round 14): load bands, slice medians, the light-load gap in ms, the
candidate-prior parser and the variants it simulates."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from benchmark_module import load_benchmark
from twin.errors import TwinInputError


def _case(isl: int, conc: int, ttft_ms: float):
    return SimpleNamespace(row=SimpleNamespace(isl=isl, concurrency=conc),
                           run=SimpleNamespace(metrics={"mean_ttft_ms": ttft_ms}))


def test_load_bands_split_at_8_and_64():
    m = load_benchmark("silicon_ttft_split")
    assert [m.load_band(c) for c in (1, 8, 16, 64, 128, 512)] == ["C<=8", "C<=8", "C16-64", "C16-64", "C>=128",
                                                                  "C>=128"]


def test_slice_medians_skip_rows_without_ttft():
    m = load_benchmark("silicon_ttft_split")
    keys = [["a"], ["a", "b"], ["b"]]
    errs = [{"mean_ttft_ms": -0.5}, {"mean_ttft_ms": -0.1}, {"mean_tpot_ms": 0.3}]
    assert m.slice_medians(keys, errs) == {"a": (2, pytest.approx(-0.3)), "all": (2, pytest.approx(-0.3)),
                                           "b": (1, -0.1)}


def test_light_gap_is_measured_minus_predicted_over_light_rows_only():
    m = load_benchmark("silicon_ttft_split")
    cases = [_case(1024, 4, 100.0), _case(1024, 8, 200.0), _case(8192, 4, 400.0), _case(1024, 64, 1000.0)]
    errs = [{"mean_ttft_ms": -0.5}, {"mean_ttft_ms": -0.25}, {"mean_ttft_ms": -0.1}, {"mean_ttft_ms": -0.9}]
    gaps = m.light_gap_ms(cases, errs)
    assert gaps == {1024: pytest.approx(50.0), 8192: pytest.approx(40.0)}   # 1024: median of 50 and 50 ms


def test_parse_prior_and_its_errors():
    m = load_benchmark("silicon_ttft_split")
    assert m.parse_prior("cpu:eager_layer_host_s@blackwell=1e-5,layer_token_decode_share@hopper+experts_bf16=0.5") \
        == ("cpu", {"eager_layer_host_s@blackwell": 1e-5, "layer_token_decode_share@hopper+experts_bf16": 0.5})
    for bad in ("a=1", "x:", "x:a", "x:a=one", "x:=1", "x:no_such_term=1", "x:eager_layer_host_s@mars=1"):
        with pytest.raises(TwinInputError):
            m.parse_prior(bad)


def test_variants_switch_groups_on_over_the_fold():
    m = load_benchmark("silicon_ttft_split")
    names = [n for g in m.GROUPS.values() for n in g]
    fold = {n: 0.0 for n in names}
    embedded = {n: 1.0 for n in names}
    v = m.variants(fold, embedded, ["token"], [("p", {"x": 2.0})])
    assert list(v) == ["defaults", "fold", "on token", "all cost terms on", "prior p"]
    assert all(v["defaults"][n] == 1.0 for n in names)
    assert v["on token"]["layer_token_overhead_s@blackwell"] == 1.0
    assert v["on token"]["eager_layer_host_s@blackwell"] == 0.0
    on_all = v["all cost terms on"]
    assert all(on_all[n] == 1.0 for g in m.COST_GROUPS for n in m.GROUPS[g])
    assert all(on_all[n] == 0.0 for g in ("serving", "request", "bandwidth") for n in m.GROUPS[g])
    assert v["prior p"]["x"] == 2.0 and v["fold"] is fold


def test_bad_moe_token_check_and_fold_file_are_one_line_errors(tmp_path, monkeypatch):
    m = load_benchmark("silicon_ttft_split")
    monkeypatch.setattr("sys.argv", ["x", str(tmp_path / "none.json"), "--moe-token-check", "0,-1e-7"])
    with pytest.raises(TwinInputError, match="must be >= 0"):
        m.main()
    with pytest.raises(TwinInputError, match="not a fidelity_real.py --json report"):
        m.read_fold(tmp_path / "none.json")
    (tmp_path / "other.json").write_text('{"folds": {"GPU": {}}}')
    with pytest.raises(TwinInputError, match="not a fidelity_real.py --json report"):
        m.read_fold(tmp_path / "other.json")
