"""Issue 33 (round 21): ONE SLO story for every input. An SLO enters by a scenario's ``slo:`` (``twin run`` /
``compare`` / ``sweep`` / ``plan``, the dashboard's uploads), ``--set slo...``, ``--slo`` (``twin sweep`` / ``twin
plan``), a plan file's ``slo:`` and ``parse_slo`` (the library); every path reads them with ``twin.slo_section``, so
each takes the same spellings and refuses the same input with the same line (after the file it names, if any).
Before, ``slo.ttft_ms: must be > 0 ms (got 0.0)`` in a scenario read ``slo.ttft_ms.p99: 0 is not allowed; give a
number of milliseconds > 0`` from ``--slo``; a plan file's vLLM string form (``"ttft:500 tpot:50"``) was a
traceback; ``slo: {ttft: 500}`` was refused in a scenario and taken by ``--slo``; an infinite bound failed after the
run. The dashboard's shared links carry no SLO (a ``w.slo...`` parameter is refused as no setting)."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from twin.cli.main import main
from twin.dashboard import share
from twin.dashboard.sources import scenario_from_yaml
from twin.errors import TwinInputError
from twin.results.slo import parse_slo
from twin.scenario import Scenario
from twin.slo_section import slo_option_items, slo_section

SCENARIO = {"name": "t", "workload": {"arrivals": {"process": "poisson", "rate_per_s": 4}, "num_requests": 8,
                                      "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 64},
                                                   "output_tokens": 4}]}}
STAT_ALLOWED = "allowed: mean, median, p<0..100> (e.g. p50, p99, p99.9)"
METRIC_ALLOWED = "allowed: ttft_ms, tpot_ms, itl_ms, e2el_ms (or vLLM's ttft, tpot, e2el, itl)"
NUMBER = "must be a number of milliseconds > 0"
THRESHOLD = NUMBER + ", or a mapping like {p99: 1000}"

# (the slo: mapping, the same as --slo items, the one line every path gives)
HOSTILE = [
    ({"ttft_ms": 0}, ["ttft_ms=0"], f"slo.ttft_ms: {THRESHOLD} (got 0)"),
    ({"tpot": -1}, ["tpot=-1"], f"slo.tpot: {THRESHOLD} (got -1)"),
    ({"ttft_ms": {"p99": 0}}, ["ttft_ms.p99=0"], f"slo.ttft_ms.p99: {NUMBER} (got 0)"),
    ({"ttft_ms": {"p99.9": 0}}, ["ttft_ms.p99.9=0"], f"slo.ttft_ms.p99.9: {NUMBER} (got 0)"),
    ({"e2el_ms": {"p99.99": float("inf")}}, ["e2el_ms.p99.99=.inf"], f"slo.e2el_ms.p99.99: {NUMBER} (got inf)"),
    ({"ttft_ms": {"mean": float("nan")}}, ["ttft_ms.mean=.nan"], f"slo.ttft_ms.mean: {NUMBER} (got nan)"),
    ({"ttft_ms": True}, ["ttft_ms=true"], f"slo.ttft_ms: {THRESHOLD} (got True)"),
    ({"ttft_ms": {"p99": "500ms"}}, ["ttft_ms.p99=500ms"],
     f"slo.ttft_ms.p99: {NUMBER} (got '500ms'; write the number alone: its name's _ms is the unit)"),
    ({"ttft_ms": "fast"}, ["ttft_ms=fast"], f"slo.ttft_ms: {THRESHOLD} (got 'fast')"),
    ({"ttft_ms": {"p999": 5}}, ["ttft_ms.p999=5"], f"slo.ttft_ms: unknown statistic 'p999'; {STAT_ALLOWED}"),
    ({"ttft_ms": {"p100.5": 5}}, ["ttft_ms.p100.5=5"], f"slo.ttft_ms: unknown statistic 'p100.5'; {STAT_ALLOWED}"),
    ({"ttf": 5}, ["ttf=5"], f"slo.ttf: unknown SLO metric; did you mean 'ttft_ms'?; {METRIC_ALLOWED}"),
    ({"itl_ms": 5}, ["itl_ms=5"],
     "slo.itl_ms: ITL has no per-request value; give a statistic bound such as {p99: 50} (got 5)"),
    ({"ttft": 5, "ttft_ms": 4}, ["ttft=5", "ttft_ms=4"],
     "slo: 'ttft' and 'ttft_ms' are the same metric (ttft_ms); give it once"),
]
IDS = [line.split(":")[0] + "|" + items[0] for _, items, line in HOSTILE]

# (the slo: section in any spelling, the same as --slo items, what every path reads it as)
GOOD = [
    ({"ttft": 500, "tpot_ms": {"p99.9": 50}}, ["ttft=500", "tpot_ms.p99.9=50"],
     {"ttft_ms": 500, "tpot_ms": {"p99.9": 50}}),
    ("ttft:500 tpot:50", ["ttft:500", "tpot:50"], {"ttft_ms": 500, "tpot_ms": 50}),
    (["ttft:500", "e2el:9000"], ["ttft:500", "e2el:9000"], {"ttft_ms": 500, "e2el_ms": 9000}),
    ({"itl": {"p99.99": 40, "median": 10}}, ["itl.p99.99=40", "itl.median=10"],
     {"itl_ms": {"p99.99": 40, "median": 10}}),
]


def _one_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1, result.output
    return result.output.strip()


def _write(tmp_path, name: str, data) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def _cli(*args) -> object:
    return CliRunner().invoke(main, [*args])


# every path an SLO enters, as a function of (tmp_path, mapping, items) -> the error line it prints or raises
def _scenario_file(tmp_path, slo, items):
    path = _write(tmp_path, "s.yaml", SCENARIO | {"slo": slo})
    return _one_line(_cli("run", path, "-q")), f"error: {path}: "


def _set_option(tmp_path, slo, items):
    path = _write(tmp_path, "s.yaml", SCENARIO)
    flow = yaml.safe_dump(slo, default_flow_style=True, width=10**6).strip()
    return _one_line(_cli("run", path, "-q", "--set", f"slo={flow}")), f"error: {path}: "


def _compare_set(tmp_path, slo, items):
    path = _write(tmp_path, "s.yaml", SCENARIO | {"variants": {"v": {"slo": slo}}})
    return _one_line(_cli("compare", path, "-q")), f"error: {path} [variant v]: "


def _sweep_slo(tmp_path, slo, items):
    path = _write(tmp_path, "s.yaml", SCENARIO)
    args = [a for item in items for a in ("--slo", item)]
    return _one_line(_cli("sweep", path, "--grid", "server.max_num_seqs=4", "-q", *args)), "error: "


def _plan_slo(tmp_path, slo, items):
    path = _write(tmp_path, "s.yaml", SCENARIO)
    args = [a for item in items for a in ("--slo", item)]
    return _one_line(_cli("plan", path, "--search", "server.max_num_seqs=4", "-q", *args)), "error: "


def _plan_file(tmp_path, slo, items):
    scenario = _write(tmp_path, "s.yaml", SCENARIO)
    path = _write(tmp_path, "p.yaml", {"scenario": scenario, "slo": slo, "search": {"server.max_num_seqs": [4]}})
    return _one_line(_cli("plan", path, "-q")), f"error: {path}: "


def _library(tmp_path, slo, items):
    with pytest.raises(TwinInputError) as err:
        parse_slo(slo)
    return str(err.value), ""


def _dashboard_upload(tmp_path, slo, items):
    with pytest.raises(TwinInputError) as err:
        scenario_from_yaml(yaml.safe_dump(SCENARIO | {"slo": slo}))
    return str(err.value), "uploaded scenario: "


PATHS = [_scenario_file, _set_option, _compare_set, _sweep_slo, _plan_slo, _plan_file, _library, _dashboard_upload]


@pytest.mark.parametrize("path", PATHS, ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("slo, items, line", HOSTILE, ids=IDS)
def test_every_path_refuses_with_one_line(tmp_path, path, slo, items, line):
    got, prefix = path(tmp_path, slo, items)
    assert got == prefix + line


@pytest.mark.parametrize("slo, items, section", GOOD, ids=["vllm-names", "vllm-string", "vllm-list", "itl-bounds"])
def test_every_path_reads_the_same_spellings_alike(slo, items, section):
    expected = parse_slo(section)
    assert slo_section(slo) == section and slo_option_items(items) == section
    body = Scenario(SCENARIO | {"slo": slo}).body()
    assert body.slo.as_dict() == section                                 # the runs' slo: (run, compare, dashboard)
    assert scenario_from_yaml(yaml.safe_dump(SCENARIO | {"slo": slo})).body().slo.as_dict() == section
    for given in (slo, body.slo.as_dict(), slo_option_items(items)):
        assert parse_slo(given) == expected


def test_a_plan_file_in_vllms_string_form_plans(tmp_path):
    """It was a traceback (``dict('ttft:...')``); now it is read once at load, as the runs read it."""
    scenario = _write(tmp_path, "s.yaml", SCENARIO)
    path = _write(tmp_path, "p.yaml", {"scenario": scenario, "slo": "ttft:60000 tpot:1000", "replications": 1,
                                       "search": {"server.max_num_seqs": [4]}})
    res = _cli("plan", path, "-q", "--backend", "serial")
    assert res.exit_code == 0, res.output
    assert "SLO TTFT ≤ 1.00 min, TPOT ≤ 1000 ms, >= 99% of requests" in " ".join(res.output.split()) and "cheapest:" in res.output


def test_null_drops_an_objective_in_a_section_and_is_refused_as_an_option():
    assert slo_section({"ttft_ms": None, "tpot_ms": 50}) == {"tpot_ms": 50} and slo_section(None) == {}
    with pytest.raises(TwinInputError, match=r"^slo.ttft_ms: must be a number of milliseconds > 0, or a mapping "):
        slo_option_items(["ttft_ms=null"])


def test_no_shared_link_carries_an_slo():
    with pytest.raises(TwinInputError, match=r"^URL parameter w.slo.ttft_ms: not a setting of this scenario"):
        share.decode({"w.slo.ttft_ms": "0"}, {"max_num_seqs": 4})


def test_a_section_of_the_wrong_type_says_the_forms():
    form = "a mapping like {ttft_ms: 500, tpot_ms: {p99: 50}}, or vLLM's 'ttft:500 tpot:50'"
    for bad, got in ((7, "7"), (2.5, "2.5")):
        with pytest.raises(TwinInputError) as err:
            slo_section(bad)
        assert str(err.value) == f"slo: must be {form} (got {got})"
    with pytest.raises(TwinInputError) as err:
        slo_section(["ttft500"])
    assert str(err.value) == "slo: each item of vLLM's form must be METRIC:MS, e.g. 'ttft:500' (got 'ttft500')"


def test_the_dashboards_slo_line_reads_a_bound_as_the_run_keys_it():
    """``{p99.0: 500}`` bounds the run's ``p99_ttft_ms``: the dashboard looked up ``p99.0_ttft_ms`` and said
    'not measured'."""
    from types import SimpleNamespace

    from twin.dashboard.meaning import slo_line

    run = SimpleNamespace(slo={"ttft_ms": {"p99.0": 500.0}},
                          metrics={"p99_ttft_ms": 68.8, "slo_met": {"p99_ttft_ms": True}})
    assert slo_line(run) == "SLO p99.0 TTFT ≤ 500 ms: met (68.8 ms)"
