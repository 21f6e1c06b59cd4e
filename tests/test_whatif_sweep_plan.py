"""The what-if band where users sweep and plan (twin/plan/whatif_axes.py; issue 33, round 23): a sweep's axes and a
plan's candidates mapped to the held-out table's knobs, the exact blocks on a hand-built table, the sweep tables'
``whatif`` column, the CLI's printed block and a plan's ``--json`` key, and the dashboard's load sweep."""

from __future__ import annotations

import copy
import csv
import json

import yaml
from click.testing import CliRunner
from test_whatif_view import BASE, _table

from twin.cli.main import main
from twin.plan.sweep import SweepSpec
from twin.plan.whatif_axes import axis_changes, plan_whatif, sweep_whatif, with_whatif_column
from twin.results.whatif_view import packaged_whatif

FOOT = ["  median |error of the predicted change| (signed), %; GPU / family held out;",
        "  right way: pairs with the measured direction (TTFT, TPOT); report abc1234"]
CONC_ROWS = ["  change  pairs  TTFT mean   TPOT        E2E mean    throughput  right way",
             "  concurrency: workload.arrivals.concurrency",
             "    GPU   10     5.0 (-2.0)  5.0 (-2.0)  5.0 (-2.0)  5.0 (-2.0)  -"]
LAYOUT_ROWS = ["    GPU     207    8.1 (+5.9)  2.9 (0.0)  3.1 (+1.2)  3.0 (-1.2)  84, 86%",
               "    family  207    8.1 (+5.9)  2.9 (0.0)  3.1 (+1.2)  3.0 (-1.2)  84, 86%"]
HEAD = "  change    pairs  TTFT mean   TPOT       E2E mean    throughput  right way"


def _spec(*grid, data=None) -> SweepSpec:
    return SweepSpec(copy.deepcopy(data or BASE), list(grid))


def test_a_sweep_over_concurrency_prints_its_band():
    view = sweep_whatif(_spec(("workload.arrivals.concurrency", [8, 32])), _table())
    assert view["lines"] == ["What-if band: the twin's error on the predicted change along the sweep, held out",
                             *CONC_ROWS, *FOOT]
    assert view["change"] == "along the sweep" and "reference" not in view
    assert [(k["knob"], k["variants"], k["pairing"]) for k in view["knobs"]] == [
        ("concurrency", ["workload.arrivals.concurrency"], "strict")]


def test_a_sweep_over_max_num_seqs_has_no_evidence():
    view = sweep_whatif(_spec(("server.max_num_seqs", [4, 64])), _table())
    assert view["lines"] == [
        "What-if band: the twin's error on the predicted change along the sweep, held out",
        "  server.max_num_seqs: no held-out evidence for a change of max_num_seqs"]
    assert view["knobs"][0]["evidence"] is None and view["knobs"][0]["pairing"] is None


def test_two_axes_say_the_errors_may_add():
    view = sweep_whatif(_spec(("deployment.tensor_parallel_size", [1, 2]), ("server.max_num_seqs", [4, 64]),
                              ("rate_scale", [1, 2])), _table())
    assert view["lines"] == [
        "What-if band: the twin's error on the predicted change along the sweep, held out", HEAD,
        "  TP / EP layout: deployment.tensor_parallel_size", *LAYOUT_ROWS,
        "  server.max_num_seqs: no held-out evidence for a change of max_num_seqs",
        "  rate_scale: no held-out evidence for a change of arrival rate (under 3 pairs)",
        "  a move along several axes changes 3 knobs (TP / EP layout, max_num_seqs,",
        "    arrival rate): the errors may add", *FOOT]
    assert view["several_knobs"] == {"a move along several axes": ["layout", "max_num_seqs", "rate"]}


def test_each_axis_maps_to_the_knobs_it_changes():
    data = copy.deepcopy(BASE)
    changes, no_band = axis_changes(data, [
        ("rate", [2, 4]), ("groups", [[{"gpu": "H100-SXM", "replicas": 1}]]), ("seed", [0, 1]),
        ("deployment", [{"gpu": "H100-SXM", "tensor_parallel_size": 1}, {"gpu": "B200", "tensor_parallel_size": 2}]),
        ("workload.classes", [BASE["workload"]["classes"], [{**BASE["workload"]["classes"][0], "output_tokens": 64}]]),
        ("deployment.kv_dtype", ["bf16", "fp8"])])
    assert changes == {"rate": ["rate"], "groups": ["replica groups"], "seed": [], "deployment": ["gpu", "layout"],
                       "workload.classes": ["lengths"], "deployment.kv_dtype": ["kv"]}
    assert no_band is None
    const = {**copy.deepcopy(BASE), "cost_model": {"kind": "constant", "params": {"step_s": 0.01}}}
    view = sweep_whatif(_spec(("server.max_num_seqs", [4, 64]), data=const), _table())
    assert view["lines"] == ["No what-if band: the held-out evidence is of the twin's roofline cost model; the",
                             "  scenario uses a constant step time"]
    assert sweep_whatif(_spec(("seed", [0, 1])), _table())["lines"] == []        # no knob: no block


def test_a_plan_over_tp_and_its_replicas():
    overrides = [{"deployment.tensor_parallel_size": 1}, {"deployment.tensor_parallel_size": 2}]
    view = plan_whatif(copy.deepcopy(BASE), overrides, [3, 3], _table())
    assert view["lines"] == [
        "What-if band: the twin's error on the predicted change across the plan, held out", HEAD,
        "  TP / EP layout: deployment.tensor_parallel_size", *LAYOUT_ROWS, *FOOT]
    view = plan_whatif(copy.deepcopy(BASE), [*overrides, {"deployment.tensor_parallel_size": 2,
                                                          "server.max_num_seqs": 8}], [2, 3], _table())
    assert view["lines"][5:] == [
        "  server.max_num_seqs: no held-out evidence for a change of max_num_seqs",
        "  deployment.replicas: no held-out evidence for a change of replicas",
        "  a move along several axes changes 3 knobs (TP / EP layout, max_num_seqs,",
        "    replicas): the errors may add", *FOOT]
    assert plan_whatif(copy.deepcopy(BASE), overrides[:1], [1], _table())["lines"] == []


def test_the_sweep_tables_whatif_column():
    import pandas as pd

    spec = _spec(("workload.arrivals.concurrency", [8, 32]), ("server.max_num_seqs", [4, 64]))
    view = sweep_whatif(spec, _table())
    frame = pd.DataFrame([{"config": i, "workload.arrivals.concurrency": c, "server.max_num_seqs": s,
                           "rate_scale": 1.0} for i, (c, s) in enumerate([(8, 4), (8, 64), (32, 4), (32, 64)])])
    cells = with_whatif_column(frame, spec, view)["whatif"].tolist()
    assert cells[0] == "" and list(frame.columns)[-1] == "rate_scale"        # the input is left as it was
    head = {"report": "abc1234, 2026-12-06", "from": {"workload.arrivals.concurrency": 8, "server.max_num_seqs": 4}}
    conc = {"pairing": "strict", "bands": {"GPU": {m: {"n": 10, "ratio_abs_median": 0.05, "ratio_signed_median": -0.02}
                                                   for m in ("mean_ttft_ms", "mean_tpot_ms", "mean_e2el_ms",
                                                             "request_throughput")}}}
    assert [json.loads(c) for c in cells[1:]] == [{**head, "knobs": {"max_num_seqs": None}},
                                                  {**head, "knobs": {"concurrency": conc}},
                                                  {**head, "knobs": {"concurrency": conc, "max_num_seqs": None}}]
    spec = _spec(("rate", [2.0, 4.0]), data={**copy.deepcopy(BASE), "workload": {
        **BASE["workload"], "arrivals": {"process": "poisson", "rate_per_s": 2}}})
    frame = pd.DataFrame([{"config": 0, "rate_scale": s, "offered_rate_per_s": r} for s, r in ((1.0, 2.0), (2.0, 4.0))])
    cells = with_whatif_column(frame, spec, sweep_whatif(spec, _table()))["whatif"].tolist()
    assert cells[0] == "" and json.loads(cells[1])["knobs"] == {"rate": None}     # no rate cell in this table
    spec = _spec(("workload.arrivals.rate_per_s", [float("inf"), 8]), data={**copy.deepcopy(BASE), "workload": {
        **BASE["workload"], "arrivals": {"process": "poisson", "rate_per_s": 2}}})
    frame = pd.DataFrame([{"config": i, "workload.arrivals.rate_per_s": r, "rate_scale": 1.0}
                          for i, r in enumerate((float("inf"), 8))])
    cell = with_whatif_column(frame, spec, sweep_whatif(spec, _table()))["whatif"][1]
    assert json.loads(cell)["from"] == {"workload.arrivals.rate_per_s": "inf"}       # strict JSON: no Infinity


def _scenario(tmp_path, arrivals=None):
    path = tmp_path / "w.yaml"
    body = copy.deepcopy(BASE)
    if arrivals:
        body["workload"]["arrivals"] = arrivals
    path.write_text(yaml.safe_dump({**body, "slo": {"ttft_ms": {"p99": 5000}}}, sort_keys=False))
    return path


def _block(stdout: str, lines: list[str]) -> list[str]:
    out = stdout.splitlines()
    start = out.index(lines[0])
    return out[start:start + len(lines)]


def test_twin_sweep_prints_the_block_and_writes_the_column(tmp_path):
    path, summary, rows = _scenario(tmp_path), tmp_path / "s.csv", tmp_path / "r.csv"
    r = CliRunner().invoke(main, ["sweep", str(path), "--grid", "workload.arrivals.concurrency=8,32", "-q",
                                  "--backend", "serial", "--summary-out", str(summary), "--out", str(rows)])
    assert r.exit_code == 0, r.output
    lines = sweep_whatif(_spec(("workload.arrivals.concurrency", [8, 32])), packaged_whatif())["lines"]
    assert lines[2] == "  concurrency: workload.arrivals.concurrency" and _block(r.stdout, lines) == lines
    for table in (summary, rows):
        got = list(csv.DictReader(table.open()))
        assert list(got[0])[-3:] == ["heldout_server", "heldout_bands", "whatif"]
        assert got[0]["whatif"] == "" and json.loads(got[1]["whatif"])["knobs"]["concurrency"]["pairing"] == "strict"


def test_twin_plan_prints_the_block_and_writes_the_json_key(tmp_path):
    path, out = _scenario(tmp_path, {"process": "poisson", "rate_per_s": 2}), tmp_path / "p.json"
    r = CliRunner().invoke(main, ["plan", str(path), "--search", "deployment.tensor_parallel_size=1,2", "-q",
                                  "--target-rate", "2", "--replications", "1", "--backend", "serial",
                                  "--json", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert "heldout_bands" in doc and "whatif" in doc
    lines = doc["whatif"]["lines"]
    assert lines[0] == "What-if band: the twin's error on the predicted change across the plan, held out"
    assert lines[2] == "  TP / EP layout: deployment.tensor_parallel_size"
    assert _block(r.stdout, lines) == lines
    assert doc["whatif"]["knobs"][0]["knob"] == "layout" and doc["whatif"]["change"] == "across the plan"


def test_the_dashboards_load_sweep_shows_the_band():
    from test_app import _app, _chart, _ok

    at = _chart(_app("concurrency_cap_trap"), "Throughput vs latency")
    at.toggle(key="s:sweep").set_value(True).run()
    _ok(at)
    text, = [m.value for m in at.markdown if "predicted change along the sweep" in m.value]
    assert "| concurrency | GPU | 707 |" in text and "| concurrency | family | 707 |" in text
