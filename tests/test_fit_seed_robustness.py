"""benchmarks/fit_seed_robustness.py (issue 33, round 21): the option parsers and the across-seed spreads of the
fitted terms and held-out medians (exact, no simulation)."""

from __future__ import annotations

import math

import pytest

from benchmarks.fit_seed_robustness import fold_spec, median_spread, term_spread, windows
from twin.errors import TwinInputError


def test_windows_take_seconds_or_whole_once_each():
    assert windows("60,120,whole") == [60.0, 120.0, None]
    assert windows(" 300 ") == [300.0]
    for bad in ("", "0", "-5", "60,60", "whole,whole", "nan", "soon"):
        with pytest.raises(TwinInputError, match="--windows"):
            windows(bad)


def test_fold_spec_names_a_report_fold_kind_and_a_group():
    assert fold_spec("source:silicon") == ("source", "silicon")
    assert fold_spec("family:llama") == ("family", "llama")
    for bad in ("silicon", "source:", "sauce:silicon"):
        with pytest.raises(TwinInputError, match="--fold"):
            fold_spec(bad)


def _run(step_ms: float, se_ms: float, tpot_abs: float, tpot_signed: float) -> dict:
    return {"params": {"step_overhead_s": step_ms / 1000}, "std": {"step_overhead_s": se_ms / 1000},
            "summary": {"mean_tpot_ms": {"n": 3, "abs": tpot_abs, "signed": tpot_signed},
                        "median_ttft_ms": {"n": 0, "abs": None, "signed": None},
                        "mean_ttft_ms": {"n": 3, "abs": 0.5, "signed": -0.5},
                        "mean_e2el_ms": {"n": 3, "abs": 0.1, "signed": -0.1},
                        "request_throughput": {"n": 3, "abs": 0.1, "signed": 0.1}}}


def test_term_spread_in_report_units_and_standard_errors():
    s = term_spread([_run(1.8, 0.2, 0.09, -0.07), _run(1.5, 0.4, 0.13, -0.13)])["step_overhead_s"]
    assert s["mean"] == pytest.approx(1.65)                 # ms, the term's report unit
    assert s["range"] == pytest.approx(0.3)
    assert s["sd"] == pytest.approx(0.3 / math.sqrt(2))
    assert s["se"] == pytest.approx(0.3)
    assert s["range_se"] == pytest.approx(1.0)


def test_term_spread_one_seed_and_no_finite_error():
    one = term_spread([_run(1.8, 0.2, 0.09, -0.07)])["step_overhead_s"]
    assert one["range"] == 0.0 and one["sd"] == 0.0
    nan = _run(1.8, 0.2, 0.09, -0.07)
    nan["std"]["step_overhead_s"] = math.nan
    assert math.isnan(term_spread([nan])["step_overhead_s"]["range_se"])


def test_median_spread_skips_a_metric_without_cases():
    m = median_spread([_run(1.8, 0.2, 0.09, -0.07), _run(1.5, 0.4, 0.13, -0.13)])
    assert "median_ttft_ms" not in m
    assert m["mean_tpot_ms"]["abs_range"] == pytest.approx(0.04)
    assert m["mean_tpot_ms"]["signed_range"] == pytest.approx(0.06)
    assert m["mean_tpot_ms"]["abs_mean"] == pytest.approx(0.11)
    assert m["mean_ttft_ms"]["abs_range"] == 0.0


def test_fidelity_real_alone_window_option(monkeypatch):
    import sys

    from benchmarks import fidelity_real
    assert fidelity_real.parser().parse_args([]).alone_fit_sim_s == fidelity_real.OPEN_LOOP_FOLD_FIT_S
    assert fidelity_real.parser().parse_args(["--alone-fit-sim-s", "whole"]).alone_fit_sim_s is None
    assert fidelity_real.parser().parse_args(["--alone-fit-sim-s", "300"]).alone_fit_sim_s == 300.0
    # with a prediction window the fold fits that window: a second window would be ignored, so it is an error
    monkeypatch.setattr(sys, "argv", ["fidelity_real.py", "--eval-sim-s", "60", "--alone-fit-sim-s", "300"])
    with pytest.raises(TwinInputError, match="--alone-fit-sim-s"):
        fidelity_real.main()


def test_fold_first_simulates_a_whole_window_for_a_fold_on_open_loop_runs_alone():
    from types import SimpleNamespace

    from twin.fitting.fit_window import fold_first

    cases = [SimpleNamespace(run=SimpleNamespace(name=n, closed_loop=closed), group=g)
             for n, closed, g in (("ip1", False, "inference-perf"), ("si1", True, "silicon"))]
    calls = []

    def simulate(cs, s):
        calls.append(([c.run.name for c in cs], s))
        return [f"{c.run.name}@{s}" for c in cs]

    window, sims = fold_first(cases, "silicon", lambda c: c.group, ["ip1@30", "si1"], 30.0, None, simulate, {})
    assert window is None and sims == ["ip1@None", "si1"] and calls == [(["ip1"], None)]
    # a fold with a closed-loop training row keeps the report's window
    assert fold_first(cases, "inference-perf", lambda c: c.group, ["ip1@30", "si1"], 30.0, None, simulate,
                      {}) == (30.0, ["ip1@30", "si1"])
