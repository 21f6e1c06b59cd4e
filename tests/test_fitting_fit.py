"""The fit recovers known cost parameters from results the twin itself generated, and the CLI writes a server
profile that scenarios then run on."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pytest
from click.testing import CliRunner

from tests.fitting_helpers import write_config, write_stage
from twin.cli.main import main
from twin.fitting.fit import Case, fit
from twin.fitting.measured_run import LengthSample, MeasuredRun, PromptPool
from twin.fitting.replay import Target, replay

TRUE = {"memory_efficiency": 0.7, "step_overhead_s": 2.5e-3, "per_seq_overhead_s": 3.0e-5, "request_path_s": 0.012}
NAMES = tuple(TRUE)
SIM_S = 30.0
# Llama-2-7B has no GQA: its KV reads grow with batch x context, which separates the bandwidth efficiency from
# the fixed step overhead; two prompt lengths separate KV reads from the per-sequence overhead
TARGET = Target("llama-2-7b", "H100-SXM", 1)
RUNS = ((4.0, 700, "light"), (16.0, 700, "busy"), (10.0, 2400, "long"))


def _run(rate: float, prompt: int, name: str) -> MeasuredRun:
    return MeasuredRun(name=name, source="test", num_requests=int(rate * SIM_S), rate_per_s=rate,
                       duration_s=SIM_S, prompt_tokens=LengthSample.constant(prompt),
                       output_tokens=LengthSample.constant(150), prompt_pool=PromptPool(4, 5, 300),
                       metrics={"completed": 1.0}, server={"max_num_seqs": 128}, experiment=name)


@pytest.fixture(scope="module")
def synthetic_cases():
    cases = []
    for rate, prompt, name in RUNS:
        run = _run(rate, prompt, name)
        m = replay(run, TARGET, TRUE, max_sim_s=SIM_S).metrics
        measured = {k: m[k] for k in ("mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
                                      "mean_tpot_ms", "mean_e2el_ms")}
        cases.append(Case(dataclasses.replace(run, metrics=measured), TARGET))
    return cases


@pytest.mark.slow
def test_fit_recovers_the_parameters_that_generated_the_results(synthetic_cases):
    res = fit(synthetic_cases, names=NAMES, outer_iterations=4, max_sim_s=SIM_S)
    # stated tolerances: the efficiency within 5 %, the request path within 1 ms, overheads within 35 %
    # (step and per-sequence overheads trade against each other over three load levels)
    assert res.params["memory_efficiency"] == pytest.approx(0.7, rel=0.05)
    assert res.params["request_path_s"] == pytest.approx(0.012, abs=1e-3)
    assert res.params["step_overhead_s"] == pytest.approx(2.5e-3, rel=0.35)
    assert res.params["per_seq_overhead_s"] == pytest.approx(3.0e-5, rel=0.35)
    for case, pred in zip(synthetic_cases, res.predicted):
        for key in ("mean_tpot_ms", "median_ttft_ms"):
            assert pred[key] == pytest.approx(case.run.metrics[key], rel=0.03), (case.run.name, key)
    assert all(v >= 0 for v in res.std.values())


def _results_folder(tmp_path, cases):
    folder = tmp_path / "exp"
    write_config(folder, model="meta-llama/Llama-2-7b-hf", tp=1, groups=4, per_group=5, system_tokens=300,
                 question_tokens=400, output_tokens=150, stages=[(c.run.rate_per_s, SIM_S) for c in cases],
                 server={"max_num_seqs": 128})
    for i, c in enumerate(cases):
        write_stage(folder, i, rate=c.run.rate_per_s, duration_s=SIM_S, prompt_tokens=int(c.run.prompt_tokens.mean),
                    output_tokens=150,
                    metrics={**c.run.metrics, "median_e2el_ms": c.run.metrics["mean_e2el_ms"],
                             "p99_e2el_ms": c.run.metrics["mean_e2el_ms"] * 1.2})
    return folder


@pytest.mark.slow
def test_calibrate_from_results_writes_a_profile_scenarios_run_on(tmp_path, synthetic_cases):
    folder = _results_folder(tmp_path, synthetic_cases)
    out = tmp_path / "server.json"
    r = CliRunner().invoke(main, ["calibrate", "--from-results", str(folder), "--gpu", "H100-SXM",
                                  "--max-sim-s", "30", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["format"] == "twin-server-profile" and len(doc["runs"]) == 3
    assert doc["fitted_on"]["gpus"] == ["H100-SXM"] and "allreduce_latency_s" not in doc["fitted"]  # TP1 only
    assert doc["params"]["memory_efficiency"] == pytest.approx(0.7, rel=0.08)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"""
name: on-my-server
deployment: {{gpu: H100-SXM, model: llama-2-7b}}
cost_model: {{kind: profile, profile: {out}}}
workload:
  arrivals: {{process: poisson, rate_per_s: 4}}
  num_requests: 40
  classes: [{{name: chat, share: 1.0, prompt: {{suffix_tokens: 500}}, output_tokens: 100}}]
""")
    run = CliRunner().invoke(main, ["run", str(scenario), "--json", str(tmp_path / "o.json")])
    assert run.exit_code == 0, run.output
    # on another GPU the profile warns once: its host overheads were measured elsewhere
    with warnings.catch_warnings(record=True) as caught:      # shown as one line by the CLI, or recorded here
        warnings.simplefilter("always")
        other = CliRunner().invoke(main, ["run", str(scenario), "--set", "deployment.gpu=A100-SXM-80GB"])
    said = other.output + " ".join(str(w.message) for w in caught)
    assert other.exit_code == 0 and "fitted on H100-SXM" in said


def test_calibrate_plan_prints_bench_commands():
    r = CliRunner().invoke(main, ["calibrate", "--plan", "--model", "meta-llama/Llama-3.1-8B-Instruct"])
    assert r.exit_code == 0
    assert r.output.count("vllm bench serve") >= 3 and "--max-concurrency" in r.output
    assert "twin calibrate --from-results" in r.output


def test_calibrate_from_results_bad_input_is_one_line(tmp_path):
    bad = tmp_path / "results_stage_0_lifecycle_metrics.json"
    bad.write_text("{}")
    r = CliRunner().invoke(main, ["calibrate", "--from-results", str(bad), "--gpu", "H100-SXM", "--model",
                                  "llama-3.1-8b"])
    assert r.exit_code == 2 and "missing field" in r.output and len(r.output.strip().splitlines()) == 1
    r = CliRunner().invoke(main, ["calibrate", "--from-results", str(tmp_path / "nope.json")])
    assert r.exit_code == 2 and "no such file" in r.output
