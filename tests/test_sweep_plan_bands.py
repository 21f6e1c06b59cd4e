"""Issue 33 (round 20): the held-out error bands under ``twin sweep``'s and ``twin plan``'s tables and in their
CSV / JSON exports (``twin.plan.heldout_rows``, worded by ``twin.results.heldout_note``), a plan's
``p50_ttft_ms`` (it was always null: the jobs never handed it back), and one reader of an SLO bound's statistic
for the scenario's ``slo:`` section and ``--slo`` / a plan file's ``slo:`` (the same allowed set, the same line)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from plan_cli_helpers import tiny_with_slo

from twin.cli.main import main
from twin.errors import TwinInputError
from twin.plan import heldout_rows as hr
from twin.plan.evaluate import RESULT_KEYS, Criteria, validate_body
from twin.results import heldout_bands as hb
from twin.results import heldout_note as hn
from twin.results.slo import parse_slo
from twin.slo_statistics import slo_statistic


def _band(signed: float, lo: float | None, hi: float | None, n: int = 6) -> dict:
    return {"n": n, "abs_median": abs(signed) + 0.01, "signed_median": signed, "p10": lo, "p90": hi}


def _doc() -> dict:
    """A hand-written bands document: Hopper dense in both fold kinds, Blackwell MoE in the GPU kind only."""
    hopper = {"mean_ttft_ms": _band(-0.05, -0.2, 0.1), "mean_tpot_ms": _band(0.02, -0.04, 0.08),
              "mean_e2el_ms": _band(0.01, -0.03, 0.05), "request_throughput": _band(0.0, -0.01, 0.02)}
    return hb.check_bands({
        "schema": hb.SCHEMA, "report": {"commit": "abc1234", "date": "2026-12-06", "command": "x"},
        "errors": "predicted / measured - 1", "interval_percentiles": [10, 90], "min_cases_for_interval": 5,
        "construction": "linear", "kinds": {"GPU": [{"generation": "hopper", "moe": False, "held_out": ["H100-SXM"], "metrics": hopper},
                          {"generation": "blackwell", "moe": True, "held_out": ["B200"],
                           "metrics": {"mean_ttft_ms": _band(-0.095, None, None, n=3)}}],
                  "family": [{"generation": "hopper", "moe": False, "held_out": ["llama"],
                              "metrics": {"mean_ttft_ms": _band(0.03, -0.1, 0.2)}}]}})


HOPPER, BLACKWELL_MOE, CONSTANT = ("hopper", False), ("blackwell", True), (None, "a constant step time")


def test_a_row_gets_its_server_and_compact_bands_as_json():
    cols = hr.band_columns([HOPPER], _doc())
    assert cols["heldout_server"] == "Hopper dense"
    assert json.loads(cols["heldout_bands"]) == {"report": "abc1234, 2026-12-06", "servers": [{
        "server": "Hopper dense", "generation": "hopper", "moe": False, "bands": {
            "GPU": {"mean_ttft_ms": {"n": 6, "signed_median": -0.05, "p10": -0.2, "p90": 0.1, "coverage": None},
                    "mean_tpot_ms": {"n": 6, "signed_median": 0.02, "p10": -0.04, "p90": 0.08, "coverage": None},
                    "mean_e2el_ms": {"n": 6, "signed_median": 0.01, "p10": -0.03, "p90": 0.05, "coverage": None},
                    "request_throughput": {"n": 6, "signed_median": 0.0, "p10": -0.01, "p90": 0.02,
                                           "coverage": None}},
            "family": {"mean_ttft_ms": {"n": 6, "signed_median": 0.03, "p10": -0.1, "p90": 0.2, "coverage": None}}}}]}
    assert hr.column_keys(cols["heldout_bands"]) == [HOPPER]
    other = hr.band_columns([CONSTANT], _doc())
    assert other["heldout_server"] == "none (a constant step time)"
    assert hr.column_keys(other["heldout_bands"]) == [CONSTANT]
    assert hr.server_label([HOPPER, ("blackwell", False)]) == "Hopper dense, Blackwell dense"
    assert hr.column_keys(float("nan")) == [] and hr.band_columns([], _doc())["heldout_server"] == ""


def test_the_note_is_heldout_notes_lines_naming_configurations_only_on_several_servers():
    doc = _doc()
    one = hr.band_note({"server.max_num_seqs=4": [HOPPER], "server.max_num_seqs=8": [HOPPER]}, doc)
    assert one == hn.server_lines("hopper", False, doc)
    assert one[0] == "Error band: the twin's error on held-out Hopper dense servers (not these)"
    assert one[-1] == "  predicted / measured - 1: median (p10..p90); report abc1234, 2026-12-06"
    two = hr.band_note({"gpu=H100-SXM": [HOPPER], "gpu=B200": [BLACKWELL_MOE], "c": [CONSTANT]}, doc)
    assert two == (hn.server_lines("hopper", False, doc, "gpu=H100-SXM")
                   + hn.server_lines("blackwell", True, doc, "gpu=B200")
                   + ["c:", hn.cost_model_line("a constant step time")])
    none = hr.band_note({"a": [("ampere", False)]}, doc)
    assert none == ["No error band: no held-out evidence for Ampere dense servers (the report holds out Hopper, "
                    "Blackwell only)"]


def test_the_margin_line_of_a_recommended_configuration():
    doc = _doc()
    assert hr.margin_line([HOPPER], doc) == (
        "on held-out Hopper dense servers (GPU generation held out) the twin's error was TTFT mean -5.0% "
        "(-20..+10%), TPOT +2.0% (-4..+8%), E2E mean +1.0% (-3..+5%), throughput 0.0% (-1..+2%): leave that "
        "margin on its numbers")
    assert hr.margin_line([BLACKWELL_MOE], doc) == (
        "on held-out Blackwell MoE servers (GPU generation held out) the twin's error was TTFT mean -9.5% (n=3), "
        "TPOT -, E2E mean -, throughput -: leave that margin on its numbers")
    for keys in ([CONSTANT], [("ampere", False)], [HOPPER, BLACKWELL_MOE], []):
        assert hr.margin_line(keys, doc) is None


def test_a_plans_band_document_names_the_configurations_per_server():
    doc = _doc()
    out = hr.band_document({"#0 (H100-SXM TP1)": [HOPPER], "#1 (B200 TP1)": [BLACKWELL_MOE]}, doc)
    assert out["report"] == doc["report"] and out["interval_percentiles"] == [10, 90]
    assert [(s["server"], s["configurations"]) for s in out["servers"]] == [
        ("Hopper dense", ["#0 (H100-SXM TP1)"]), ("Blackwell MoE", ["#1 (B200 TP1)"])]
    assert out["note"][0] == "#0 (H100-SXM TP1):"


# ---- the SLO statistic: one reader -------------------------------------------------------------------------
def test_the_statistic_reader():
    assert [slo_statistic(s) for s in ("mean", "median", "p50", "p99", "p99.0", "p99.9", "p0", "p100")] == [
        "mean", "median", "p50", "p99", "p99", "p99.9", "p0", "p100"]
    for bad in ("avg", "max", "p101", "p-1", "pnan", "p", "99", 99, None, "P99"):
        assert slo_statistic(bad) is None


@pytest.mark.parametrize("stats, problem", [
    ({"avg": 5}, "unknown statistic 'avg'; allowed: mean, median, p<0..100> (e.g. p50, p99, p99.9)"),
    ({"p101": 5}, "unknown statistic 'p101'; allowed: mean, median, p<0..100> (e.g. p50, p99, p99.9)"),
    ({"p99": 5, "p99.0": 6}, "'p99' and 'p99.0' are the same statistic (p99); give it once"),
    ({}, "empty; give e.g. {p99: 1000}"),
])
def test_hostile_statistics_read_the_same_in_the_scenario_and_the_cli(stats, problem):
    line = f"slo.ttft_ms: {problem}"
    with pytest.raises(TwinInputError) as scen:
        validate_body(tiny_with_slo({"ttft_ms": stats}))
    assert str(scen.value) == f"scenario: {line}"
    with pytest.raises(TwinInputError) as cli:
        Criteria({"ttft_ms": stats})
    assert str(cli.value) == line


def test_an_itl_threshold_is_refused_by_the_scenario_before_any_run_as_by_the_cli():
    """ITL has no per-request value: the scenario took ``itl_ms: 50`` and the run failed after simulating."""
    line = "slo.itl_ms: ITL has no per-request value; give a statistic bound such as {p99: 50}"
    with pytest.raises(TwinInputError) as scen:
        validate_body(tiny_with_slo({"itl_ms": 50}))
    assert str(scen.value) == f"scenario: {line} (got 50)"
    with pytest.raises(TwinInputError) as cli:
        Criteria({"itl_ms": 50})
    assert str(cli.value) == f"{line} (got 50)"     # round 21: one wording on both paths (twin.slo_section)
    assert validate_body(tiny_with_slo({"itl_ms": {"p99": 50}})).slo.as_dict() == {"itl_ms": {"p99": 50.0}}


def test_any_percentile_reads_in_both_and_runs(tmp_path):
    """A bound the CLI took (p97) used to fail every run of a sweep in the scenario's reader: now both take it."""
    assert validate_body(tiny_with_slo({"ttft_ms": {"p97": 500}})).slo.as_dict() == {"ttft_ms": {"p97": 500.0}}
    assert parse_slo({"ttft_ms": {"p97": 500}}).bounds_ms == {"ttft": {"p97": 500.0}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_with_slo(None) | {"slo": {"ttft_ms": 10000}}))
    out = tmp_path / "rows.csv"
    res = CliRunner().invoke(main, ["sweep", str(path), "--grid", "server.max_num_seqs=8", "--slo",
                                    "ttft_ms.p97=10000", "--backend", "serial", "-q", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert list(pd.read_csv(out)["status"]) == ["ok"]
    bad = CliRunner().invoke(main, ["sweep", str(path), "--grid", "server.max_num_seqs=8", "--slo",
                                    "ttft_ms.avg=10", "--backend", "serial", "-q"])
    assert bad.exit_code != 0 and ("slo.ttft_ms: unknown statistic 'avg'; allowed: mean, median, p<0..100> "
                                   "(e.g. p50, p99, p99.9)") in bad.output


# ---- the commands -------------------------------------------------------------------------------------------
def test_a_tiny_sweep_prints_the_band_and_exports_it_with_p50(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny_with_slo(None) | {"slo": {"ttft_ms": 10000}}))
    rows, summary = tmp_path / "rows.csv", tmp_path / "summary.csv"
    res = CliRunner().invoke(main, ["sweep", str(path), "--grid", "server.max_num_seqs=4,8", "--backend", "serial",
                                    "-q", "--out", str(rows), "--summary-out", str(summary)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    note = hn.server_lines("hopper", False)
    start = lines.index(note[0])
    assert lines[start:start + len(note)] == note       # then the what-if band (test_whatif_sweep_plan.py)
    assert lines[start + len(note)].startswith("What-if band") and "2 simulations run" in lines[start:]
    for frame in (pd.read_csv(rows), pd.read_csv(summary)):
        assert list(frame.columns[-3:]) == ["heldout_server", "heldout_bands", "whatif"]
        assert list(frame["heldout_server"]) == ["Hopper dense"] * 2
        assert hr.column_keys(frame["heldout_bands"][0]) == [HOPPER]
        assert frame["p50_ttft_ms"].notna().all()
    frame = pd.read_csv(rows)
    assert list(frame["p50_ttft_ms"]) == list(frame["median_ttft_ms"])
    assert "p50_ttft_ms" in RESULT_KEYS


def test_a_tiny_plan_prints_the_margin_and_writes_bands_and_p50(tmp_path):
    plan = {"name": "p", "scenario": tiny_with_slo({"ttft_ms": {"p99": 2000}}), "target_rate_per_s": 20,
            "search": {"deployment.gpu": ["H100-SXM"]}, "replications": 1}
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    out, deps = tmp_path / "plan.json", tmp_path / "deps.csv"
    res = CliRunner().invoke(main, ["plan", str(path), "--backend", "serial", "-q", "--json", str(out),
                                    "--deployments-csv", str(deps)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    name = "#0 (H100-SXM TP1)"
    margin = f"cheapest {name}: " + hr.margin_line([HOPPER])
    assert margin in " ".join(res.output.split())          # rich wraps the long line at the console width
    assert doc["best"]["heldout_server"] == "Hopper dense"
    assert doc["best"]["p50_ttft_ms"] is not None and doc["best"]["p50_ttft_ms"] > 0
    assert all(d["p50_ttft_ms"] is not None for d in doc["deployments"] if d.get("replicas"))
    bands = doc["heldout_bands"]
    assert [(s["server"], s["configurations"]) for s in bands["servers"]] == [("Hopper dense", [name])]
    assert bands["note"] == hr.band_note({name: [HOPPER]}) and bands["report"] == hb.packaged_bands()["report"]
    assert bands["recommended"] == {"configuration": name, "margin": hr.margin_line([HOPPER])}
    frame = pd.read_csv(deps)
    assert list(frame.columns[-2:]) == ["heldout_server", "heldout_bands"]
    assert hr.column_keys(frame["heldout_bands"][0]) == [HOPPER]


def test_a_pd_plan_names_its_pools_server_and_a_cost_model_without_a_band(tmp_path):
    from twin.hardware.pricing import PriceTable
    from twin.plan.executor import Runner, SerialExecutor
    from twin.plan.pd_plan import PD_KEYS, plan_pd

    data = {"deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
            "cost_model": {"kind": "constant", "params": {"step_s": 0.01, "per_token_s": 1e-5}},
            "workload": {"arrivals": {"process": "poisson", "rate_per_s": 20}, "num_requests": 40,
                         "dataset": {"kind": "random", "input_len": 200, "output_len": 5, "range_ratio": 0.0,
                                     "ignore_eos": True}},
            "disaggregation": {"prefill": {"replicas": 1}, "decode": {"replicas": 1},
                               "link": {"kind": "infiniband", "bandwidth_gb_s": 25}},
            "slo": {"ttft_ms": {"p99": 5000}}}
    with SerialExecutor() as ex:
        out = plan_pd(data, base_dir=None, criteria=Criteria(data["slo"]), prices=PriceTable({"H100-SXM": 2.0}),
                      target_rate=None, space=[(PD_KEYS[0], [1]), (PD_KEYS[1], [1, 2])], replications=1,
                      runner=Runner(ex))
    assert [r["heldout_server"] for r in out["rows"]] == ["none (a constant step time)"] * 2
    bands = out["heldout_bands"]
    assert bands["recommended"] == {"configuration": "1P1D", "margin": None}
    assert bands["servers"] == [{"cost_model": "a constant step time", "configurations": ["1P1D", "1P2D"]}]
    assert bands["note"] == [hn.cost_model_line("a constant step time")]
    roofline = {k: v for k, v in data.items() if k != "cost_model"}
    assert hr.band_servers([validate_body(roofline)], None) == [HOPPER]      # both pools: one kind of server
