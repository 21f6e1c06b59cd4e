"""Hostile input to the twin's own readers and command options (round 19): each defect the fuzzing found is one
exact test here. A bad file or option value is one line on stderr and exit status 2, before any work; a good one
still runs (``tests/fuzz/test_fuzz_cli.py`` samples the same surfaces with more files and values)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from twin.cli.main import main
from twin.errors import TwinInputError
from twin.yaml_input import parse_yaml, read_text

SCENARIO = """\
name: tiny
deployment: {gpu: H100-SXM, model: llama-3.1-8b}
server: {max_num_seqs: 8}
workload:
  arrivals: {process: poisson, rate_per_s: 20}
  num_requests: 6
  classes:
    - {name: a, share: 1.0, prompt: {suffix_tokens: 32}, output_tokens: 4}
slo: {ttft_ms: 500}
variants:
  wide: {server: {max_num_seqs: 16}}
"""
BENCH = {"input_lens": [10, 20], "output_lens": [4, 4], "ttfts": [0.01, 0.02], "latencies": [0.05, 0.06],
         "start_times": [0.0, 0.1]}


@pytest.fixture
def d(tmp_path: Path) -> Path:
    (tmp_path / "s.yaml").write_text(SCENARIO)
    (tmp_path / "b.json").write_text(json.dumps(BENCH))
    (tmp_path / "dir").mkdir()
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    return tmp_path


def refused(d: Path, *args: str) -> str:
    """The one line ``twin ARGS`` ({d} is the test's folder) prints, after checking it was refused cleanly."""
    result = CliRunner().invoke(main, [a.replace("{d}", str(d)) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, (result.exit_code, result.stdout, result.stderr)
    return lines[0]


# ------------------------------------------------------------------------------------------------ user files
def test_a_key_given_twice_in_a_yaml_file_is_refused_with_its_line(d):
    (d / "x.yaml").write_text(SCENARIO + "server: {max_num_seqs: 64}\n")
    assert refused(d, "run", "{d}/x.yaml", "-q") == (
        f"error: {d}/x.yaml:12:1: malformed YAML: the key 'server' appears twice in one mapping; give each key once")
    (d / "p.yaml").write_text("H100-SXM: 2.0\nH100-SXM: 3.0\n")
    assert "the key 'H100-SXM' appears twice" in refused(
        d, "sweep", "{d}/s.yaml", "--grid", "server.max_num_seqs=4", "--backend", "serial", "-q", "--prices",
        "{d}/p.yaml")


def test_yaml_merge_keys_may_still_be_overridden():
    assert parse_yaml("a: &x {k: 1, j: 2}\nb:\n  <<: *x\n  k: 3\n", "m") == {"a": {"k": 1, "j": 2},
                                                                             "b": {"k": 3, "j": 2}}


def test_a_device_is_refused_not_read_forever(d):
    os.symlink("/dev/zero", d / "z.yaml")
    assert refused(d, "run", "{d}/z.yaml", "-q") == (
        f"error: {d}/z.yaml: a device or socket; the scenario must be a file")
    assert "a device or socket" in refused(d, "validate", "{d}/s.yaml", "--profile", "{d}/z.yaml", "--bench-json",
                                           "{d}/b.json")
    assert refused(d, "calibrate", "--from-results", "{d}/z.yaml", "--gpu", "H100-SXM", "-m", "llama-3.1-8b",
                   "-q") == f"error: {d}/z.yaml: not a regular file; give the result file itself"


def test_a_pipe_is_read_up_to_the_size_limit(tmp_path):
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    pid = os.fork()
    if pid == 0:        # a writer that sends more than the limit allows
        try:
            with open(fifo, "wb") as f:
                f.write(b"x" * 2048)
        finally:
            os._exit(0)
    try:
        with pytest.raises(TwinInputError, match="more than 1,000 bytes; a scenario may be at most 1,000 bytes"):
            read_text(fifo, "scenario", max_bytes=1000)
    finally:
        os.waitpid(pid, 0)


def test_a_trace_given_as_a_symbolic_link_loop(d):
    assert refused(d, "protocol", "{d}/s.yaml", "--trace", "{d}/loop", "-q") == (
        f"error: --trace {d}/loop: a symbolic link loop")


# ------------------------------------------------------------------------------------------------ output paths
@pytest.mark.parametrize("args, needle", [
    (["run", "{d}/s.yaml", "-q", "--json", "{d}/loop"], "is a symbolic link loop"),
    (["run", "{d}/s.yaml", "-q", "--steps-out", "{d}/no/x.csv"], "folder '{d}/no' does not exist"),
    (["calibrate", "--from-results", "{d}/b.json", "--gpu", "H100-SXM", "-m", "llama-3.1-8b", "-o", "{d}/loop"],
     "is a symbolic link loop"),
    (["calibrate", "--quick", "-o", "{d}/loop"], "is a symbolic link loop"),
    (["validate", "{d}/s.yaml", "--bench-json", "{d}/b.json", "--json", "{d}/no/x.json"], "does not exist"),
], ids=["run-json-loop", "run-steps-missing-folder", "results-output-loop", "calibrate-output-loop",
        "validate-json-missing-folder"])
def test_output_paths_are_checked_before_the_work(d, args, needle):
    assert needle.replace("{d}", str(d)) in refused(d, *args)


def test_a_read_only_output_folder(d):
    (d / "ro").mkdir(mode=0o500)
    if os.access(d / "ro", os.W_OK):
        pytest.skip("running as a user that may write anywhere")
    assert "is not writable" in refused(d, "run", "{d}/s.yaml", "-q", "--json", "{d}/ro/x.json")


# ------------------------------------------------------------------------------------------------ numbers
@pytest.mark.parametrize("args", [
    ["calibrate", "--quick", "--budget", "nan"],
    ["calibrate", "--quick", "--budget", "inf"],
    ["calibrate", "--quick", "--max-pool-gib", "nan"],
    ["diagnose", "{d}/b.json", "--hit-rate", "nan"],
    ["plan", "{d}/s.yaml", "--target-rate", "inf"],
    ["protocol", "{d}/s.yaml", "--engine-duration", "nan"],
    ["sweep", "{d}/s.yaml", "--grid", "server.max_num_seqs=4", "--goodput", "nan"],
], ids=["budget-nan", "budget-inf", "pool-nan", "hit-rate-nan", "target-rate-inf", "engine-duration-nan",
        "goodput-nan"])
def test_nan_and_infinity_are_refused_by_every_float_option(d, args):
    assert "is not a finite number" in refused(d, *args)


def test_prices_given_on_the_command_line(d):
    sweep = ["sweep", "{d}/s.yaml", "--grid", "server.max_num_seqs=4", "--backend", "serial", "-q"]
    assert refused(d, *sweep, "--price", "H100-SXM=-1") == (
        "error: prices.H100-SXM: -1.0: must be a number >= 0 (USD per GPU-hour)")
    assert refused(d, *sweep, "--price", "H100-SXM=1", "--price", "H100-SXM=2") == (
        "error: --price 'H100-SXM=2': H100-SXM is priced twice; give each GPU once")


def test_integer_lists(d):
    diag = ["diagnose", "{d}/b.json", "--scenario", "{d}/s.yaml"]
    assert refused(d, *diag, "--candidates", "4,4") == "error: --candidates '4,4': 4 is given twice"
    assert refused(d, *diag, "--candidates", ",") == (
        "error: --candidates ',': '' is not an integer (give e.g. 1,4,16)")
    assert refused(d, "protocol", "{d}/s.yaml", "--spec-concurrency", "2,2") == (
        "error: --spec-concurrency '2,2': 2 is given twice")


def test_diagnose_options_that_cannot_apply(d):
    assert refused(d, "diagnose", "{d}/b.json", "--candidates", "4") == (
        "error: --candidates: needs --scenario (the twin is fitted on its deployment)")
    assert refused(d, "diagnose", "{d}/b.json", "--scenario", "{d}/s.yaml", "--shared-prefix-tokens", "20") == (
        "error: --shared-prefix-tokens 20: no measured prompt is longer (the longest has 20 tokens)")


# ------------------------------------------------------------------------------------------------ names and modes
def test_sweep_options_outside_their_mode(d):
    sweep = ["sweep", "{d}/s.yaml", "--grid", "server.max_num_seqs=4", "--backend", "serial", "-q"]
    assert refused(d, *sweep, "--trials", "3") == "error: --trials: applies only with --search optuna"
    assert refused(d, *sweep, "--y", "p99_ttft_ms") == "error: --y: applies only with --plot"
    assert refused(d, *sweep, "--search", "optuna", "--objective", "bogus").startswith(
        "error: objective: 'bogus': not a metric of a run; allowed: duration, ")
    assert refused(d, *sweep, "--color", "bogus", "--plot", "{d}/p.html").startswith(
        "error: plot axis 'bogus': not a column; columns: config, ")


def test_plan_latency_metric_must_be_a_metric(d):
    assert refused(d, "plan", "{d}/s.yaml", "--backend", "serial", "-q", "--search", "server.max_num_seqs=8",
                   "--latency-metric", "p99_ttft").startswith(
        "error: latency_metric: 'p99_ttft': not a metric of a run; allowed: ")


def test_variant_options(d):
    assert refused(d, "run", "{d}/s.yaml", "-q", "--all-variants", "-v", "wide") == (
        "error: --variant wide: --all-variants already runs every variant; give one or the other")
    assert refused(d, "compare", "{d}/s.yaml", "-q", "--variants", ",") == (
        "error: --variants ',': names no variant; give e.g. --variants a,b")


def test_validate_engine_options(d):
    assert refused(d, "validate", "{d}/s.yaml", "--bench-json", "{d}/b.json", "--device", "cuda") == (
        "error: --device: applies only with a run on the engine (without --bench-json)")
    assert "'tpu' is not one of 'cpu', 'cuda'" in refused(d, "validate", "{d}/s.yaml", "--device", "tpu")


def test_good_options_still_run(d):
    result = CliRunner().invoke(main, ["compare", str(d / "s.yaml"), "-q", "--variants", "wide,"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["run", str(d / "s.yaml"), "-q", "--json", str(d / "out.json")])
    assert result.exit_code == 0 and json.loads((d / "out.json").read_text())["completed"] == 6


# ------------------------------------------------------------------------------------------------ the dashboard
def test_a_shared_url_value_outside_its_widget_is_one_error():
    from twin.dashboard import share
    from twin.dashboard import state as dash

    d = dash.form_defaults(dash.load_bundled("concurrency_cap_trap").raw())
    for params, message in [
        ({"w.max_num_seqs": "0"}, "w.max_num_seqs='0': the setting's widget takes values in [1, 9,007,199,"),
        ({"w.concurrency": "none"}, "w.concurrency='none': expected a number"),
        ({"w.gpu_memory_utilization": "2"}, "w.gpu_memory_utilization='2': the setting's widget takes values at most"),
        ({"w.classes.0.output_tokens": "-1"}, "w.classes.0.output_tokens='-1': the setting's widget takes values in"),
    ]:
        with pytest.raises(TwinInputError) as info:
            share.decode(params, d)
        assert str(info.value).startswith("URL parameter " + message), str(info.value)
    assert share.decode({"w.max_num_seqs": "16", "w.concurrency": "8"}, d) == {"max_num_seqs": 16, "concurrency": 8}


def test_the_page_shows_a_bad_url_seed_or_setting_as_one_error():
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    app = str(Path(__file__).resolve().parent.parent / "app.py")
    for extra, error in [({"seed": "1" * 30}, "URL parameter seed='" + "1" * 30 + "': expected a whole number in "
                                                                                  "[0, 9007199254740991]"),
                         ({"w.block_size": "-1"}, "URL parameter w.block_size='-1': the setting's widget takes "
                                                  "values in [1, 9,007,199,254,740,991]")]:
        at = AppTest.from_file(app, default_timeout=90)
        at.query_params.update({"scenario": "concurrency_cap_trap", "start": "baseline", **extra})
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert [e.value.replace("\\", "") for e in at.error] == [error]   # the page escapes markdown
