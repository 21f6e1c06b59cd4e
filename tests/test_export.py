"""`vllm bench serve` JSON and the per-request / per-step tables."""

from __future__ import annotations

import importlib.util
import json

import pandas as pd
import pytest

from tests.test_metrics import tiny_case
from twin.errors import TwinInputError
from twin.results.export import (
    dumps,
    flatten_result,
    read_json,
    to_bench_serve_json,
    write_json,
    write_run,
    write_table,
)
from twin.results.metric_keys import BENCH_SERVE_PER_REQUEST_KEYS, BENCH_SERVE_SCALAR_KEYS

# every key of the `vllm bench serve` result JSON that reference/numbers-and-formats.md lists
BENCH_SERVE_KEYS = [
    "duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
    "request_goodput", "output_throughput", "total_token_throughput", "input_lens", "output_lens", "ttfts", "itls",
    "latencies", "start_times", "max_output_tokens_per_s", "max_concurrent_requests",
    *(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "std", "p99")),
]


def test_json_round_trip_has_every_bench_serve_key(tmp_path):
    path = write_json(tiny_case(), tmp_path / "run.json", slo={"ttft_ms": 1000, "tpot_ms": 500})
    data = read_json(path)
    for key in [*BENCH_SERVE_KEYS, *BENCH_SERVE_SCALAR_KEYS, *BENCH_SERVE_PER_REQUEST_KEYS]:
        assert key in data, key
    assert data["itls"] == [[0.25, 0.5, 0.0], [0.75], [], []]
    assert data["ttfts"] == [0.5, 1.0, 0.0, 1.0]
    assert data["latencies"] == [1.25, 1.75, 0.0, 1.0]
    assert data["start_times"] == [0.0, 0.25, 0.5, 1.5]
    assert data["request_goodput"] == 0.8 and data["completed"] == 3 and data["failed"] == 1
    assert data["model_id"] == "tiny" and data["num_prompts"] == 4
    twin = data["twin"]
    assert twin["prefix_cache_hit_rate"] == 16 / 60 and twin["num_rejected"] == 1
    assert twin["slo"] == {"per_request_ms": {"ttft": 1000.0, "tpot": 500.0}, "bounds_ms": {}}
    assert twin["config"] == {"model": "tiny"}
    assert not any(k in twin for k in BENCH_SERVE_SCALAR_KEYS)
    # floats survive exactly (written as repr)
    m = tiny_case().metrics(slo={"ttft_ms": 1000, "tpot_ms": 500})
    for key in BENCH_SERVE_SCALAR_KEYS:
        assert data[key] == m[key], key
    flat = flatten_result(data)
    assert flat["mean_ttft_ms"] == m["mean_ttft_ms"] and flat["busy_fraction"] == m["busy_fraction"]
    assert "itls" not in flat


def test_same_input_gives_identical_bytes(tmp_path):
    a = write_json(tiny_case(), tmp_path / "a.json", slo={"ttft_ms": {"p99": 900}})
    b = write_json(tiny_case(), tmp_path / "b.json", slo={"ttft_ms": {"p99": 900}})
    assert a.read_bytes() == b.read_bytes()
    # key order of the input does not matter
    assert dumps({"b": 1, "a": {"y": 2, "x": 1}}) == dumps({"a": {"x": 1, "y": 2}, "b": 1})


def test_json_is_strict_no_nan(tmp_path):
    text = dumps({"x": float("nan"), "rate": float("inf"), "ok": 0.1, "ys": [1.0, float("nan")]})
    assert json.loads(text) == {"x": None, "rate": "inf", "ok": 0.1, "ys": [1.0, None]}
    empty = to_bench_serve_json(type(tiny_case())())
    json.loads(dumps(empty))
    assert empty["completed"] == 0 and empty["mean_ttft_ms"] is None


def test_spec_decode_keys_written_when_present():
    res = tiny_case()
    res.requests[0].num_spec_drafts, res.requests[0].num_spec_draft_tokens = 2, 6
    res.requests[0].num_spec_accepted_tokens = 3
    data = json.loads(dumps(to_bench_serve_json(res)))
    assert data["spec_decode_acceptance_rate"] == 50.0 and data["spec_decode_acceptance_length"] == 2.5
    assert "spec_decode_num_drafts" in data and "spec_decode_per_position_acceptance_rates" in data
    assert "spec_decode_num_drafts" not in json.loads(dumps(to_bench_serve_json(tiny_case())))


def test_tables_csv(tmp_path):
    res = tiny_case()
    steps = write_table(res.steps_frame(), tmp_path / "steps.csv")
    back = pd.read_csv(steps)
    assert len(back) == 4 and back["kv_usage"].tolist() == [0.25, 0.5, 0.75, 0.25]
    reqs = pd.read_csv(write_table(res.requests_frame(), tmp_path / "requests.csv.gz"))
    assert reqs["request_id"].tolist() == ["A", "B", "C", "D"]
    assert reqs["ttft_s"].tolist()[:2] == [0.5, 1.0] and pd.isna(reqs["ttft_s"][2])
    assert reqs["status"].tolist() == ["finished", "finished", "rejected", "finished"]


def test_table_bad_suffix_and_parquet(tmp_path):
    df = tiny_case().steps_frame()
    with pytest.raises(TwinInputError, match="suffix"):
        write_table(df, tmp_path / "steps.xlsx")
    with pytest.raises(TwinInputError, match="does not exist"):
        write_table(df, tmp_path / "missing" / "steps.csv")
    if importlib.util.find_spec("pyarrow") is None:
        with pytest.raises(TwinInputError, match="pyarrow"):
            write_table(df, tmp_path / "steps.parquet")
    else:
        back = pd.read_parquet(write_table(df, tmp_path / "steps.parquet"))
        assert back.equals(df)


def test_write_run(tmp_path):
    paths = write_run(tiny_case(), tmp_path / "out", slo={"ttft_ms": 500})
    assert sorted(p.name for p in paths.values()) == ["requests.csv", "result.json", "steps.csv"]
    assert read_json(paths["json"])["request_goodput"] == 0.4


def test_read_json_errors(tmp_path):
    with pytest.raises(TwinInputError, match="no such file"):
        read_json(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{\n oops")
    with pytest.raises(TwinInputError, match="line 2"):
        read_json(bad)
