"""A first hour with measured results (docs/first-hour.md, "Bringing your own measurements"): the wording fixes
an SRE bringing a real server's files to `twin diagnose`, `twin validate`, `twin protocol` and `twin calibrate
--from-results` met, each exact.

- A summary without per-request times (an inference-perf stage file, a `vllm bench serve` result saved without
  `--save-detailed`) says what it is and what to bring, in one line, to `diagnose` and `validate --bench-json`.
- `diagnose` without `--scenario` says where the hit rate it cannot judge came from.
- `validate` names its metrics as `twin run` does, prints the scheduling comparison as figures, and says when the
  engine's steps ran far from the profile's (a busy or other machine), with the command that recalibrates.
- `protocol` gives every latency change its unit; `calibrate --from-results` marks a cut run name.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from twin.analysis.measured import load_measured
from twin.analysis.protocol_verdicts import delta_text
from twin.cli.calibrate_check import RUN_LABEL_CHARS, run_label
from twin.cli.main import main
from twin.cli.validate import scheduling_line, step_time_note
from twin.errors import TwinInputError
from twin.results.export import write_json
from twin.sim.run import run_body
from twin.scenario import load_scenario

INFERENCE_PERF_STAGE = {"load_summary": {"count": 3000, "send_duration": 600.0},
                        "successes": {"count": 3000, "latency": {"time_to_first_token": {"mean": 0.03}}},
                        "failures": {"count": 0}}
SUMMARY_ONLY = {"backend": "vllm", "completed": 400, "mean_ttft_ms": 31.2, "median_ttft_ms": 29.0,
                "mean_tpot_ms": 7.1, "request_throughput": 9.9}


@pytest.fixture(scope="module")
def capped_bench(tmp_path_factory):
    """`twin run concurrency_cap_trap --json`: a result of `vllm bench serve`'s schema (per-request arrays)."""
    sc = load_scenario("concurrency_cap_trap")
    path = tmp_path_factory.mktemp("measured") / "cap.json"
    write_json(run_body(sc.body("baseline"), sc.base_dir), path)
    return path


@pytest.mark.parametrize("doc, what", [
    (INFERENCE_PERF_STAGE, "an inference-perf stage summary (distributions only)"),
    (SUMMARY_ONLY, "a vllm bench serve result saved without --save-detailed (means and percentiles only)"),
])
def test_a_summary_says_what_it_is_and_what_to_bring(tmp_path, doc, what):
    path = tmp_path / "stage_0_lifecycle_metrics.json"
    path.write_text(json.dumps(doc))
    expected = (f"{path}: {what}: no per-request times to replay; bring a vllm bench serve result saved with "
                f"--save-result --save-detailed (twin diagnose also reads a per-request CSV); twin calibrate "
                f"--from-results fits the twin to this file as it is")
    with pytest.raises(TwinInputError) as err:
        load_measured(path)
    assert str(err.value) == expected
    for args in (["diagnose", str(path)], ["validate", "concurrency_cap_trap", "--bench-json", str(path)]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2 and res.output.strip().replace("\n", " ").endswith("this file as it is"), args
        assert "Traceback" not in res.output


def test_a_file_with_some_arrays_keeps_the_missing_array_message(tmp_path):
    """Only a file with no per-request array at all is called a summary; one missing a single array is named."""
    doc = dict(SUMMARY_ONLY, input_lens=[10], output_lens=[5], latencies=[1.0])
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TwinInputError, match="'ttfts' is missing: diagnosis needs the per-request arrays"):
        load_measured(path)


def test_diagnose_without_a_scenario_says_where_the_hit_rate_came_from(capped_bench, tmp_path):
    doc = json.loads(capped_bench.read_text())
    doc["prefix_cache_hit_rate"] = 0.25
    path = tmp_path / "hit.json"
    path.write_text(json.dumps(doc))
    res = CliRunner().invoke(main, ["diagnose", str(path)])
    assert res.exit_code == 0, res.output
    assert ("note: the measured prefix-cache hit rate (25.0%, from the results file) is not judged: --scenario "
            "SCENARIO describes the traffic, which says what hit rate its prompts allow") in res.output
    res = CliRunner().invoke(main, ["diagnose", str(path), "--hit-rate", "0.5"])
    assert "note: the measured prefix-cache hit rate (50.0%, from --hit-rate) is not judged" in res.output


def test_validate_names_metrics_as_twin_run_does(capped_bench):
    res = CliRunner().invoke(main, ["validate", "concurrency_cap_trap", "--bench-json", str(capped_bench)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "cap.json (measured) vs twin (predicted), 64 requests, at most 16 in flight"
    metrics = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    assert metrics[:4] == ["request throughput (req/s)", "output throughput (tok/s)", "TTFT mean", "TTFT p50"]
    assert metrics[-1] == "E2EL p99" and not any("_ms" in m for m in metrics)


def test_validate_scheduling_line_prints_figures():
    line = scheduling_line({"steps": (673, 3860), "mean_running_batch": (11.431985848428642, 1.981731218046335),
                            "preemptions": (0, 0), "prefix_cache_hit_rate": (0.447363228952338, 0.447363228952338),
                            "completed": (126, 126)})
    assert line == ("scheduling, engine vs twin: steps 673 vs 3,860; mean running batch 11.4 vs 1.98; preemptions "
                    "0 vs 0; prefix cache hit rate 44.7% vs 44.7%; completed requests 126 vs 126")


def test_validate_step_time_note_names_the_machine_and_the_fix():
    busy = {"steps": 673, "mean_measured_ms": 32.34, "mean_predicted_ms": 11.39, "mape": 0.605}
    assert step_time_note(busy) == (
        "the engine's steps took 2.84x the profile's step time on average: this machine ran slower (busier) than "
        "the one the profile was measured on, and the latency errors above follow from that; calibrate here (twin "
        "calibrate --quick --device cpu --threads 1 -o my-profile.json) and pass --profile my-profile.json")
    fast = dict(busy, mean_measured_ms=5.0)
    assert "took 0.44x" in step_time_note(fast, "cuda") and "faster" in step_time_note(fast, "cuda")
    assert "--device cuda -o my-profile.json" in step_time_note(fast, "cuda")
    assert step_time_note(dict(busy, mean_measured_ms=17.0)) is None       # 1.49x: within what a profile carries
    assert step_time_note(None) is None and step_time_note({"mean_predicted_ms": 0.0}) is None


@pytest.mark.parametrize("key, mean, expected", [
    ("p99_ttft_ms", -4963.0, "TTFT p99 -4.96 s (-95.9% ± 0.1%)"),
    ("median_tpot_ms", 0.532, "TPOT p50 +532 µs (-95.9% ± 0.1%)"),
    ("median_tpot_ms", -3.31, "TPOT p50 -3.31 ms (-95.9% ± 0.1%)"),
    ("output_throughput", 1448.0, "output throughput (tok/s) +1,448 (-95.9% ± 0.1%)"),
])
def test_protocol_latency_changes_carry_their_unit(key, mean, expected):
    deltas = {key: {"mean": mean, "half_width": 1.0}, f"{key}_rel": {"mean": -0.959, "half_width": 0.001}}
    assert delta_text(key, deltas) == expected


def test_a_cut_run_name_says_so():
    assert run_label("stage0") == "stage0"
    name = "20260217-155451-llama-2-7b-tp1-codegen/stage0"
    assert run_label(name) == "...-155451-llama-2-7b-tp1-codegen/stage0"   # the stage, which tells runs apart
    assert len(run_label(name)) == RUN_LABEL_CHARS and run_label(name[-RUN_LABEL_CHARS:]) == name[-RUN_LABEL_CHARS:]


def test_calibrate_says_what_a_large_misfit_points_at():
    """The twin's own chat_shared_prompt run fitted without its shared 2,000-token prefix gave chi^2/dof 32.45."""
    from twin.cli.calibrate_results import misfit_note

    assert misfit_note(32.45) == (
        "note: chi^2/dof 32.5: no setting of these parameters reproduces the runs within their noise (the standard "
        "errors above are inflated by it; the runs table shows which run misfits). Check first what the files "
        "cannot say: prompts sharing a prefix (vllm bench serve --metadata random_prefix_len=N; otherwise every "
        "prompt is taken as unique), and the settings marked assumed above (--vllm-version, --set "
        "server.KNOB=VALUE)")
    assert misfit_note(0.17) is None and misfit_note(4.0) is None and misfit_note(float("nan")) is None


def test_diagnose_speed_note_names_the_command_that_fits_the_twin(capped_bench):
    """Results of an H100 server diagnosed against an A100 deployment: the steps are faster than its cost model."""
    res = CliRunner().invoke(main, ["diagnose", str(capped_bench), "--scenario", "concurrency_cap_trap",
                                    "--set", "deployment.gpu=a100"])
    assert res.exit_code == 0, res.output
    note = next(line for line in res.output.splitlines() if "cost model's time" in line)
    assert note.startswith("note: the server's steps take 0.")
    assert note.endswith(f"(fitted from the median TPOT); for closer predictions fit the twin to these results: "
                         f"twin calibrate --from-results {capped_bench} --scenario concurrency_cap_trap")


def test_a_written_profile_says_how_to_use_and_check_it():
    from twin.cli.calibrate import engine_profile_use
    from twin.cli.calibrate_results import server_profile_use

    assert engine_profile_use("my-profile.json") == (
        "use it with: cost_model: {kind: profile, profile: my-profile.json} (or twin validate SCENARIO --profile "
        "my-profile.json: the engine against the twin on it)")
    assert server_profile_use("my-server.json") == (
        "use it with: cost_model: {kind: profile, profile: my-server.json} (and the server's vllm_version), or twin "
        "run SCENARIO --set cost_model.kind=profile --set cost_model.profile=my-server.json")


def test_validate_step_time_note_with_a_given_profile_does_not_send_the_user_in_a_circle():
    busy = {"steps": 1297, "mean_measured_ms": 15.89, "mean_predicted_ms": 9.89}
    assert step_time_note(busy, "cpu", profile_given=True) == (
        "the engine's steps took 1.61x the profile's step time on average: this machine ran slower (busier) than "
        "when the profile was measured, and the latency errors above follow from that; on a shared machine "
        "calibrate just before validating, or validate on an idle one")


def test_protocol_doc_diagnose_steps_run_as_printed(tmp_path, monkeypatch):
    """docs/protocol.md: make a result with `twin run`, then diagnose it as the doc's first command does."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "protocol.md").read_text(encoding="utf-8")
    make = "twin run concurrency_cap_trap --json results/baseline.json"
    diagnose = "twin diagnose results/baseline.json --scenario concurrency_cap_trap --out diagnosis/"
    assert f"`{make}`" in doc and diagnose in doc
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    for command in (make, diagnose):
        res = CliRunner().invoke(main, command.split()[1:])
        assert res.exit_code == 0, res.output
    assert "verdict: Concurrency cap of 4 sequences (max_num_seqs = 4)" in res.output
    assert (tmp_path / "diagnosis" / "diagnosis.md").is_file()
