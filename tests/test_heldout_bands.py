"""The held-out error bands (issue 33, round 19): benchmarks/heldout_bands_export.py on a tiny synthetic report
(exact numbers), the lookup by GPU generation and MoE / dense (the exact group), the note's text, a hostile bands
file (one line naming the field), and the note under ``twin run`` / in its ``--json``."""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError
from twin.results import heldout_bands as hb
from twin.results import heldout_note as hn

ex = load_benchmark("heldout_bands_export")
ROOT = Path(__file__).resolve().parents[1]
TTFT, TPOT, THR = "mean_ttft_ms", "mean_tpot_ms", "request_throughput"


def _report() -> dict:
    """Two GPU folds: H100 holds five dense cases (TTFT -0.3, -0.1, 0, 0.1, 0.2) and two MoE cases; B200 one
    MoE case without a TTFT."""
    dense = {f"d{i}": {TTFT: e, TPOT: -e / 2} for i, e in enumerate((-0.3, -0.1, 0.0, 0.1, 0.2))}
    moe = {"m0": {TTFT: 0.4, TPOT: 0.1}, "m1": {TTFT: 0.2, TPOT: -0.1}}
    return {"args": {"folds": "GPU", "silicon_every": 16, "eval_sim_s": 60.0, "json": "/x/y.json"},
            "folds": {"GPU": {"folds": [{"held_out": "H100-SXM", "errors": dense | moe},
                                        {"held_out": "B200", "errors": {"b0": {TPOT: -0.05, THR: 0.01}}}]}}}


SERVERS = {**{f"d{i}": ("hopper", False) for i in range(5)}, "m0": ("hopper", True), "m1": ("hopper", True),
           "b0": ("blackwell", True)}


def _doc() -> dict:
    from benchmarks.fold_report import FoldReport
    return ex.export_bands(FoldReport(_report()), SERVERS, commit="abc1234", date="2026-12-06", kinds=("GPU",),
                           construction="linear")         # round 19's construction: the order one in test_band_coverage


def test_the_export_of_a_tiny_report_has_the_hand_computed_numbers():
    doc = _doc()
    assert doc["report"] == {"commit": "abc1234", "date": "2026-12-06", "command":
                             "python benchmarks/fidelity_real.py --folds GPU --silicon-every 16 --eval-sim-s 60.0 "
                             "--json REPORT"}
    groups = doc["kinds"]["GPU"]
    assert [(g["generation"], g["moe"], g["held_out"]) for g in groups] == [
        ("hopper", False, ["H100-SXM"]), ("hopper", True, ["H100-SXM"]), ("blackwell", True, ["B200"])]
    ttft = groups[0]["metrics"][TTFT]
    # numpy's linear percentiles of (-0.3, -0.1, 0, 0.1, 0.2): p10 at position 0.4, p90 at 3.6
    assert ttft == pytest.approx({"n": 5, "abs_median": 0.1, "signed_median": 0.0, "p10": -0.22, "p90": 0.16})
    assert groups[0]["metrics"][TPOT] == pytest.approx({"n": 5, "abs_median": 0.05, "signed_median": 0.0,
                                                        "p10": -0.08, "p90": 0.11})
    # two MoE cases: medians, no p10..p90 (fewer than min_cases_for_interval = 5)
    assert groups[1]["metrics"][TTFT] == pytest.approx({"n": 2, "abs_median": 0.3, "signed_median": 0.3,
                                                        "p10": None, "p90": None})
    assert set(groups[2]["metrics"]) == {TPOT, THR}      # a metric no case has is absent
    assert "family" not in doc["kinds"]


def test_a_case_not_in_the_ground_truth_is_one_line():
    from benchmarks.fold_report import FoldReport
    with pytest.raises(TwinInputError, match="case 'b0' is not in the ground truth"):
        ex.export_bands(FoldReport(_report()), {k: v for k, v in SERVERS.items() if k != "b0"}, commit="abc1234",
                        date="2026-12-06", kinds=("GPU",))


def _dep(gpu: str, moe: bool):
    return SimpleNamespace(gpu=SimpleNamespace(name=gpu), model=SimpleNamespace(is_moe=moe))


def _body(kind: str = "roofline", profile: str | None = None):
    return SimpleNamespace(cost_model=SimpleNamespace(kind=kind, profile=profile))


def _run(gpu: str, moe: bool, kind: str = "roofline") -> dict:
    return {"body": _body(kind), "deployment": _dep(gpu, moe)}


def test_the_lookup_picks_the_exact_group():
    doc = _doc()
    assert hb.server_kinds(_dep("H200", False)) == [("hopper", False)]
    assert hb.server_kinds(SimpleNamespace(deployments=[_dep("H100-SXM", True), _dep("B200", True),
                                                        _dep("H100-PCIe", True)])) == [("hopper", True),
                                                                                        ("blackwell", True)]
    assert hb.server_kinds(SimpleNamespace(deployments={"prefill": _dep("A100-SXM-80GB", False),
                                                        "decode": _dep("B200", False)})) == [
        ("ampere", False), ("blackwell", False)]
    assert hb.bands_for("hopper", True, doc)["GPU"]["metrics"][TTFT]["n"] == 2
    assert hb.bands_for("blackwell", True, doc)["GPU"]["held_out"] == ["B200"]
    assert hb.bands_for("blackwell", False, doc) == {} and hb.bands_for("ampere", False, doc) == {}


def test_the_note_text():
    doc = _doc()
    runs = {"baseline": _run("H100-SXM", False)}
    assert hn.note_lines(runs, doc) == [
        "Error band: the twin's error on held-out Hopper dense servers (not these)",
        "              GPU generation held out",
        "  cases       5",
        "  TTFT mean   0.0% (-22..+16%)",
        "  TPOT        0.0% (-8..+11%)",
        "  E2E mean    -",
        "  throughput  -",
        "  predicted / measured - 1: median (p10..p90); report abc1234, 2026-12-06"]
    assert hn.server_lines("hopper", True, doc)[3] == "  TTFT mean   +30.0% (n=2)"
    # runs on different servers are named; a server with no held-out case has no band
    two = {"a": _run("H100-SXM", True), "b": _run("A100-SXM-80GB", True)}
    lines = hn.note_lines(two, doc)
    assert lines[0] == "a:" and lines[-2:] == [
        "b:", "No error band: no held-out evidence for Ampere MoE servers (the report holds out Hopper, Blackwell "
        "only)"]
    assert hn.server_lines("blackwell", False, doc) == [
        "No error band: no held-out evidence for Blackwell dense servers (the report holds out Blackwell MoE only)"]
    out = hn.bands_doc(_dep("B200", True), _body(), doc)
    assert out["report"]["commit"] == "abc1234" and out["servers"][0]["bands"]["GPU"]["held_out"] == ["B200"]
    assert "| TPOT | -5.0% (n=1) |" in hn.bands_markdown(out)
    assert hn.bands_markdown(hn.bands_doc(_dep("A100-SXM-80GB", True), _body(), doc)).startswith("No error band: no held-out")


def test_another_cost_model_than_the_roofline_has_no_band():
    doc = _doc()
    line = ("No error band: the held-out evidence is of the twin's roofline cost model; this run uses a calibrated "
            "profile (h100.json)")
    runs = {"base": {"body": _body("profile", "/x/h100.json"), "deployment": _dep("H100-SXM", False)}}
    assert hn.note_lines(runs, doc) == [line]
    out = hn.bands_doc(_dep("H100-SXM", False), _body("profile", "/x/h100.json"), doc)
    assert out["servers"] == [] and out["note"] == [line] and hn.bands_markdown(out) == line
    # a cluster group or a P/D pool on a constant step time counts too; the roofline run beside it keeps its band
    cluster = SimpleNamespace(deployments=[_dep("H100-SXM", False)], bodies=[_body(), _body("constant")])
    lines = hn.note_lines({"a": _run("H100-SXM", False), "b": {"body": _body(), "deployment": cluster}}, doc)
    assert lines[0] == "a:" and lines[-2:] == ["b:", line.replace("a calibrated profile (h100.json)",
                                                                  "a constant step time")]


def _broken(edit) -> dict:
    doc = copy.deepcopy(_doc())
    edit(doc)
    return doc


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d.update(schema="v0"), "schema is 'v0'"),
    (lambda d: d["report"].pop("commit"), "report.commit is None"),
    (lambda d: d.update(interval_percentiles=[5, 95]), "interval_percentiles"),
    (lambda d: d.update(min_cases_for_interval=0), "min_cases_for_interval is 0"),
    (lambda d: d["kinds"].update(source=[]), "kinds.source: not a fold kind"),
    (lambda d: d["kinds"].update(GPU={}), "kinds.GPU is dict, not a list"),
    (lambda d: d["kinds"]["GPU"][0].update(generation="volta"), "kinds.GPU[0].generation is 'volta'"),
    (lambda d: d["kinds"]["GPU"][0].update(moe="yes"), "kinds.GPU[0].moe is 'yes'"),
    (lambda d: d["kinds"]["GPU"][1].update(moe=False), "kinds.GPU[1]: a second hopper dense group"),
    (lambda d: d["kinds"]["GPU"][0].update(held_out=[]), "kinds.GPU[0].held_out"),
    (lambda d: d["kinds"]["GPU"][0].update(metrics={}), "kinds.GPU[0].metrics is empty"),
    (lambda d: d["kinds"]["GPU"][0]["metrics"].update(speed={}), "metrics.speed: not a metric"),
    (lambda d: d["kinds"]["GPU"][0]["metrics"][TTFT].update(p10=float("nan")), "mean_ttft_ms.p10 is nan"),
    (lambda d: d["kinds"]["GPU"][0]["metrics"][TTFT].update(abs_median=-0.1), "abs_median is -0.1"),
    (lambda d: d["kinds"]["GPU"][0]["metrics"][TTFT].update(n=True), "mean_ttft_ms.n is True"),
    (lambda d: d["kinds"]["GPU"][0]["metrics"][TTFT].update(signed_median=0.5), "above abs_median"),
    (lambda d: d["kinds"]["GPU"][0]["metrics"][TTFT].update(p10=0.05), "outside p10..p90"),
    (lambda d: d["kinds"]["GPU"][1]["metrics"][TTFT].update(p10=0.1, p90=0.5), "must be null"),
    (lambda d: d["kinds"]["GPU"][0]["metrics"][TTFT].update(extra=1), "extra: unknown key"),
])
def test_a_hostile_bands_document_is_one_line(edit, needle):
    with pytest.raises(TwinInputError, match="bands.json") as err:
        hb.check_bands(_broken(edit), "bands.json")
    assert needle in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("content, needle", [
    (b"", "not valid JSON"), (b"\xff\xfe\x00garbage", ""), (b"[1, 2]", "the file is list"), (b"{nope", "JSON"),
    (b'{"schema": 1, "schema": 2}', "schema"), (b"[" * 5000 + b"]" * 5000, "deep")])
def test_a_hostile_bands_file_is_one_line(tmp_path, content, needle):
    path = tmp_path / "bands.json"
    path.write_bytes(content)
    with pytest.raises(TwinInputError) as err:
        hb.load_bands(path)
    assert "\n" not in str(err.value) and needle.lower() in str(err.value).lower()
    with pytest.raises(TwinInputError, match="a directory"):
        hb.load_bands(tmp_path)
    with pytest.raises(TwinInputError, match="no such file"):
        hb.load_bands(tmp_path / "missing.json")


def test_the_packaged_file_is_valid_and_packaged():
    doc = hb.load_bands()
    assert set(doc["kinds"]) == {"GPU", "family"}
    for kind in ("GPU", "family"):
        assert {(g["generation"], g["moe"]) for g in doc["kinds"][kind]} == {
            ("hopper", False), ("hopper", True), ("blackwell", False), ("blackwell", True)}
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["twin"]
    assert "results/data/*.json" in data and hb.DATA_FILE == ROOT / "twin" / "results" / "data" / "heldout_bands.json"


def test_the_export_script_refuses_bad_options(tmp_path, monkeypatch, capsys):
    import sys
    for argv, needle in ((["r.json", "--ground-truth", ".", "--report-commit", "XYZ", "--report-date", "2026-12-06"],
                          "not a git commit"),
                         (["r.json", "--ground-truth", ".", "--report-commit", "abc1234", "--report-date", "06/12"],
                          "not a date"),
                         (["r.json", "--ground-truth", ".", "--report-commit", "abc1234", "--report-date",
                           "2026-12-06", "--kinds", "source"], "not a fold kind")):
        monkeypatch.setattr(sys, "argv", ["heldout_bands_export.py", *argv])
        with pytest.raises(SystemExit) as exit_:
            ex.main()
        assert exit_.value.code == 2 and needle in capsys.readouterr().err


GOOD = """\
name: tiny
deployment: {gpu: B200, model: llama-3.1-8b}
workload:
  arrivals: {process: poisson, rate_per_s: 20}
  num_requests: 20
  classes:
    - {name: a, share: 1.0, prompt: {suffix_tokens: 100}, output_tokens: 20}
seed: 1
"""


def test_twin_run_prints_the_note_and_its_json_carries_it(tmp_path):
    from twin.cli.main import main
    path = tmp_path / "s.yaml"
    path.write_text(GOOD)
    out = tmp_path / "out.json"
    result = CliRunner().invoke(main, ["run", str(path), "-q", "--json", str(out)])
    assert result.exit_code == 0, result.output
    doc = hb.packaged_bands()
    assert "\n".join(hn.server_lines("blackwell", False, doc)) in result.output
    bands = json.loads(out.read_text())["twin"]["heldout_bands"]
    assert bands["report"] == doc["report"] and bands["servers"][0]["generation"] == "blackwell"
    assert bands["servers"][0]["bands"]["GPU"]["held_out"] == ["B200"]


def test_the_dashboard_run_carries_the_bands_and_its_json_download_too():
    import yaml
    from twin.dashboard.compare import result_json
    from twin.dashboard.runs import run_scenario
    run = run_scenario(yaml.safe_load(GOOD))
    assert run.info["heldout_bands"] == hn.bands_doc(_dep("B200", False), _body())
    assert json.loads(result_json(run))["twin"]["heldout_bands"] == run.info["heldout_bands"]
    assert "| cases |" in hn.bands_markdown(run.info["heldout_bands"])
