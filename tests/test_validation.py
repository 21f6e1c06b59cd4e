"""Validation against measurements: bench-JSON parsing, the CLI path, and a short real run of the engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from calibration.validate import bench_traffic, compare_metrics, relative_error, specs_from_bench_json
from twin.cli.main import main
from twin.cli.validate import STEP_RATIO_NOTE, step_time_note
from twin.errors import TwinInputError
from twin.results.export import write_json
from twin.scenario import load_scenario
from twin.workload.capped_open_loop import CappedOpenLoop

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "scenarios" / "validate_tiny_cpu.yaml"


def test_relative_error_and_comparison():
    assert relative_error(100.0, 110.0) == pytest.approx(0.1)
    assert relative_error(0.0, 0.0) == 0.0
    assert relative_error(0.0, 1.0) is None
    assert relative_error(None, 1.0) is None
    cmp = compare_metrics({"mean_ttft_ms": 200.0, "request_throughput": 4}, {"mean_ttft_ms": 150.0},
                          metrics=("mean_ttft_ms", "request_throughput"))
    assert cmp.error("mean_ttft_ms") == pytest.approx(-0.25)
    assert cmp.error("request_throughput") is None


def test_specs_from_bench_json_orders_by_start_time():
    doc = {"input_lens": [10, 20, 30], "output_lens": [5, 6, 7], "start_times": [100.5, 100.0, 101.0]}
    specs = specs_from_bench_json(doc)
    assert [(s.request_id, s.arrival_s, s.num_prompt_tokens, s.output_tokens) for s in specs] == [
        (0, 0.0, 20, 6), (1, 0.5, 10, 5), (2, 1.0, 30, 7)]
    # every prompt is unique: a bench result has no prompt content
    assert len({s.prompt_segments for s in specs}) == 3


@pytest.mark.parametrize("doc, needle", [
    ({"output_lens": [1]}, "'input_lens' must be a non-empty list"),
    ({"input_lens": [1, 2], "output_lens": [1]}, "input_lens has 2 entries, output_lens 1"),
    ({"input_lens": [1], "output_lens": [0], "start_times": [0.0]}, "output_lens[0] = 0"),
    ({"input_lens": [1], "output_lens": [1]}, "needs 'start_times'"),
])
def test_specs_from_bench_json_errors(doc, needle):
    with pytest.raises(TwinInputError) as exc:
        specs_from_bench_json(doc, "x.json")
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


def test_validate_against_bench_json_from_the_cli(tmp_path):
    """A bench-serve file made by the twin itself replays to (almost) the same numbers: the CLI path works and
    the replay of per-request arrays is faithful."""
    from twin.sim.run import run_body

    sc = load_scenario(TINY)
    body = sc.body("baseline", {"server": {"enable_prefix_caching": False},
                                "workload": {"duration_s": 10}})
    result = run_body(body, sc.base_dir)
    bench = tmp_path / "bench.json"
    write_json(result, bench)
    out = tmp_path / "cmp.json"
    res = CliRunner().invoke(main, ["validate", str(TINY), "--set", "server.enable_prefix_caching=false",
                                    "--bench-json", str(bench), "--json", str(out)])
    assert res.exit_code == 0, res.output
    rows = {r["metric"]: r for r in json.loads(out.read_text())["comparison"]["rows"]}
    for metric in ("request_throughput", "mean_tpot_ms", "median_ttft_ms", "p99_ttft_ms"):
        assert abs(rows[metric]["relative_error"]) < 0.01, (metric, rows[metric])


def test_validate_bench_json_bad_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = CliRunner().invoke(main, ["validate", str(TINY), "--bench-json", str(bad)])
    assert res.exit_code == 2
    assert "bad.json:1: not valid JSON" in res.output


@pytest.fixture(scope="module")
def local_profile(tmp_path_factory):
    """A profile measured here and now (``twin calibrate --quick``'s code with a short budget, one thread):
    the committed profile was measured on another CPU, and step times differ 1.5-3x between CPU models, so a
    test that compares the engine's timings with the twin's must calibrate on the machine it runs on."""
    torch = pytest.importorskip("torch")
    from calibration.calibrate import calibrate

    threads = torch.get_num_threads()
    try:
        result = calibrate("tiny-llama", device="cpu", quick=True, budget_s=6.0, threads=1, seed=0,
                           output=tmp_path_factory.mktemp("profile") / "here.json")
    finally:
        torch.set_num_threads(threads)
    return result.profile_path


@pytest.mark.slow
def test_engine_and_twin_agree_on_a_short_run(tmp_path, local_profile):
    """Eight seconds of light traffic served for real on the tiny CPU model against the twin with a profile
    calibrated on this machine a moment ago. What both sides share exactly (the serving core) is bounded
    exactly; timings loosely, since the machine is shared and its speed drifts. The fidelity benchmark
    (benchmarks/fidelity.py) reports the real errors."""
    torch = pytest.importorskip("torch")
    from calibration.validation_run import validate_body

    sc = load_scenario(TINY)
    body = sc.body("baseline", {"workload": {"arrivals": {"rate_per_s": 4}, "duration_s": 8},
                                "cost_model": {"kind": "profile", "profile": str(local_profile)}})
    threads = torch.get_num_threads()
    try:
        run = validate_body(body, sc.base_dir, max_kv_blocks=1024)
    finally:
        torch.set_num_threads(threads)
    m, p = run.measured_metrics, run.predicted_metrics
    # machine-independent: the same serving core on the same requests, light load, no preemption
    assert m["completed"] == p["completed"] > 20
    assert run.scheduling["preemptions"] == (0, 0)
    assert run.scheduling["prefix_cache_hit_rate"][0] == pytest.approx(run.scheduling["prefix_cache_hit_rate"][1],
                                                                       abs=0.05)
    # timings, against this machine's own profile (a foreign one was off by -90% in TPOT). They hold only while the
    # machine runs as it did when the profile was measured a moment ago: on a shared box its speed drifts (17% seen
    # at load 10, 2.8x under five parallel test runs). Bounded where the engine's mean step is within 25% of the
    # profile's; beyond that the product must say the errors are the machine's (validate's step-time note)
    drift = run.residuals["mean_measured_ms"] / run.residuals["mean_predicted_ms"]
    if 0.8 <= drift <= 1.25:
        assert abs(run.comparison.error("request_throughput")) < 0.25
        assert abs(run.comparison.error("mean_tpot_ms")) < 0.6
        assert abs(run.comparison.error("mean_e2el_ms")) < 0.6
        # not the per-step MAPE: a mean within 25 % of the profile's still leaves single steps stretched by the
        # other processes' bursts (0.63-0.64 seen at load 7 on 2 cores); the means above are what the twin predicts
    elif not 1 / STEP_RATIO_NOTE <= drift <= STEP_RATIO_NOTE:
        assert "x the profile's step time" in step_time_note(run.residuals, profile_given=True)
    assert run.machines["profile"] == run.machines["engine"]
    assert not any("measured on" in note for note in run.comparison.notes)
    # the engine's run, written as a vllm bench serve file, validates from the CLI
    bench = tmp_path / "engine.json"
    write_json(run.measured, bench)
    res = CliRunner().invoke(main, ["validate", str(TINY), "--set", "server.enable_prefix_caching=false",
                                    "--bench-json", str(bench)])
    assert res.exit_code == 0, res.output
    assert "request throughput (req/s)" in res.output   # named as twin run names it


def test_bench_traffic_rate_inf_without_start_times_is_capped():
    doc = {"input_lens": [10, 20, 30], "output_lens": [5, 6, 7], "request_rate": "inf", "max_concurrency": 2}
    traffic = bench_traffic(doc)
    assert isinstance(traffic, CappedOpenLoop) and traffic.concurrency == 2
    assert [s.arrival_s for s in specs_from_bench_json(doc)] == [0.0, 0.0, 0.0]
    assert [s.arrival_s for s in specs_from_bench_json({**doc, "request_rate": float("inf")})] == [0.0] * 3
    assert isinstance(bench_traffic({**doc, "max_concurrency": None}), list)
    with pytest.raises(TwinInputError, match=r"^x.json: max_concurrency = 0: must be an integer >= 1 or null$"):
        bench_traffic({**doc, "max_concurrency": 0}, "x.json")


def test_validate_a_capped_bench_json_without_start_times(tmp_path):
    """`vllm bench serve --request-rate inf --max-concurrency 3` writes request_rate "inf" and no usable start
    times: the replay sends the requests as slots free, never more than 3 at once, and reproduces the run."""
    from twin.sim.run import run_body

    sc = load_scenario(TINY)
    body = sc.body("baseline", {"server": {"enable_prefix_caching": False},
                                "workload": {"arrivals": {"_replace": True, "process": "poisson",
                                                          "rate_per_s": float("inf"), "max_concurrency": 3},
                                             "duration_s": None, "num_requests": 30}})
    result = run_body(body, sc.base_dir)
    bench = tmp_path / "bench.json"
    write_json(result, bench)
    doc = json.loads(bench.read_text())
    doc.pop("start_times")
    doc.update(request_rate="inf", max_concurrency=3)
    bench.write_text(json.dumps(doc))
    out = tmp_path / "cmp.json"
    res = CliRunner().invoke(main, ["validate", str(TINY), "--set", "server.enable_prefix_caching=false",
                                    "--bench-json", str(bench), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "at most 3 in flight" in res.output
    rows = {r["metric"]: r for r in json.loads(out.read_text())["comparison"]["rows"]}
    for metric in ("request_throughput", "mean_tpot_ms", "median_ttft_ms"):
        assert abs(rows[metric]["relative_error"]) < 0.01, (metric, rows[metric])
