"""Every input path validated up front: encodings, sizes and counts with stated limits, invalid trace rows
named by file, line and column, and click's own usage errors as one line. Each bad input ends in exit 2
with one line on stderr that names the problem (the fuzz suite in tests/fuzz explores around these)."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from twin.cli.main import main
from twin.plan.grid import MAX_GRID_POINTS
from twin.workload.limits import MAX_REQUESTS
from twin.workload.trace_rows import MAX_TOKEN_COUNT
from twin.yaml_input import MAX_INPUT_BYTES, MAX_YAML_NODES

SCENARIO = {
    "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
    "workload": {"arrivals": {"process": "poisson", "rate_per_s": 20}, "num_requests": 8,
                 "classes": [{"name": "chat", "share": 1.0, "prompt": {"suffix_tokens": 32},
                              "output_tokens": 4}]},
}


def twin(*args) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, [str(a) for a in args], prog_name="twin")
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exc_info
    return res.exit_code, res.stdout, res.stderr


def refused(*args) -> str:
    code, _, err = twin(*args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (code, err)
    return lines[0]


def scenario_file(tmp_path, data=None, **workload) -> str:
    doc = json.loads(json.dumps(data or SCENARIO))
    doc["workload"].update(workload)
    if "trace" in workload:
        del doc["workload"]["classes"]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


# ---- encodings ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-32"])
def test_a_scenario_with_a_byte_order_mark_is_read(tmp_path, encoding):
    path = tmp_path / "s.yaml"
    path.write_bytes(yaml.safe_dump(SCENARIO).encode(encoding))
    assert twin("run", path, "-q")[0] == 0


def test_bytes_that_are_not_utf8_are_refused_with_their_line(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_bytes(yaml.safe_dump(SCENARIO).encode() + b"# caf\xe9\n")
    line = refused("run", path, "-q")
    assert line.endswith(f"{path}:{yaml.safe_dump(SCENARIO).count(chr(10)) + 1}: not UTF-8 text (byte 0xe9); "
                         "save the file as UTF-8")


def test_a_trace_in_latin1_or_with_a_nul_is_refused_and_one_in_utf16_is_read(tmp_path):
    (tmp_path / "t.csv").write_bytes("num_prefill_tokens,num_decode_tokens\n10,5\n".encode("utf-16"))
    path = scenario_file(tmp_path, trace={"path": "t.csv"}, num_requests=None)
    assert twin("run", path, "-q")[0] == 0
    (tmp_path / "t.csv").write_bytes(b"num_prefill_tokens,num_decode_tokens\n10,5\n12,\xe96\n")
    assert refused("run", path, "-q").endswith("t.csv:3: not UTF-8 text (byte 0xe9); save the file as UTF-8")
    (tmp_path / "t.csv").write_bytes(b"num_prefill_tokens,num_decode_tokens\n10,5\x00\n")
    assert refused("run", path, "-q").endswith("t.csv:2: a NUL character; not a text file")


# ---- sizes and counts --------------------------------------------------------------------------------------
def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "s.yaml"
    with open(path, "wb") as f:
        f.truncate(MAX_INPUT_BYTES + 1)  # sparse: no disk used
    assert refused("run", path, "-q").endswith(
        f"{MAX_INPUT_BYTES + 1:,} bytes; a scenario may be at most {MAX_INPUT_BYTES:,} bytes")


def test_yaml_aliases_that_expand_past_the_limit_are_refused(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    path = tmp_path / "s.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert refused("run", path, "-q").endswith(
        f"YAML expands to more than {MAX_YAML_NODES:,} values (through aliases); at most {MAX_YAML_NODES:,}")


def test_request_counts_over_the_limit_are_refused_up_front(tmp_path):
    line = refused("run", scenario_file(tmp_path, num_requests=MAX_REQUESTS + 1), "-q")
    assert line.endswith(f"workload.num_requests: must be <= {MAX_REQUESTS} (got {MAX_REQUESTS + 1})")
    line = refused("run", scenario_file(tmp_path, num_requests=None, duration_s=1e9), "-q")
    assert f"about 20,000,000,000 requests (rate x duration_s); one run simulates at most {MAX_REQUESTS:,}" in line


def test_replicas_and_grids_over_their_limits_are_refused(tmp_path):
    path = scenario_file(tmp_path)
    assert refused("run", path, "-q", "--set", "deployment.replicas=4097").endswith(
        "deployment.replicas: must be <= 4096 (got 4097)")
    values = ",".join(str(v) for v in range(1, 101))
    line = refused("sweep", path, "--backend", "serial", "-q", "--grid", f"server.max_num_seqs={values}",
                   "--grid", f"server.max_num_batched_tokens={values},{values.replace(',', '0,')}0")
    assert line.endswith(f"grid: 100 x 200 = 20,000 points; a sweep or plan search may have at most "
                         f"{MAX_GRID_POINTS:,}")


def test_a_grid_value_is_checked_before_anything_runs(tmp_path):
    line = refused("sweep", scenario_file(tmp_path), "--backend", "serial", "-q", "--grid",
                   "server.max_num_seqs=4,-2")
    assert line.endswith("grid server.max_num_seqs=-2: server.max_num_seqs: must be >= 1 (got -2)")


# ---- trace rows ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("row, message", [
    ("10,-5", "t.csv:3: column 'num_decode_tokens' must be >= 0 (got -5)"),
    ("10,1.5", "t.csv:3: column 'num_decode_tokens' must be a whole number of tokens (got '1.5')"),
    (f"{2**64},5", f"t.csv:3: column 'num_prefill_tokens' must be <= {MAX_TOKEN_COUNT:,} tokens (got {2**64:,})"),
    ("10", "t.csv:3: column 'num_decode_tokens' is missing (row has 1 of 2 fields)"),
    ('"10,5', "t.csv:3: not a CSV row (unexpected end of data)"),
])
def test_an_invalid_trace_row_names_file_line_and_column(tmp_path, row, message):
    (tmp_path / "t.csv").write_text(f"num_prefill_tokens,num_decode_tokens\n10,5\n{row}\n")
    path = scenario_file(tmp_path, trace={"path": "t.csv"}, num_requests=None)
    assert refused("run", path, "-q").endswith(message)


def test_rows_left_out_by_an_explicit_policy_are_counted_on_stderr(tmp_path):
    (tmp_path / "t.csv").write_text("num_prefill_tokens,num_decode_tokens\n10,5\n12,0\n13,0\n")
    path = scenario_file(tmp_path, trace={"path": "t.csv", "zero_output": "skip"}, num_requests=None)
    code, out, err = twin("run", path, "-q")
    assert code == 0 and err.strip() == (f"warning: {tmp_path / 't.csv'}: 2 rows with num_decode_tokens == 0 "
                                         "left out (zero_output: skip)")


# ---- types and the command line -----------------------------------------------------------------------------
def test_true_where_a_number_belongs_is_refused(tmp_path):
    assert refused("run", scenario_file(tmp_path), "-q", "--set", "deployment.replicas=true").endswith(
        "deployment.replicas: must be a number, not true")


def test_click_usage_errors_are_one_line():
    assert refused("run", "x.yaml", "--replications", "0") == (
        "error: Invalid value for '--replications': 0 is not in the range 1<=x<=1000. (see twin run --help)")
    assert refused("bogus") == "error: No such command 'bogus'. (see twin --help)"
