"""Trace readers: exact counts and spot values on the shared traces (checked by an independent method),
policies (zero outputs, Mooncake hash ids), broken files, time scaling and windows, trace folder."""

import csv
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from twin.errors import TwinInputError
from twin.workload import ClosedLoopWorkload, TraceWarning, build_workload, read_trace, traces_dir
from twin.workload.paths import expand_path
from twin.workload.traces import _read_cached

ROWS = {
    "azure_llm_2023_code.csv": 8819,
    "azure_llm_2023_conv.csv": 19366,
    "mooncake_fast25_conversation_trace.jsonl": 12031,
    "mooncake_fast25_synthetic_trace.jsonl": 3993,
    "mooncake_arxiv_trace_first1000.jsonl": 1000,
    "vidur_arxiv_summarization_lengths.csv": 28257,
}


@pytest.fixture(scope="module")
def shared():
    d = traces_dir()
    if not (d / "azure_llm_2023_conv.csv").is_file():
        pytest.skip(f"shared traces not found at {d} (set TWIN_TRACES_DIR)")
    return d


# ---- shared traces ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(ROWS))
def test_row_counts(shared, name):
    assert len(read_trace(shared / name)) == ROWS[name]


@pytest.mark.parametrize("name", ["azure_llm_2023_code.csv", "azure_llm_2023_conv.csv"])
def test_azure_values(shared, name):
    tr = read_trace(shared / name)
    assert tr.format == "azure"
    df = pd.read_csv(shared / name)
    stamps = pd.to_datetime(df["TIMESTAMP"])
    rel = (stamps - stamps.iloc[0]).dt.total_seconds().to_numpy()
    assert tr.arrival_s[0] == 0.0
    assert np.allclose(tr.arrival_s, rel, atol=1e-6)
    assert tr.prompt_tokens.sum() == df["ContextTokens"].sum()
    assert tr.output_tokens.sum() == df["GeneratedTokens"].sum()
    assert list(tr.lines[:2]) == [2, 3]


def test_azure_conv_spot_values(shared):
    tr = read_trace(shared / "azure_llm_2023_conv.csv")
    with open(shared / "azure_llm_2023_conv.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    last = rows[-1]["TIMESTAMP"]  # e.g. 2023-11-16 19:14:08.4025270; same day as the first row
    first = rows[0]["TIMESTAMP"]

    def sod(s):
        h, m, sec = s.split(" ")[1].split(":")
        return int(h) * 3600 + int(m) * 60 + float(sec)

    assert first[:10] == last[:10]
    assert tr.arrival_s[-1] == pytest.approx(sod(last) - sod(first), abs=1e-9)
    assert tr.prompt_tokens[-1] == int(rows[-1]["ContextTokens"])
    assert tr.output_tokens[-1] == int(rows[-1]["GeneratedTokens"])


def test_azure_conv_is_read_once_per_file_state(shared):
    """Read speed is a benchmark's business (a timed assert failed on a loaded machine); what a test can pin is
    that a second read of the unchanged file is the cached parse, not another pass over its 19,366 rows."""
    _read_cached.cache_clear()
    first = read_trace(shared / "azure_llm_2023_conv.csv")
    again = read_trace(shared / "azure_llm_2023_conv.csv")
    assert len(first.arrival_s) == 19366
    assert _read_cached.cache_info().hits == 1 and _read_cached.cache_info().misses == 1
    assert np.array_equal(first.arrival_s, again.arrival_s)


@pytest.mark.parametrize("name", ["mooncake_fast25_conversation_trace.jsonl",
                                  "mooncake_fast25_synthetic_trace.jsonl",
                                  "mooncake_arxiv_trace_first1000.jsonl"])
def test_mooncake_values(shared, name):
    tr = read_trace(shared / name)
    rows = [json.loads(line) for line in open(shared / name)]
    assert tr.format == "mooncake" and tr.block_size == 512
    assert tr.arrival_s[-1] == pytest.approx((rows[-1]["timestamp"] - rows[0]["timestamp"]) / 1000)
    assert tr.prompt_tokens.sum() == sum(r["input_length"] for r in rows)
    assert tr.output_tokens.sum() == sum(r["output_length"] for r in rows)
    for i in (0, 1, len(rows) // 2, len(rows) - 1):
        segs = tr.prompt_segments(i, request_id=i)
        assert [k for k, _ in segs] == [("mc", h) for h in rows[i]["hash_ids"]]
        assert sum(n for _, n in segs) == rows[i]["input_length"]
        assert all(n == 512 for _, n in segs[:-1]) and 1 <= segs[-1][1] <= 512


def test_mooncake_shared_prefix_maps_onto_any_block_size(shared):
    specs = build_workload({"trace": {"path": "{traces}/mooncake_fast25_conversation_trace.jsonl",
                                      "max_requests": 2}})
    assert specs[0].prompt_segments[0] == specs[1].prompt_segments[0] == (("mc", 0), 512)
    assert specs[0].prompt_segments[1] != specs[1].prompt_segments[1]
    a, b = (s.make_request() for s in specs)
    for bs in (16, 32, 256, 512):
        assert a.prefix_identity(bs, bs, None) == b.prefix_identity(bs, bs, None)
    assert a.prefix_identity(1024, 1024, None) != b.prefix_identity(1024, 1024, None)


def test_vidur_lengths(shared):
    tr = read_trace(shared / "vidur_arxiv_summarization_lengths.csv")
    assert tr.format == "lengths" and not tr.has_timestamps
    with open(shared / "vidur_arxiv_summarization_lengths.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tr.prompt_tokens.sum() == sum(int(r["num_prefill_tokens"]) for r in rows)
    assert tr.output_tokens.sum() == sum(int(r["num_decode_tokens"]) for r in rows)
    specs = build_workload({"trace": {"path": "{traces}/vidur_arxiv_summarization_lengths.csv"},
                            "arrivals": {"process": "poisson", "rate_per_s": 4}, "num_requests": 500})
    assert len(specs) == 500
    assert [s.num_prompt_tokens for s in specs] == [int(r["num_prefill_tokens"]) for r in rows[:500]]
    gaps = np.diff([s.arrival_s for s in specs])
    assert gaps.mean() == pytest.approx(0.25, rel=0.2)


def test_replay_shared_with_scale_and_window(shared):
    specs = build_workload({"trace": {"path": "{traces}/azure_llm_2023_code.csv", "time_scale": 2.0,
                                      "start_s": 600, "window_s": 300}})
    tr = read_trace(shared / "azure_llm_2023_code.csv")
    mask = (tr.arrival_s >= 600) & (tr.arrival_s < 900)
    assert len(specs) == int(mask.sum())
    assert specs[0].arrival_s == pytest.approx((tr.arrival_s[mask][0] - 600) / 2)
    assert all(s.arrival_s < 150 for s in specs)
    assert [s.output_tokens for s in specs] == list(tr.output_tokens[mask])


# ---- small files written here ---------------------------------------------------------------------------------
def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


AZURE = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
         "2023-11-16 23:59:58.5000000,100,10\n"
         "2023-11-16 23:59:59.7500000,200,20\n"
         "2023-11-17 00:00:01.0000001,300,30\n"
         "2023-11-17 00:00:04.0000000,400,40\n")


def test_azure_small_crosses_midnight(tmp_path):
    tr = read_trace(write(tmp_path, "a.csv", AZURE))
    assert np.allclose(tr.arrival_s, [0.0, 1.25, 2.5000001, 5.5], atol=1e-9)
    assert list(tr.lines) == [2, 3, 4, 5]


def test_time_scale_start_window_max(tmp_path):
    p = write(tmp_path, "a.csv", AZURE)
    specs = build_workload({"trace": {"path": str(p), "time_scale": 2.0}})
    assert [s.arrival_s for s in specs] == pytest.approx([0.0, 0.625, 1.25000005, 2.75])
    assert [s.prompt_segments for s in specs][:1] == [((("u", 0), 100),)]
    assert all(s.task_class == "trace" and s.session_id is None for s in specs)
    specs = build_workload({"trace": {"path": str(p), "start_s": 1.0, "window_s": 2.0}})
    assert [s.num_prompt_tokens for s in specs] == [200, 300]
    assert specs[0].arrival_s == pytest.approx(0.25)
    specs = build_workload({"trace": {"path": str(p), "max_requests": 3}, "duration_s": 2.0})
    assert [s.num_prompt_tokens for s in specs] == [100, 200]
    specs = build_workload({"trace": {"path": str(p), "task_class": "code", "priority": 2},
                            "prefix_header": "timestamp", "header_tokens": 16, "num_requests": 2})
    assert specs[1].prompt_segments == ((("ts", 1), 16), (("u", 1), 200))
    assert specs[1].num_prompt_tokens == 216 and specs[1].task_class == "code" and specs[1].priority == 2
    with pytest.raises(TwinInputError, match="workload.trace: no rows"):
        build_workload({"trace": {"path": str(p), "start_s": 100}})


def test_retimed_trace_and_closed_loop_over_trace(tmp_path):
    p = write(tmp_path, "a.csv", AZURE)
    specs = build_workload({"trace": {"path": str(p)}, "arrivals": {"process": "constant", "rate_per_s": 10}})
    assert [s.arrival_s for s in specs] == pytest.approx([0.0, 0.1, 0.2, 0.3])
    with pytest.raises(TwinInputError, match="workload.trace.time_scale: has no effect"):
        build_workload({"trace": {"path": str(p), "time_scale": 2},
                        "arrivals": {"process": "constant", "rate_per_s": 10}})
    w = build_workload({"trace": {"path": str(p)}, "arrivals": {"process": "closed_loop", "concurrency": 2}})
    assert isinstance(w, ClosedLoopWorkload)
    got = [w.next_request(0, 0.0), w.next_request(1, 0.0), w.next_request(0, 5.0), w.next_request(1, 6.0),
           w.next_request(0, 7.0)]
    assert [s.num_prompt_tokens for s in got[:4]] == [100, 200, 300, 400] and got[4] is None
    assert [s.arrival_s for s in got[:4]] == [0.0, 0.0, 5.0, 6.0]


def test_mooncake_small_and_hash_mismatch(tmp_path):
    lines = [{"timestamp": 1000, "input_length": 1030, "output_length": 5, "hash_ids": [7, 8, 9]},
             {"timestamp": 1500, "input_length": 512, "output_length": 3, "hash_ids": [7]},
             {"timestamp": 2500, "input_length": 40, "output_length": 3}]
    p = write(tmp_path, "m.jsonl", "".join(json.dumps(d) + "\n" for d in lines))
    tr = read_trace(p)
    assert list(tr.arrival_s) == [0.0, 0.5, 1.5]
    assert tr.prompt_segments(0, 0) == ((("mc", 7), 512), (("mc", 8), 512), (("mc", 9), 6))
    assert tr.prompt_segments(1, 1) == ((("mc", 7), 512),)
    assert tr.prompt_segments(2, 2) == ((("u", 2), 40),)
    bad = write(tmp_path, "bad.jsonl", json.dumps(lines[1]) + "\n" +
                json.dumps({"timestamp": 2000, "input_length": 2000, "output_length": 1, "hash_ids": [1, 2]}) + "\n")
    with pytest.raises(TwinInputError, match=r"bad.jsonl:2: column 'hash_ids' has 2 ids but input_length 2000 "
                                             r"needs ceil\(2000/512\) = 4"):
        read_trace(bad)
    other = write(tmp_path, "other.jsonl", json.dumps(
        {"timestamp": 0, "input_length": 2000, "output_length": 1, "hash_ids": [1, 2]}) + "\n")
    assert read_trace(other, block_size=1024).prompt_segments(0, 0) == ((("mc", 1), 1024), (("mc", 2), 976))


BURST = ("Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
         "5,s1,1.2,ChatGPT,100,50,150,Conversation log\n"
         "7.5,s2,0.8,GPT-4,200,0,200,Conversation log\n"
         "9,s1,2.0,ChatGPT,300,60,360,Conversation log\n"
         "12,,1.0,ChatGPT,50,5,55,API log\n")


def test_burstgpt_and_zero_output_policy(tmp_path):
    p = write(tmp_path, "burst.csv", BURST)
    with pytest.raises(TwinInputError, match=r"burst.csv:3: column 'Response tokens' is 0; .*zero_output"):
        read_trace(p)
    with pytest.warns(TraceWarning, match="1 row with Response tokens == 0 served as 1-token"):
        tr = read_trace(p, zero_output="one")
    assert tr.format == "burstgpt"
    assert list(tr.arrival_s) == [0.0, 2.5, 4.0, 7.0]
    assert list(tr.output_tokens) == [50, 1, 60, 5]
    assert tr.session_ids == [0, 1, 0, None]
    with pytest.warns(TraceWarning, match="left out"):
        tr = read_trace(p, zero_output="skip")
    assert list(tr.prompt_tokens) == [100, 300, 50] and list(tr.lines) == [2, 4, 5]
    assert tr.session_ids == [0, 0, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        specs = build_workload({"trace": {"path": str(p), "zero_output": "skip"}})
    assert [(s.session_id, s.turn) for s in specs] == [(0, 0), (0, 1), (None, 0)]


def test_lengths_csv_custom_columns(tmp_path):
    p = write(tmp_path, "l.csv", "in,out\n10,2\n20,4.0\n")
    with pytest.raises(TwinInputError, match="cannot tell the trace format"):
        read_trace(p)
    tr = read_trace(p, format="lengths", prompt_column="in", output_column="out")
    assert list(tr.prompt_tokens) == [10, 20] and list(tr.output_tokens) == [2, 4]
    with pytest.raises(TwinInputError, match="workload.arrivals: is required"):
        build_workload({"trace": {"path": str(p), "format": "lengths", "prompt_column": "in",
                                  "output_column": "out"}, "arrivals": None})


@pytest.mark.parametrize("name, text, pattern", [
    ("a.csv", "TIMESTAMP,ContextTokens\n2023-11-16 18:00:00.0,5\n",
     r"a.csv:1: missing column 'GeneratedTokens' \(header has TIMESTAMP, ContextTokens\)"),
    ("a.csv", AZURE + "2023-11-17 00:00:05.0,7\n",
     r"a.csv:6: column 'GeneratedTokens' is missing \(row has 2 of 3 fields\)"),
    ("a.csv", AZURE + "2023-11-17 00:00:05.0,seven,7\n",
     r"a.csv:6: column 'ContextTokens' must be a whole number of tokens \(got 'seven'\)"),
    ("a.csv", AZURE + "2023-11-17 00:00:05.0,12.5,7\n",
     r"a.csv:6: column 'ContextTokens' must be a whole number of tokens \(got '12.5'\)"),
    ("a.csv", AZURE + "2023-11-17 00:00:05.0,7,-1\n", r"a.csv:6: column 'GeneratedTokens' must be >= 0 \(got -1\)"),
    ("a.csv", AZURE + "2023-11-17 00:00:05.0,0,1\n", r"a.csv:6: column 'ContextTokens' is 0; a prompt needs"),
    ("a.csv", AZURE + "2023-11-17 00:00:03.0,7,1\n", r"a.csv:6: column 'TIMESTAMP' goes back in time"),
    ("a.csv", AZURE + "yesterday,7,1\n", r"a.csv:6: column 'TIMESTAMP' must be a timestamp like"),
    ("a.csv", AZURE + "2023-11-17 25:00:05.0,7,1\n", r"a.csv:6: column 'TIMESTAMP' must be a timestamp like"),
    ("a.csv", AZURE + "2023-11-17 00:00:05.0,7,1,9\n", r"a.csv:6: row has 4 fields, the header has 3"),
    ("a.csv", AZURE + "2023-11-17 00:00:05.0,,1\n", r"a.csv:6: column 'ContextTokens' is empty"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"timestamp": 1, "input_length": 5,\n',
     r"m.jsonl:2: not valid JSON"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1}\n\n{"timestamp": 1, "input_length": 5}\n',
     r"m.jsonl:3: column 'output_length' is missing"),
    ("m.jsonl", '{"timestamp": 5, "input_length": 5, "output_length": 1}\n{"timestamp": 1, "input_length": 5, '
                '"output_length": 1}\n', r"m.jsonl:2: column 'timestamp' goes back in time"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1}\n{"input_length": 5, "output_length": 1}\n',
     r"m.jsonl:2: column 'timestamp' is missing here but not in earlier rows"),
    ("m.jsonl", '{"timestamp": "soon", "input_length": 5, "output_length": 1}\n',
     r"m.jsonl:1: column 'timestamp' must be a number \(got 'soon'\)"),
    ("m.jsonl", '[1, 2]\n', r"m.jsonl:1: expected a JSON object"),
    ("m.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": ["x"]}\n',
     r"m.jsonl:1: column 'hash_ids' must be a list of integers"),
    ("b.csv", BURST.replace("200,0,200", "200,1,201").replace("9,s1", "x9,s1"), r"b.csv:4: column 'Timestamp' must be a number \(got 'x9'\)"),
    ("e.csv", "", r"e.csv:1: cannot tell the trace format"),
])
def test_broken_files_name_path_and_line(tmp_path, name, text, pattern):
    p = write(tmp_path, name, text)
    with pytest.raises(TwinInputError, match=pattern):
        read_trace(p)


def test_blank_lines_are_not_rows(tmp_path):
    tr = read_trace(write(tmp_path, "a.csv", AZURE.replace("\n2023-11-17 00:00:01", "\n\n2023-11-17 00:00:01")))
    assert len(tr) == 4 and list(tr.lines) == [2, 3, 5, 6]


def test_missing_file_and_traces_dir(tmp_path, monkeypatch):
    with pytest.raises(TwinInputError, match="workload.trace.path: file not found"):
        build_workload({"trace": {"path": str(tmp_path / "nope.csv")}})
    monkeypatch.setenv("TWIN_TRACES_DIR", str(tmp_path))
    assert traces_dir() == tmp_path
    write(tmp_path, "a.csv", AZURE)
    assert expand_path("{traces}/a.csv") == tmp_path / "a.csv"
    assert len(build_workload({"trace": {"path": "{traces}/a.csv"}})) == 4
    assert expand_path("x/a.csv", base_dir=tmp_path) == tmp_path / "x" / "a.csv"
    monkeypatch.delenv("TWIN_TRACES_DIR")
    repo_root = Path(__file__).resolve().parent.parent  # tests/ sits in the repo root, beside twin/
    assert traces_dir() == repo_root.parent / "shared" / "traces"
