"""Hostile files the round-19 fuzz did not try (round 21): a named pipe nothing writes to, a 2 GiB sparse file
of NUL bytes, UTF-16 and Latin-1 text, nesting 10,000 deep, a number or a boolean where a document belongs, in
every reader of a user's file. Each defect found is one exact test here: the command ends with one line on
stderr and exit status 2, never a traceback, a wait without end or the file held in memory."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import twin.yaml_input as yaml_input
from twin.cli.main import main
from twin.errors import TwinInputError
from twin.yaml_input import open_text, read_text

SCENARIO = {
    "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
    "workload": {"arrivals": {"process": "poisson", "rate_per_s": 20}, "num_requests": 8,
                 "classes": [{"name": "chat", "share": 1.0, "prompt": {"suffix_tokens": 32},
                              "output_tokens": 4}]},
}


def refused(*args) -> str:
    res = CliRunner().invoke(main, [str(a) for a in args], prog_name="twin")
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exc_info
    lines = res.stderr.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1, (res.exit_code, res.stderr)
    return lines[0]


def sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)    # no disk used
    return path


# ---- a named pipe ------------------------------------------------------------------------------------------
@pytest.fixture
def short_wait(monkeypatch):
    monkeypatch.setattr(yaml_input, "PIPE_WAIT_S", 0.2)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.parametrize("read", [read_text, open_text])
def test_a_named_pipe_nothing_writes_to_is_one_line_not_a_wait(tmp_path, short_wait, read):
    os.mkfifo(tmp_path / "s.yaml")
    with pytest.raises(TwinInputError) as exc:
        read(tmp_path / "s.yaml", "scenario")
    assert str(exc.value) == (f"{tmp_path / 's.yaml'}: a pipe that gave nothing in 0.2 s (no writer?); the "
                              f"scenario must be a file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_nothing_writes_to_is_refused_by_run(tmp_path, short_wait):
    os.mkfifo(tmp_path / "s.yaml")
    assert refused("run", tmp_path / "s.yaml", "-q").endswith("a pipe that gave nothing in 0.2 s (no writer?); "
                                                              "the scenario must be a file")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_with_a_writer_is_read_whole(tmp_path):
    pipe = tmp_path / "s.yaml"
    os.mkfifo(pipe)
    text = "name: piped\n" * 20_000     # more than a pipe's buffer

    def write():
        with open(pipe, "w") as f:
            f.write(text)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert read_text(pipe, "scenario") == text
    finally:
        writer.join(timeout=10)


# ---- a huge file -------------------------------------------------------------------------------------------
def test_a_csv_trace_of_one_2_gib_line_is_refused_before_it_is_held_in_memory(tmp_path):
    """A sparse 2 GiB trace (under the 4 GiB trace limit) is one line of NUL bytes: the CSV reader held it
    whole (MemoryError); each line is now read with a length limit."""
    from twin.workload.trace_rows import MAX_LINE_CHARS

    sparse(tmp_path / "t.csv", 2 << 30)
    doc = {**SCENARIO, "workload": {"trace": {"path": "t.csv", "format": "azure"}}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    assert refused("run", tmp_path / "s.yaml", "-q").endswith(
        f"t.csv:1: longer than {MAX_LINE_CHARS:,} characters; a trace line may be at most that long")


def test_a_csv_line_at_the_limit_is_read(tmp_path, monkeypatch):
    import twin.workload.trace_rows as rows

    monkeypatch.setattr(rows, "MAX_LINE_CHARS", 64)
    path = tmp_path / "t.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "0.5,12,3\n")
    assert [row for _, row, _ in rows.csv_rows(path, ("TIMESTAMP",))] == [["0.5", "12", "3"]]
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens," + "x" * 64 + "\n")
    with pytest.raises(TwinInputError, match=r"t.csv:1: longer than 64 characters"):
        list(rows.csv_rows(path, ("TIMESTAMP",)))


# ---- a trace that is not a regular file --------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.parametrize("kind", ["a pipe", "a folder"])
def test_a_trace_that_is_a_pipe_or_a_folder_says_so_not_file_not_found(tmp_path, kind):
    """A trace is read twice (format from the header, then the rows), which a pipe cannot give; both said
    'file not found' for a path that exists."""
    os.mkfifo(tmp_path / "t.csv") if kind == "a pipe" else (tmp_path / "t.csv").mkdir()
    doc = {**SCENARIO, "workload": {"trace": {"path": "t.csv", "format": "azure"}}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    assert refused("run", tmp_path / "s.yaml", "-q") == (
        f"error: workload.trace.path: {tmp_path / 't.csv'} is {kind}; the trace must be a file")


def test_empirical_lengths_that_are_a_folder_say_so(tmp_path):
    (tmp_path / "l.csv").mkdir()
    cls = {"name": "chat", "share": 1.0, "prompt": {"suffix_tokens": {"empirical": {"path": "l.csv",
                                                                                    "column": "n"}}},
           "output_tokens": 4}
    doc = {**SCENARIO, "workload": {**SCENARIO["workload"], "classes": [cls]}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    assert refused("run", tmp_path / "s.yaml", "-q").endswith(
        f"empirical.path: {tmp_path / 'l.csv'} is a folder; the lengths must be a file")


# ---- result files (twin calibrate --from-results, twin.fitting.readers) -------------------------------------
@pytest.mark.parametrize("encoding", ["utf-16", "utf-32", "utf-8-sig"])
def test_a_result_file_with_a_byte_order_mark_reads_as_utf_8(tmp_path, encoding):
    """Every other reader of a user's text takes UTF-16 / UTF-32 with their mark (PowerShell's ``>`` writes
    UTF-16); the result readers said 'not UTF-8 text (byte 0)'."""
    import json

    from test_fitting_readers import bench_doc
    from twin.fitting.readers import read_results

    (tmp_path / "utf8").mkdir()
    (tmp_path / "utf8" / "r.json").write_text(json.dumps(bench_doc()))
    (tmp_path / "r.json").write_bytes(json.dumps(bench_doc()).encode(encoding))
    assert read_results(tmp_path / "r.json") == read_results(tmp_path / "utf8" / "r.json")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_result_path_that_is_a_pipe_says_so(tmp_path):
    from twin.fitting.readers import read_results

    os.mkfifo(tmp_path / "r.json")
    with pytest.raises(TwinInputError) as exc:
        read_results(tmp_path / "r.json")
    assert str(exc.value) == f"{tmp_path / 'r.json'}: not a regular file; give the result file itself"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_diagnose_and_acceptance_name_a_pipe_or_a_folder_not_no_such_file(tmp_path):
    os.mkfifo(tmp_path / "r.json")
    (tmp_path / "m.txt").mkdir()
    assert refused("diagnose", tmp_path / "r.json") == (f"error: {tmp_path / 'r.json'}: a pipe; give the result "
                                                         f"file itself")
    assert refused("calibrate", "--acceptance", tmp_path / "m.txt") == (
        f"error: --acceptance {tmp_path / 'm.txt'}: a folder; give the file itself")


# ---- the ground truth (benchmarks/fidelity_real.py --ground-truth DIR) --------------------------------------
def test_a_2_gib_silicon_measurements_file_is_refused_by_its_size(tmp_path):
    """The silicon CSV was read whole whatever its size (a 2 GiB file: MemoryError under a memory cap)."""
    from twin.fitting.silicon_rows import read_silicon

    sparse(tmp_path / "measurements.csv", 2 << 30)
    with pytest.raises(TwinInputError) as exc:
        read_silicon(tmp_path)
    assert str(exc.value) == (f"{tmp_path / 'measurements.csv'}: 2,147,483,648 bytes; a silicon measurements file "
                              f"may be at most 67,108,864 bytes")


def test_silicon_measurements_with_a_nul_or_latin_1_byte_are_named_by_line(tmp_path):
    from twin.fitting.silicon_rows import read_silicon

    path = tmp_path / "measurements.csv"
    path.write_bytes(b"id,silicon_data_source\n1,caf\xe9\n")
    with pytest.raises(TwinInputError, match=r"measurements.csv:2: not UTF-8 text \(byte 0xe9\)"):
        read_silicon(path)
    path.write_bytes(b"id,sili\x00con_data_source\n")
    with pytest.raises(TwinInputError, match=r"measurements.csv:1: a NUL character; not a text file"):
        read_silicon(path)


# ---- inference-perf folders (calibrate --from-results FOLDER, the ground truth's experiments) --------------
from tests.test_fitting_inference_perf import METRICS as STAGE_METRICS  # noqa: E402  (one stage's summary)


@pytest.fixture
def stages(tmp_path):
    from tests.fitting_helpers import write_config, write_stage

    d = tmp_path / "exp-7b"
    write_config(d, model="meta-llama/Llama-2-7b-hf", tp=1, groups=3, per_group=4, system_tokens=100,
                 question_tokens=400, output_tokens=201, stages=[(5.0, 60.0), (10.0, 60.0)],
                 server={"max_num_seqs": 64})
    for i, rate in enumerate((5.0, 10.0)):
        write_stage(d, i, rate=rate, duration_s=60.0, metrics=STAGE_METRICS, prompt_tokens=520, output_tokens=201)
    return d


@pytest.mark.parametrize("content, got", [(b"", "an empty file"), (b"- 1\n", "list"), (b"42\n", "int")])
def test_an_inference_perf_config_of_the_wrong_type_is_refused_not_read_as_no_settings(stages, content, got):
    """A config that was not a mapping was read as no settings at all (the server fitted at the twin's
    defaults)."""
    from twin.fitting.readers import read_results

    (stages / "exp-config.yaml").write_bytes(content)
    with pytest.raises(TwinInputError) as exc:
        read_results(stages)
    assert str(exc.value) == f"{stages / 'exp-config.yaml'}: expected a mapping of settings, got {got}"


@pytest.mark.parametrize("name", ["exp-config.yaml", "results_config.yaml", "results_stage_1_lifecycle_metrics.json"])
def test_a_config_or_stage_that_is_a_folder_is_refused_not_left_out(stages, name):
    """A stage or config file replaced by a folder (or a pipe, a broken link) was skipped silently: the fit ran
    on fewer stages, or on no server settings."""
    import shutil

    from twin.fitting.readers import read_results

    (stages / name).unlink()
    (stages / name).mkdir()
    what = "an inference-perf stage file" if "stage" in name else "an inference-perf config"
    with pytest.raises(TwinInputError) as exc:
        read_results(stages)
    assert str(exc.value) == f"{stages / name}: a folder; {what} must be a file"
    shutil.rmtree(stages / name)
    os.symlink(stages / "nowhere", stages / name)
    with pytest.raises(TwinInputError, match="a broken link;"):
        read_results(stages)


def test_ground_truth_stage_files_without_an_exp_config_are_refused(tmp_path, stages):
    """The ground truth's experiments are the folders with an exp-config.yaml; one without it was left out of
    the fit silently."""
    from twin.fitting.ground_truth import H100_FOLDER, h100_cases

    root = tmp_path / "gt" / H100_FOLDER
    root.mkdir(parents=True)
    stages.rename(root / "exp-7b")
    (root / "exp-7b" / "exp-config.yaml").unlink()
    (root / "notes").mkdir()      # a folder without stage files is not an experiment, as before
    with pytest.raises(TwinInputError) as exc:
        h100_cases(tmp_path / "gt")
    assert str(exc.value) == (f"{root / 'exp-7b'}: inference-perf stage files without an exp-config.yaml (the "
                              f"server's settings)")


def test_a_nul_character_in_a_csv_trace_is_refused_as_in_a_jsonl_one(tmp_path):
    """A NUL in a CSV trace's header reached the message raw ('cannot tell the trace format from the header
    (TIMESTAMP, Con<NUL>textTokens)'); JSONL traces already refused it."""
    from twin.workload import read_trace

    path = tmp_path / "t.csv"
    path.write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,1\x002,3\n")
    with pytest.raises(TwinInputError) as exc:
        read_trace(path)
    assert str(exc.value) == f"{path}:2: a NUL character; not a text file"


# ---- values on the command line: --set, --grid, --search ---------------------------------------------------
DEEP_VALUE = "[" * 3000
ALIAS_BOMB_VALUE = "[&a [x,x,x,x,x,x,x,x,x], " + ", ".join(
    f"&{k} [{', '.join(['*' + p] * 9)}]" for p, k in zip("abcdef", "bcdefg")) + "]"


@pytest.mark.parametrize("option, command", [
    ("--set", ["run", "{s}", "-q"]),
    ("--grid", ["sweep", "{s}", "--backend", "serial", "-q"]),
    ("--search", ["plan", "{s}", "--backend", "serial", "-q", "--target-rate", "5"]),
])
def test_a_value_nested_3000_deep_is_one_line_not_a_recursion_error(tmp_path, option, command):
    """A value nested past the YAML parser's depth was a RecursionError traceback; an alias bomb in a value
    was expanded unchecked (a file's aliases are counted)."""
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(SCENARIO))
    args = [a.replace("{s}", str(tmp_path / "s.yaml")) for a in command]
    assert refused(*args, option, f"server.max_num_seqs={DEEP_VALUE}") == (
        f"error: {option} server.max_num_seqs: the value is nested too deeply")
    assert refused(*args, option, f"server.max_num_seqs={ALIAS_BOMB_VALUE}") == (
        f"error: {option} server.max_num_seqs: YAML expands to more than 1,000,000 values (through aliases); "
        f"at most 1,000,000")


def test_a_key_given_twice_in_a_set_value_is_refused_not_the_last_kept(tmp_path):
    """``--set 'server={max_num_seqs: 4, max_num_seqs: 8}'`` ran with 8 (the YAML file reader refuses it)."""
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(SCENARIO))
    assert refused("run", tmp_path / "s.yaml", "-q", "--set", "server={max_num_seqs: 4, max_num_seqs: 8}") == (
        "error: --set server: the key 'max_num_seqs' appears twice in one mapping; give each key once")


def test_plain_and_malformed_option_values_parse_as_before():
    from twin.plan.grid import parse_grid_options
    from twin.yaml_input import parse_set_options

    assert parse_set_options(["server.max_num_seqs=8", "name=a: b: c", "seed=", "x.y=[1, {a: 2}]"]) == {
        "server": {"max_num_seqs": 8}, "name": "a: b: c", "seed": "", "x": {"y": [1, {"a": 2}]}}
    assert parse_grid_options(["server.max_num_seqs=4, 8", "server.block_size=[16, 32]"]) == [
        ("server.max_num_seqs", [4, 8]), ("server.block_size", [16, 32])]
    with pytest.raises(TwinInputError, match="the bracketed value is not a YAML list"):
        parse_grid_options(["server.max_num_seqs=[4, 8"])


# ---- a model config or GPU spec that is not a file ---------------------------------------------------------
@pytest.mark.parametrize("field, name, expected", [
    ("model", "config.json", "model: the folder '{p}' holds no config.json"),
    ("gpu", "gpu.yaml", "gpu: spec file '{p}' is a folder; give a file"),
])
def test_a_model_config_or_gpu_spec_that_is_a_folder_says_so(tmp_path, field, name, expected):
    """Both said the path was unknown or did not exist, for a path that exists."""
    (tmp_path / name).mkdir()
    doc = {**SCENARIO, "deployment": {**SCENARIO["deployment"], field: name}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    assert refused("run", tmp_path / "s.yaml", "-q").endswith(expected.format(p=tmp_path / name))
