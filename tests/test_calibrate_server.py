"""The server a calibration's results ran on: the result files' settings, a scenario, --vllm-version and --set
merged in that order of precedence (lowest first), and shown with what was assumed before the fit."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.client_layouts import MODEL_ID, vllm_bench_doc, simulate_run
from twin.cli.calibrate_results import read_cases
from twin.cli.main import main
from twin.errors import TwinInputError

SCENARIO = """
name: my-server
deployment: {gpu: H100-SXM, model: llama-3.1-8b, tensor_parallel_size: 1, kv_dtype: fp8}
server: {max_num_seqs: 96, max_num_batched_tokens: 4096, vllm_version: "0.10.1"}
workload:
  arrivals: {process: poisson, rate_per_s: 2}
  num_requests: 20
  classes: [{name: chat, share: 1.0, prompt: {suffix_tokens: 500}, output_tokens: 100}]
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("srv")
    reqs = simulate_run(4.0, None, 40, 256, 32)
    # the file says max_num_seqs (as --metadata would) but neither the GPU nor the release
    (d / "r.json").write_text(json.dumps(vllm_bench_doc(reqs, rate=4.0, concurrency=None,
                                                        metadata={"max_num_seqs": 64})))
    (d / "scn.yaml").write_text(SCENARIO)
    return d


def test_precedence_scenario_then_file_then_command_line(files):
    _, [case] = read_cases([str(files / "r.json")], scenario=str(files / "scn.yaml"),
                           sets=("server.max_num_batched_tokens=2048",), vllm_version="0.11.0", gpu=None,
                           model=None, tp=None)
    # scenario: gpu, kv_dtype; file over scenario: max_num_seqs; --set over scenario; --vllm-version over scenario
    assert (case.target.gpu, case.target.model, case.target.kv_dtype) == ("H100-SXM", "llama-3.1-8b", "fp8")
    assert case.run.server == {"max_num_seqs": 64, "max_num_batched_tokens": 2048, "vllm_version": "0.11.0"}
    _, [case] = read_cases([str(files / "r.json")], scenario=None, sets=("server.max_num_seqs=32",),
                           vllm_version=None, gpu="H100-SXM", model=None, tp=None)
    assert case.run.server == {"max_num_seqs": 32} and case.run.model == MODEL_ID


def test_what_was_read_and_assumed_is_printed_before_the_fit(files):
    r = CliRunner().invoke(main, ["calibrate", "--from-results", str(files / "r.json"), "--gpu", "H100-SXM",
                                  "--set", "server.max_num_seqs=0", "-o", str(files / "p.json")],
                           env={"COLUMNS": "200"})
    # a knob out of range is refused in one line naming it
    assert r.exit_code == 2 and "max_num_seqs" in r.output.splitlines()[-1]
    r = CliRunner().invoke(main, ["calibrate", "--from-results", str(files / "r.json"), "--scenario",
                                  str(files / "scn.yaml"), "--max-sim-s", "10", "--replications", "1",
                                  "-o", str(files / "p.json")], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    head = r.output[:r.output.index("fitted ")]
    assert "read 1 run from 1 result file or folder" in head
    for line in ("max_num_seqs", "vllm_version"):
        assert line in head
    assert "0.10.1" in head and "--scenario" in head and "assumed: vLLM 0.10.1 default" in head
    assert "result file" in head            # max_num_seqs
    doc = json.loads((files / "p.json").read_text())
    assert doc["fitted_on"]["vllm_versions"] == ["0.10.1"] and doc["fitted_on"]["runs_read"] == 1


def test_no_release_given_says_what_was_assumed(files):
    r = CliRunner().invoke(main, ["calibrate", "--from-results", str(files / "r.json"), "--gpu", "H100-SXM",
                                  "--max-sim-s", "10", "--replications", "1", "-o", str(files / "q.json")],
                           env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "no vLLM release given: assumed" in r.output and "--vllm-version" in r.output


@pytest.mark.parametrize("args, message", [
    (["--set", "workload.num_requests=3"], "twin calibrate takes server.KNOB=VALUE or deployment.FIELD=VALUE"),
    (["--set", "deployment.replicas=2"], "--set deployment.replicas: not a field calibration uses"),
    (["--vllm-version", "0.0.1"], "vllm_version"),
    (["--scenario", "no-such-scenario"], "no such scenario"),
])
def test_bad_descriptions_are_one_line(files, args, message):
    r = CliRunner().invoke(main, ["calibrate", "--from-results", str(files / "r.json"), "--gpu", "H100-SXM",
                                  *args, "-o", str(files / "x.json")])
    assert r.exit_code == 2 and message in r.output, r.output
    assert len([x for x in r.output.splitlines() if "rror" in x]) == 1


def test_missing_model_names_the_way_out(tmp_path, files):
    doc = json.loads((files / "r.json").read_text())
    del doc["model_id"]
    (tmp_path / "r.json").write_text(json.dumps(doc))
    with pytest.raises(TwinInputError, match="does not name its model; give --model .or --scenario."):
        read_cases([str(tmp_path / "r.json")], scenario=None, sets=(), vllm_version=None, gpu="H100-SXM",
                   model=None, tp=None)


def test_description_flags_need_results():
    r = CliRunner().invoke(main, ["calibrate", "--vllm-version", "0.11.0"])
    assert r.exit_code == 2 and "go with --from-results" in r.output
