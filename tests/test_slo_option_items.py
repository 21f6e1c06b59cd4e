"""Issue 33 (round 21): ``--slo`` (``twin sweep`` / ``twin plan``) spells a dotted statistic (``ttft_ms.p99.9``:
the ``--set`` parser split it into ``p99`` -> ``9``), takes vLLM's metric names as the runs' ``slo:`` section
spells them (``--slo ttft:500`` failed every run), and refuses what the scenario's ``slo:`` refuses with the
same line; a ``--set slo.ttft_ms.p99.9=...`` (split at the dot) says how to spell it instead."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner
from plan_cli_helpers import tiny_with_slo

from twin.cli.main import main
from twin.errors import TwinInputError
from twin.plan.evaluate import Criteria, validate_body
from twin.results.slo import parse_slo
from twin.slo_section import slo_option_items, slo_section

FORM = "expected METRIC=MS (a per-request threshold) or METRIC.STATISTIC=MS (a bound), e.g. ttft_ms.p99.9=1000"
NESTED = ("slo.ttft_ms: p99: {'9': 1000} is no bound; a statistic with a dot is one key, e.g. {p99.9: 1000} "
          "(--slo ttft_ms.p99.9=1000; --set 'slo.ttft_ms={p99.9: 1000}')")


def test_dotted_statistics_and_vllm_names_read():
    assert slo_option_items(["ttft_ms.p99.9=1000", "tpot:50", "e2el_ms=20000", "itl_ms.p99.99=40",
                             "ttft_ms.mean=300"]) == {
        "ttft_ms": {"p99.9": 1000, "mean": 300}, "tpot_ms": 50, "e2el_ms": 20000, "itl_ms": {"p99.99": 40}}
    assert slo_option_items(["ttft.p99=1000", "tpot_ms.p99=50"]) == {"ttft_ms": {"p99": 1000}, "tpot_ms": {"p99": 50}}
    assert parse_slo(slo_option_items(["ttft_ms.p99.9=1000", "ttft_ms.p99.99=2000"])).bounds_ms == {
        "ttft": {"p99.9": 1000.0, "p99.99": 2000.0}}


@pytest.mark.parametrize("items, line", [
    (["ttft_ms"], f"--slo 'ttft_ms': {FORM}"),
    (["=5"], f"--slo '=5': {FORM}"),
    ([".p99=5"], f"--slo '.p99=5': {FORM}"),
    (["ttft_ms.=5"], f"--slo 'ttft_ms.=5': {FORM}"),
    (["ttft_ms=5", "ttft_ms.p99=4"], "--slo 'ttft_ms.p99=4': ttft_ms is given twice"),
    (["ttft_ms.p99=4", "ttft_ms=5"], "--slo 'ttft_ms=5': ttft_ms is given twice"),
    (["ttft_ms.p99=4", "ttft.p99=5"], "slo: 'ttft_ms' and 'ttft' are the same metric (ttft_ms); give it once"),
])
def test_hostile_items_are_one_line(items, line):
    with pytest.raises(TwinInputError) as err:
        slo_option_items(items)
    assert str(err.value) == line


@pytest.mark.parametrize("stats", [
    {"p99.9.9": 5}, {"p101": 5}, {"avg": 5}, {"p99": 5, "p99.0": 6}, {"p-1": 5}])
def test_the_same_statistics_are_refused_the_same_way_both_ways(stats):
    """What ``--slo`` hands on (via ``Criteria``: ``parse_slo``) and the scenario's ``slo:`` refuse alike."""
    with pytest.raises(TwinInputError) as scen:
        validate_body(tiny_with_slo({"ttft_ms": stats}))
    with pytest.raises(TwinInputError) as cli:
        Criteria(slo_option_items([f"ttft_ms.{k}={v}" for k, v in stats.items()]))
    assert str(scen.value) == f"scenario: {cli.value}"


@pytest.mark.parametrize("stat", ["p99.9", "p99.99", "p0", "p100", "mean", "median", "p99.0"])
def test_the_same_statistics_are_taken_both_ways(stat):
    Criteria(slo_option_items([f"ttft_ms.{stat}=1000"]))
    validate_body(tiny_with_slo({"ttft_ms": {stat: 1000}}))


def test_a_set_path_split_at_the_dot_says_how_to_spell_it():
    with pytest.raises(TwinInputError) as err:
        validate_body(tiny_with_slo({"ttft_ms": {"p99": {"9": 1000}}}))
    assert str(err.value) == f"scenario: {NESTED}"
    with pytest.raises(TwinInputError) as err:
        parse_slo({"ttft_ms": {"p99": {"9": 1000}}})
    assert str(err.value) == NESTED


def test_a_sweep_runs_with_p99_9_and_vllm_names(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in tiny_with_slo(None).items() if k != "slo"}))
    out = tmp_path / "rows.csv"
    res = CliRunner().invoke(main, ["sweep", str(path), "--grid", "server.max_num_seqs=8", "--slo",
                                    "ttft_ms.p99.9=0.001", "--slo", "tpot:1000", "--backend", "serial", "-q",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output
    row = pd.read_csv(out).iloc[0]
    assert row["status"] == "ok" and not row["passed"] and row["reasons"].startswith("p99.9_ttft_ms = ")
    bad = CliRunner().invoke(main, ["sweep", str(path), "--grid", "server.max_num_seqs=8", "--slo",
                                    "ttft_ms.p99.9.9=10", "--backend", "serial", "-q"])
    assert bad.exit_code != 0 and ("slo.ttft_ms: unknown statistic 'p99.9.9'; allowed: mean, median, "
                                   "p<0..100> (e.g. p50, p99, p99.9)") in bad.output


def test_a_plan_files_vllm_names_read_as_the_runs_slo_section_spells_them():
    assert slo_section({"ttft": 500, "tpot_ms": {"p99.9": 50}}) == {"ttft_ms": 500, "tpot_ms": {"p99.9": 50}}
    assert slo_section(None) == {} and slo_section("ttft:500") == {"ttft_ms": 500.0}   # round 21: read at load
    with pytest.raises(TwinInputError) as err:
        slo_section({"ttft": 500, "ttft_ms": 400})
    assert str(err.value) == "slo: 'ttft' and 'ttft_ms' are the same metric (ttft_ms); give it once"


def test_a_plan_with_vllm_names_runs(tmp_path):
    """Every run of a plan whose file said ``slo: {ttft: ...}`` failed on the runs' ``slo:`` section."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({k: v for k, v in tiny_with_slo(None).items() if k != "slo"}))
    plan_file = tmp_path / "p.yaml"
    plan_file.write_text(yaml.safe_dump({"scenario": str(scenario), "slo": {"ttft": 60000},
                                         "search": {"server.max_num_seqs": [64]}}))
    out = tmp_path / "plan.json"
    res = CliRunner().invoke(main, ["plan", str(plan_file), "-q", "--backend", "serial", "--target-rate", "4",
                                    "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "cheapest:" in res.output
    assert [c["status"] for c in json.loads(out.read_text())["candidates"]] != ["error"]
