"""Measured results, the last frictions (docs/first-hour.md "Bringing your own measurements"): `twin diagnose
--run NAME` picks one run of a file of several; the twin's own ``--json`` carries the server it ran so `twin
calibrate --from-results` reads it back with no other option; a server profile fitted on another model says so;
`twin protocol`'s baseline verdict and the engine calibration's table words."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.test_diagnose_formats import REQS, _bench, _table_rows
from twin.analysis.measured import load_measured
from twin.cli.main import main
from twin.errors import TwinInputError


def _sweep(tmp_path, suffix=".jsonl"):
    """The six requests twice: once at concurrency 1, once at 2 (runs sweep/c1 and sweep/c2)."""
    rows = [{**row, "concurrency": c} for c in (1, 2) for row in _table_rows()]
    path = tmp_path / f"sweep{suffix}"
    if suffix == ".csv":
        cols = list(rows[0])
        path.write_text(",".join(cols) + "\n" + "".join(
            ",".join("" if row[c] is None else repr(row[c]) for c in cols) + "\n" for row in rows))
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_run_picks_one_run_of_a_sweep(tmp_path, suffix):
    path = _sweep(tmp_path, suffix)
    with pytest.raises(TwinInputError) as exc:
        load_measured(path)
    assert str(exc.value) == (f"{path}: holds 2 runs (sweep/c1, sweep/c2); twin diagnose reads one run: pick one "
                              f"with --run NAME (twin calibrate --from-results reads them all)")
    m1, m2 = load_measured(path, "sweep/c1"), load_measured(path, "sweep/c2")
    ok = sum(r.ok for r in REQS)
    assert (len(m1), len(m2)) == (ok, ok)
    assert (m1.max_concurrency, m2.max_concurrency) == (1, 2)


def test_a_wrong_run_name_lists_the_names_and_suggests_one(tmp_path):
    path = _sweep(tmp_path)
    with pytest.raises(TwinInputError) as exc:
        load_measured(path, "Sweep/C2")
    assert str(exc.value) == (f"--run Sweep/C2: not a run in {path} (it holds sweep/c1, sweep/c2); did you mean "
                              f"'sweep/c2' or 'sweep/c1'?")
    with pytest.raises(TwinInputError) as exc:
        load_measured(path, "zzz")
    assert str(exc.value) == f"--run zzz: not a run in {path} (it holds sweep/c1, sweep/c2)"


def test_run_on_a_file_of_one_run(tmp_path):
    bench = _bench(tmp_path / "bench.json")
    with pytest.raises(TwinInputError) as exc:
        load_measured(bench, "other")
    assert str(exc.value) == f"--run other: {bench} holds one run, bench; leave --run out (or give that name)"
    assert len(load_measured(bench, "bench")) == len(load_measured(bench))
    table = tmp_path / "requests.jsonl"
    table.write_text("".join(json.dumps(row) + "\n" for row in _table_rows()))
    with pytest.raises(TwinInputError) as exc:
        load_measured(table, "c2")
    assert str(exc.value) == f"--run c2: {table} holds one run, requests; leave --run out (or give that name)"


def test_diagnose_run_option_on_the_cli(tmp_path):
    path = _sweep(tmp_path)
    res = CliRunner().invoke(main, ["diagnose", str(path), "--run", "sweep/c2"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[0] == f"{path.name}: {sum(r.ok for r in REQS)} completed requests"
    res = CliRunner().invoke(main, ["diagnose", str(path), "--run", "swep/c1"])
    assert res.exit_code == 2
    assert "--run swep/c1: not a run in" in res.output and "did you mean 'sweep/c1' or 'sweep/c2'?" in res.output



def test_diagnose_counts_one_request_in_the_singular(tmp_path):
    row = _table_rows()[0]
    table = tmp_path / "one.csv"
    table.write_text(",".join(row) + "\n" + ",".join(repr(v) for v in row.values()) + "\n")
    res = CliRunner().invoke(main, ["diagnose", str(table)])
    assert res.output.splitlines()[0] == "one.csv: 1 completed request", res.output

SERVER_KEYS = {"gpu": "H100-SXM", "tensor_parallel_size": 1, "vllm_version": "0.28", "max_num_seqs": 4,
               "max_num_batched_tokens": 16384, "max_model_len": 131072, "enable_prefix_caching": True,
               "enable_chunked_prefill": True, "block_size": 16, "async_scheduling": True,
               "gpu_memory_utilization": 0.9}


def test_the_twins_json_round_trips_into_calibrate_with_no_other_option(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    res = runner.invoke(main, ["run", "concurrency_cap_trap", "--json", "out.json"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "out.json").read_text())
    assert {k: doc.get(k) for k in SERVER_KEYS} == SERVER_KEYS
    assert doc["model_id"] == "llama-3.1-8b"
    res = runner.invoke(main, ["calibrate", "--from-results", "out.json"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    table = res.output[:res.output.index("fitted ")]
    rows = {cells[0]: cells[1:] for line in table.splitlines() if line.count("│") == 4
            for cells in [[c.strip() for c in line.split("│")[1:4]]]}
    for setting, value in (("gpu", "H100-SXM"), ("model", "llama-3.1-8b"), ("tensor_parallel_size", "1"),
                           ("vllm_version", "0.28"), ("max_num_seqs", "4"), ("max_num_batched_tokens", "16384")):
        assert rows[setting] == [value, "result file"], (setting, table)
    assert "assumed" not in table and (tmp_path / "server-profile.json").is_file()


def test_a_command_line_gpu_or_tp_contradicting_the_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, ["run", "concurrency_cap_trap", "--json", "out.json"]).exit_code == 0
    res = runner.invoke(main, ["calibrate", "--from-results", "out.json", "--gpu", "b200"])
    assert res.exit_code == 2
    assert res.output.strip().splitlines()[-1] == ("error: --gpu b200: the result file says gpu H100-SXM (run out); "
                                                   "leave --gpu out or give the file's value")
    res = runner.invoke(main, ["calibrate", "--from-results", "out.json", "--tp", "2"])
    assert res.output.strip().splitlines()[-1] == ("error: --tp 2: the result file says tensor_parallel_size 1 "
                                                   "(run out); leave --tp out or give the file's value")
    # the same GPU by an alias is no contradiction
    from twin.cli.calibrate_results import read_cases
    _, [case] = read_cases(["out.json"], scenario=None, sets=(), vllm_version=None, gpu="h100", model=None, tp=None)
    assert case.target.gpu == "H100-SXM"


def test_a_run_writes_its_layout_and_the_layouts_calibration_refuses():
    # round 23: every layout is written (tests/test_layout_roundtrip.py reads each back); a multi-group or
    # disaggregated run writes only the key that says so
    from twin.results.server_keys import server_keys

    config = {"deployment": {"gpu": "H100-SXM", "tensor_parallel_size": 2, "replicas": 1},
              "server": {"max_num_seqs": 8, "scheduler": "continuous"}, "vllm_version": "0.11.0"}
    plain = {"gpu": "H100-SXM", "tensor_parallel_size": 2, "max_num_seqs": 8, "vllm_version": "0.11.0"}
    assert server_keys(config) == plain
    for change, keys in (({"replicas": 2}, {"replicas": 2}), ({"kv_dtype": "fp8"}, {"kv_cache_dtype": "fp8"}),
                         ({"data_parallel_size": 2}, {"data_parallel_size": 2}),
                         ({"weight_dtype": "fp8"}, {"quantization": "fp8"}),
                         ({"enable_expert_parallel": True}, {"enable_expert_parallel": True})):
        assert server_keys({**config, "deployment": {**config["deployment"], **change}}) == {**plain, **keys}, change
    assert server_keys({**config, "deployment": {**config["deployment"], "groups": [{}, {}]}}) == {"replica_groups": 2}
    assert server_keys({**config, "speculative_decoding": {"method": "eagle"}}) == {
        **plain, "speculative_config": {"method": "eagle"}}


def _server_profile(path, models):
    path.write_text(json.dumps({"format": "twin-server-profile", "version": 1, "params": {"step_overhead_s": 2e-3},
                                "fitted_on": {"gpus": ["H100-SXM"], "models": models}}))
    return path


def test_a_profile_fitted_on_another_model_says_so_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _server_profile(tmp_path / "p.json", ["llama-3.1-8b"])
    args = ["run", "concurrency_cap_trap", "--set", "cost_model.kind=profile", "--set", "cost_model.profile=p.json",
            "--json", "out.json"]
    res = CliRunner().invoke(main, [*args, "--set", "deployment.model=qwen2.5-7b"])
    assert res.exit_code == 0, res.output
    note = ("profile p.json was fitted on llama-3.1-8b, the deployment runs qwen2.5-7b: its parameters are physical "
            "(efficiencies, overheads, the request path) and carry over; a fit on qwen2.5-7b's own results would "
            "check them")
    said = [line for line in res.output.splitlines() if "was fitted on" in line]
    assert said == [f"warning: {note}"]
    assert json.loads((tmp_path / "out.json").read_text())["twin"]["config"]["profile_note"] == note
    # the model it was fitted on: nothing said, no key
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0 and "was fitted on" not in res.output
    assert "profile_note" not in json.loads((tmp_path / "out.json").read_text())["twin"]["config"]


def test_protocols_baseline_verdict_reads_predicted(tmp_path):
    from twin.analysis.protocol_verdicts import INFO, VERDICT_WORDS

    assert VERDICT_WORDS[INFO] == "predicted"
    res = CliRunner().invoke(main, ["protocol", "concurrency_cap_trap", "--replications", "1", "-q"],
                             env={"COLUMNS": "120"})
    assert res.exit_code == 0, res.output
    row = next(line for line in res.output.splitlines() if "1. Baseline" in line and "│" in line)
    assert [c.strip() for c in row.split("│")[1:4]] == ["1. Baseline", "predicted", "-"]


def test_the_engine_calibrations_tables_are_glossed(capsys):
    from types import SimpleNamespace

    from twin.cli import calibrate as cal
    from twin.cost.profile_features import FEATURE_NAMES

    m = {"n": 10, "mape_pct": 5.0, "median_ape_pct": 4.0, "p90_ape_pct": 9.0, "p90_abs_error_s": 1e-3,
         "bias_pct": 0.5}
    fit = SimpleNamespace(metrics={"test": m, "train": m, "all_by_kind": {}}, knee_tokens=256.0,
                          coefficients={n: 1e-6 for n in FEATURE_NAMES}, range={})
    cal.print_fit(fit)
    lines = capsys.readouterr().out.splitlines()
    assert "MAPE %" in "\n".join(lines) and "knee at 256 tokens" in "\n".join(lines)
    assert lines[-1] == ("MAPE: mean absolute percentage error of the fitted step time against the measured one; "
                         "APE: one step's; held-out: steps left out of the fit; knee: the step size (tokens) past "
                         "which the GEMMs turn compute-bound (tokens_over_knee counts the tokens beyond it)")


def test_every_key_diagnosis_json_holds_is_documented(tmp_path, monkeypatch):
    import re
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, ["run", "concurrency_cap_trap", "--json", "out.json"]).exit_code == 0
    res = runner.invoke(main, ["diagnose", "out.json", "--scenario", "concurrency_cap_trap", "--out", "d"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "d" / "diagnosis.json").read_text())
    text = (Path(__file__).resolve().parents[1] / "docs" / "result-formats.md").read_text(encoding="utf-8")
    section = text[text.index("## `diagnosis.json`"):]
    section = section[:section.index("\n## ", 1)]
    named = set(re.findall(r"[a-z_0-9]+", " ".join(re.findall(r"`([^`]+)`", section))))
    keys = {*doc, *doc["profile"], *doc["fit"], *doc["fit"]["best"], *doc["prefix"], *doc["causes"][0]}
    assert sorted(keys - named) == []
