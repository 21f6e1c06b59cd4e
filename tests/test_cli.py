"""The ``twin`` command line: bad input gives one line naming the field and exit status 2 (never a traceback),
``twin list`` and ``twin compare`` work, ``twin run`` writes vllm-bench-serve JSON and the tables, and the same
seed gives byte-identical output across processes (string hashing is salted per process, so this also shows no
result depends on hash values)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from twin.cli.main import main
from twin.results.metric_keys import BENCH_SERVE_PER_REQUEST_KEYS, BENCH_SERVE_SCALAR_KEYS
from twin.results.records import REQUEST_FRAME_COLUMNS, STEP_COLUMN_NAMES

ROOT = Path(__file__).resolve().parent.parent
# the console script's entry point, run by this interpreter
TWIN = [sys.executable, "-c", "import sys; from twin.cli.main import main; sys.argv[0] = 'twin'; main()"]

GOOD = """\
name: tiny
deployment: {gpu: H100-SXM, model: llama-3.1-8b}
server: {max_num_seqs: 8}
workload:
  arrivals: {process: poisson, rate_per_s: 20}
  num_requests: 40
  classes:
    - {name: a, share: 1.0, prompt: {shared_prefix_tokens: 256, suffix_tokens: {uniform: [10, 200]}},
       output_tokens: {uniform: [1, 60]}}
slo: {ttft_ms: 500, tpot_ms: 50}
seed: 1
variants:
  wide: {server: {max_num_seqs: 64}}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def assert_one_line_error(result, *needles: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.stderr)
    assert isinstance(result.exception, SystemExit)
    err = result.stderr.strip()
    assert "\n" not in err, err
    assert err.startswith("error: "), err
    assert "Traceback" not in result.output + result.stderr
    for needle in needles:
        assert needle in err, (needle, err)
    return err


BAD_SCENARIOS = {
    "unknown-key": (GOOD.replace("seed: 1", "seed: 1\nbogus: 3"), ["unknown field 'bogus'"]),
    "unknown-server-key": (GOOD.replace("max_num_seqs: 8}", "max_num_seq: 8}"), ["server", "'max_num_seq'"]),
    "negative-rate": (GOOD.replace("rate_per_s: 20", "rate_per_s: -3"), ["workload.arrivals.rate_per_s", "-3"]),
    "zero-seqs": (GOOD.replace("max_num_seqs: 8}", "max_num_seqs: 0}"), ["server.max_num_seqs", ">= 1"]),
    "zero-seqs-in-variant": (GOOD.replace("max_num_seqs: 64", "max_num_seqs: 0"),
                             ["[variant wide]", "server.max_num_seqs"]),
    "budget-below-seqs": (GOOD.replace("max_num_seqs: 8}", "max_num_seqs: 8, max_num_batched_tokens: 4}"),
                          ["max_num_batched_tokens", "max_num_seqs"]),
    "no-chunking-budget": (GOOD.replace("max_num_seqs: 8}", "max_num_seqs: 8, enable_chunked_prefill: false, "
                                                            "max_model_len: 8192, max_num_batched_tokens: 2048}"),
                           ["max_num_batched_tokens", "max_model_len"]),
    "model-does-not-fit": (GOOD.replace("gpu: H100-SXM, model: llama-3.1-8b", "gpu: L4, model: llama-3.1-70b"),
                           ["llama-3.1-70b", "L4", "tensor_parallel_size"]),
    "unknown-gpu": (GOOD.replace("gpu: H100-SXM", "gpu: H900"), ["gpu", "H900"]),
    "shares": (GOOD.replace("share: 1.0", "share: 0.5"), ["workload.classes", "sum to 1"]),
    "malformed-yaml": ("name: x\nworkload: {arrivals: [1, 2\n", ["malformed YAML", ".yaml:"]),
    "not-a-mapping": ("- 1\n- 2\n", ["mapping"]),
}


@pytest.mark.parametrize("case", list(BAD_SCENARIOS))
def test_bad_scenario_is_one_line_naming_the_field(tmp_path, case):
    text, needles = BAD_SCENARIOS[case]
    path = write(tmp_path, f"{case}.yaml", text)
    result = invoke("run", path, "--all-variants", "-q")
    assert_one_line_error(result, *needles)
    assert result.stdout == "", result.stdout


def test_broken_trace_row_names_file_line_and_column(tmp_path):
    write(tmp_path, "bad.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                               "2023-11-16 18:15:46.6805900,374,44\n"
                               "2023-11-16 18:15:47.1000000,abc,44\n")
    path = write(tmp_path, "trace.yaml", "name: t\nworkload:\n  trace: {path: bad.csv, format: azure}\n")
    assert_one_line_error(invoke("run", path, "-q"), "bad.csv:3", "ContextTokens", "abc")


def test_missing_trace_file(tmp_path):
    path = write(tmp_path, "trace.yaml", "name: t\nworkload:\n  trace: {path: nowhere.csv}\n")
    assert_one_line_error(invoke("run", path, "-q"), "workload.trace.path", "nowhere.csv")


@pytest.mark.parametrize("args, needles", [
    (["-v", "nope"], ["no variant 'nope'", "wide"]),
    (["--set", "server.max_num_seqs"], ["--set", "key.path=value"]),
    (["--set", "server.bogus=3"], ["server", "unknown field 'bogus'"]),
    (["--set", "server.max_num_seqs=abc"], ["server.max_num_seqs", "integer"]),
    (["--set", "workload.arrivals.rate_per_s=0"], ["workload.arrivals.rate_per_s", "> 0"]),
    (["--json", "no/such/folder/out.json"], ["--json", "does not exist"]),
], ids=["unknown-variant", "set-without-value", "set-unknown-field", "set-bad-type", "set-zero-rate",
        "json-folder"])
def test_bad_options_are_one_line(tmp_path, args, needles):
    path = write(tmp_path, "good.yaml", GOOD)
    assert_one_line_error(invoke("run", path, "-q", *args), *needles)


def test_unknown_scenario_name_lists_the_bundled_ones():
    assert_one_line_error(invoke("run", "no_such_scenario", "-q"), "no_such_scenario", "concurrency_cap_trap")


def test_real_process_bad_input_no_traceback_one_line_even_on_a_narrow_terminal(tmp_path):
    text, _ = BAD_SCENARIOS["model-does-not-fit"]
    path = write(tmp_path, "nofit.yaml", text)
    env = {**os.environ, "COLUMNS": "40"}
    proc = subprocess.run([*TWIN, "run", path, "-q"], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "tensor_parallel_size" in proc.stderr


def test_list_shows_scenarios_gpus_and_models():
    env = {**os.environ, "COLUMNS": "300"}
    proc = subprocess.run([*TWIN, "list"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for name in ("concurrency_cap_trap", "static_vs_continuous", "prefix_caching_agentic", "chunked_prefill_itl",
                 "H100-SXM", "llama-3.1-8b", "caching-on-timestamped"):
        assert name in out, name
    assert "invalid" not in out
    for what in ("scenarios", "gpus", "models"):
        assert invoke("list", what).exit_code == 0
    assert invoke("list", "planets").exit_code == 2


def test_run_writes_bench_serve_json_and_tables(tmp_path):
    path = write(tmp_path, "good.yaml", GOOD)
    out, req, steps = tmp_path / "out.json", tmp_path / "r.csv", tmp_path / "s.csv"
    result = invoke("run", path, "-q", "--json", str(out), "--requests-out", str(req), "--steps-out", str(steps))
    assert result.exit_code == 0, result.output + result.stderr
    data = json.loads(out.read_text())
    for key in (*BENCH_SERVE_SCALAR_KEYS, *BENCH_SERVE_PER_REQUEST_KEYS):
        assert key in data, key
    assert data["completed"] == 40 and data["failed"] == 0
    assert len(data["ttfts"]) == len(data["itls"]) == len(data["input_lens"]) == 40
    assert data["request_goodput"] is not None and data["twin"]["prefix_cache_hit_rate"] > 0
    requests = pd.read_csv(req)
    assert list(requests.columns) == list(REQUEST_FRAME_COLUMNS)
    assert len(requests) == 40 and (requests["status"] == "finished").all()
    assert requests["ttft_s"].tolist() == pytest.approx(data["ttfts"])
    step_table = pd.read_csv(steps)
    assert list(step_table.columns) == list(STEP_COLUMN_NAMES)
    assert len(step_table) == data["twin"]["num_steps"]
    assert step_table["num_decode_tokens"].sum() + 40 == data["total_output_tokens"]  # first tokens: prefill


def test_compare_and_all_variants(tmp_path):
    path = write(tmp_path, "good.yaml", GOOD)
    out = tmp_path / "cmp.json"
    result = invoke("compare", path, "-q", "--json", str(out))
    assert result.exit_code == 0, result.output + result.stderr
    assert "wide" in result.stdout
    data = json.loads(out.read_text())
    assert set(data["variants"]) == {"baseline", "wide"}
    assert data["variants"]["wide"]["twin"]["config"]["server"]["max_num_seqs"] == 64
    result = invoke("run", path, "-q", "--all-variants", "--set", "workload.num_requests=10")
    assert result.exit_code == 0 and "wide" in result.stdout


def test_same_seed_same_bytes_across_processes(tmp_path):
    """Two processes with different string-hash salts: identical JSON and tables, byte for byte (the JSON
    carries no wall-clock field). The prefix-caching scenario makes block hashes matter."""
    outputs = []
    for salt in ("1", "2"):
        d = tmp_path / salt
        d.mkdir()
        env = {**os.environ, "PYTHONHASHSEED": salt}
        proc = subprocess.run(
            [*TWIN, "run", "prefix_caching_agentic", "-v", "caching-on", "-q", "--set", "workload.duration_s=15",
             "--json", str(d / "out.json"), "--requests-out", str(d / "r.csv"), "--steps-out", str(d / "s.csv")],
            capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outputs.append([(d / f).read_bytes() for f in ("out.json", "r.csv", "s.csv")])
    assert outputs[0] == outputs[1]
    data = json.loads(outputs[0][0])
    assert data["twin"]["prefix_cache_hit_rate"] > 0.5
    assert not any("wall" in key for key in data["twin"])


def test_requests_out_with_two_variants_keeps_both(tmp_path):
    """Every run lands in the tables, each row saying which variant and replication it came from; --json
    writes one vllm bench serve file per variant."""
    path = write(tmp_path, "good.yaml", GOOD)
    req, steps, out = tmp_path / "r.csv", tmp_path / "s.csv", tmp_path / "out.json"
    result = invoke("run", path, "-q", "--all-variants", "--requests-out", str(req), "--steps-out", str(steps),
                    "--json", str(out))
    assert result.exit_code == 0, result.output + result.stderr
    requests = pd.read_csv(req)
    assert list(requests.columns) == ["variant", "replication", *REQUEST_FRAME_COLUMNS]
    assert requests.groupby("variant").size().to_dict() == {"baseline": 40, "wide": 40}
    assert set(requests["replication"]) == {0}
    step_table = pd.read_csv(steps)
    assert list(step_table.columns) == ["variant", "replication", *STEP_COLUMN_NAMES]
    assert not out.exists()
    docs = {name: json.loads((tmp_path / f"out.{name}.json").read_text()) for name in ("baseline", "wide")}
    assert docs["wide"]["twin"]["config"]["server"]["max_num_seqs"] == 64
    assert docs["baseline"]["twin"]["config"]["server"]["max_num_seqs"] == 8
    for name, doc in docs.items():
        assert doc["completed"] == 40 and len(doc["ttfts"]) == 40, name
        assert len(step_table[step_table["variant"] == name]) == doc["twin"]["num_steps"]
        # the table's rows are that variant's run, not the first one's
        assert requests[requests["variant"] == name]["ttft_s"].tolist() == pytest.approx(doc["ttfts"])
    assert "wrote " + str(tmp_path / "out.wide.json") in " ".join(result.stdout.split())


def test_requests_out_keeps_every_replication(tmp_path):
    path = write(tmp_path, "good.yaml", GOOD)
    req = tmp_path / "r.csv"
    result = invoke("run", path, "-q", "-v", "wide", "--replications", "3", "--requests-out", str(req))
    assert result.exit_code == 0, result.output + result.stderr
    requests = pd.read_csv(req)
    assert requests.groupby(["variant", "replication"]).size().to_dict() == {
        ("wide", 0): 40, ("wide", 1): 40, ("wide", 2): 40}
    # independent replications: different seeds, different arrivals
    arrivals = [requests[requests["replication"] == r]["arrival_s"].tolist() for r in range(3)]
    assert arrivals[0] != arrivals[1] != arrivals[2]


def test_variant_json_path():
    from twin.cli.outputs import variant_json_path

    assert variant_json_path("d/out.json", "wide") == Path("d/out.wide.json")
    assert variant_json_path("out", "a/b c") == Path("out.a_b_c.json")


def test_every_command_is_listed_and_found_by_name():
    """The commands in their own modules are imported when named; each name finds the command it says."""
    from twin.cli.main import LAZY_COMMANDS

    result = invoke("--help")
    assert result.exit_code == 0
    for name in ["run", "compare", "list", *LAZY_COMMANDS]:
        assert f"  {name} " in result.output, name
    with main.make_context("twin", ["list"]) as ctx:
        for name in LAZY_COMMANDS:
            assert main.get_command(ctx, name).name == name
    assert invoke("plan", "--help").exit_code == 0


def test_a_run_imports_neither_the_other_commands_nor_the_progress_bar(tmp_path):
    """`twin run` without a terminal (no progress bar) leaves plan's, sweep's, calibrate's and rich.progress's
    imports out of its start-up."""
    scenario = write(tmp_path, "s.yaml", GOOD)
    code = ("import sys; from twin.cli.main import main; sys.argv = ['twin', 'run', sys.argv[1]]\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "print('LOADED', sorted(m for m in ('twin.cli.plan', 'twin.cli.sweep', 'twin.cli.calibrate', "
            "'twin.cli.protocol', 'twin.cli.validate', 'rich.progress') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, scenario], capture_output=True, text=True, check=True,
                         stdin=subprocess.DEVNULL)
    assert "LOADED []" in out.stdout, out.stdout[-500:]
