"""benchmarks/b200_moe_transfer.py (issue 33, round 17): the variants change only Blackwell-scoped terms (the B200
fold's fit never reads them, so simulating them at the fold's values is exact), the datasheet ratios are the
catalog's, and a wrong invocation is one line."""

from __future__ import annotations

import sys

import pytest

from tests.benchmark_module import load_benchmark

m = load_benchmark("b200_moe_transfer")
BASE = {"memory_efficiency": 0.96, "layer_token_overhead_s@blackwell+experts_fp8": 0.15e-6,
        "request_path_s@client_vllm_bench": 10.8e-3}


def test_datasheet_ratios():
    assert m.rate_ratio("bf16") == pytest.approx(2250.0 / 989.5, rel=1e-12)
    assert m.rate_ratio("fp8") == pytest.approx(4500.0 / 1979.0, rel=1e-12)
    assert m.bandwidth_ratio() == pytest.approx(8.0 / 3.35, rel=1e-12)


def test_variants_start_from_the_fold_and_replace_blackwell_terms_only():
    table = m.variants(BASE)
    assert table["base"] == BASE
    for label, params in table.items():
        changed = {k for k in params if params[k] != BASE.get(k)}
        if "bench client" in label or label.startswith("leak: all"):
            changed.discard("request_path_s@client_vllm_bench")    # the diagnostics' one non-Blackwell term
        assert all("blackwell" in k or k == "layer_overhead_s@mla" for k in changed), label
        assert params["memory_efficiency"] == 0.96
    per_token = table["rule: per-token / bf16 tensor ratio"]
    assert per_token["layer_token_overhead_s@blackwell+experts_nvfp4"] == pytest.approx(
        0.15e-6 * 989.5 / 2250.0, rel=1e-12)
    assert table["rule: Hopper FP8 MoE layer time 16 us (launch: unscaled)"][
        "moe_layer_overhead_s@blackwell+experts_fp8"] == 16e-6


def test_a_report_and_in_sample_together_is_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "argv", ["b200_moe_transfer.py", str(tmp_path / "r.json"), "--in-sample"])
    with pytest.raises(SystemExit) as exc:
        m.run_script(m.main)
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == "error: give either a report (BASE.json) or --in-sample, not both"


def test_known_names_takes_fit_keys_and_roofline_keywords_with_known_scopes():
    given = {"memory_efficiency": 0.9, "layer_token_overhead_s@blackwell+experts_mxfp4": 1e-7,
             "request_path_layer_s@client_vllm_bench": 1e-4}
    assert m.known_names(given) == given
    with pytest.raises(m.TwinInputError, match="--set bogus_s: neither a fit parameter nor a roofline keyword"):
        m.known_names({"bogus_s": 1.0})
    with pytest.raises(m.TwinInputError, match="--set memory_efficiency@blackwel: unknown scope 'blackwel'"):
        m.known_names({"memory_efficiency@blackwel": 0.9})
    with pytest.raises(m.TwinInputError, match="unknown scope 'experts_fp9'"):
        m.known_names({"moe_layer_overhead_s@blackwell+experts_fp9": 1e-6})


@pytest.mark.parametrize("argv, message", [
    (["--in-sample", "--sim-s", "0"], "--sim-s 0.0: must be a positive finite number of seconds"),
    (["--in-sample", "--sim-s", "nan"], "--sim-s nan: must be a positive finite number of seconds"),
    (["--in-sample", "--workers", "0"], "--workers 0: must be a whole number >= 1"),
    (["--in-sample", "--set", "bogus=1"], "--set bogus: neither a fit parameter nor a roofline keyword"),
    (["--in-sample", "--set", "memory_efficiency=inf"], "--set memory_efficiency='inf': expected a finite number"),
    (["--in-sample", "--only", ","], "--only ',': name at least one label prefix")])
def test_bad_options_are_one_line_before_any_simulation(monkeypatch, capsys, argv, message):
    monkeypatch.setattr(sys, "argv", ["b200_moe_transfer.py", *argv])
    with pytest.raises(SystemExit) as exc:
        m.run_script(m.main)
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"


def test_an_unknown_family_is_refused_by_its_choices(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["b200_moe_transfer.py", "--in-sample", "--family", "bogus"])
    with pytest.raises(SystemExit) as exc:
        m.main()
    assert exc.value.code == 2
    assert "argument --family: invalid choice: 'bogus'" in capsys.readouterr().err
