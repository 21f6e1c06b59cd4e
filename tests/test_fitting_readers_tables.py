"""Per-request tables (CSV, JSON Lines, JSON list; units by column-name ending; concurrency sweeps), the twin's own
``--requests-out`` table read back against the twin's metrics, and inference-perf's per-request and stage files."""

from __future__ import annotations

import csv
import json
from array import array

import numpy as np
import pytest

from twin.errors import TwinInputError
from twin.fitting.measured_run import LengthSample
from twin.fitting.readers import read_results
from twin.results.metrics import compute_metrics
from twin.results.records import RequestRecord, requests_to_frame

# send, TTFT, E2E (s), prompt, output; the last request failed
ROWS = [(0.0, 0.1, 1.1, 5, 11), (1.0, 0.2, 2.2, 6, 21), (2.0, 0.3, 0.3, 7, 1), (2.5, None, None, 8, 0)]


def write_csv(path, header, rows):
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def ms_table(tmp_path, name="requests.csv"):
    rows = [(1000 * s, "" if t is None else 1000 * (s + t), "" if e is None else 1000 * (s + e), p, o,
             "error" if t is None else "ok") for s, t, e, p, o in ROWS]
    return write_csv(tmp_path / name, ["Send_Time_ms", "first_token_time_ms", "end_time_ms", "prompt_tokens",
                                       "output_tokens", "status"], rows)


def assert_expected(run):
    assert run.num_requests == 4
    assert run.prompt_tokens == LengthSample(values=(5, 6, 7)) and run.output_tokens == LengthSample(values=(11, 21, 1))
    # sends 0, 1, 2, 2.5 s: rate 3 / 2.5; gaps (1, 1, 0.5) have CV^2 = 0.08, so gamma shape 12.5
    assert run.rate_per_s == pytest.approx(1.2) and run.burstiness == pytest.approx(12.5)
    assert run.max_concurrency is None and not run.closed_loop and run.duration_s == pytest.approx(3.2)
    m = run.metrics
    assert (m["completed"], m["failed"]) == (3, 1)
    assert m["mean_ttft_ms"] == pytest.approx(200.0) and m["p99_ttft_ms"] == pytest.approx(298.0)
    assert m["mean_tpot_ms"] == pytest.approx(100.0) and m["mean_itl_ms"] == pytest.approx(100.0)
    assert m["mean_e2el_ms"] == pytest.approx(1200.0) and m["p99_e2el_ms"] == pytest.approx(2178.0)
    assert m["request_throughput"] == pytest.approx(3 / 3.2) and m["output_throughput"] == pytest.approx(33 / 3.2)


def test_csv_in_milliseconds(tmp_path):
    [run] = read_results(ms_table(tmp_path))
    assert run.name == "requests" and run.source == "request-table (CSV)"
    assert_expected(run)


def test_jsonl_with_durations_in_mixed_units(tmp_path):
    lines = [json.dumps({"timestamp": 1.7e9 + s, "ttft_ms": None if t is None else 1000 * t, "latency": e,
                         "input_tokens": p, "completion_tokens": o, "error": "" if t else "HTTP 500"})
             for s, t, e, p, o in ROWS]
    p = tmp_path / "log.jsonl"
    p.write_text("\n".join(lines) + "\n")
    [run] = read_results(p)
    assert run.source == "request-table (JSON Lines)"
    assert_expected(run)


def test_json_list_of_requests(tmp_path):
    rows = [{"start_time_us": 1e6 * s, "first_token_time_us": None if t is None else 1e6 * (s + t),
             "end_time_us": None if e is None else 1e6 * (s + e), "prompt_len": p, "output_len": o}
            for s, t, e, p, o in ROWS]
    p = tmp_path / "reqs.json"
    p.write_text(json.dumps(rows))
    [run] = read_results(p)
    assert_expected(run)


def test_concurrency_column_gives_one_closed_loop_run_per_value(tmp_path):
    rows = [(s, s + 0.1, s + 0.5, 10, 5, c) for c in (4, 1) for s in (0.0, 0.5, 1.0)]
    runs = read_results(write_csv(tmp_path / "sweep.csv", ["start", "first_token", "end", "prompt_tokens",
                                                           "output_tokens", "concurrency"], rows))
    assert [(r.name, r.max_concurrency, r.rate_per_s, r.closed_loop) for r in runs] == \
        [("sweep/c1", 1, None, True), ("sweep/c4", 4, None, True)]
    assert runs[0].metrics["mean_tpot_ms"] == pytest.approx(100.0) and runs[0].experiment == "sweep"


def test_twin_requests_table_reads_back_with_the_twin_metrics(tmp_path):
    # seeded records: Poisson arrivals at 5 req/s, one token per step every 20 ms, one request rejected
    rng = np.random.default_rng(3)
    records = []
    arrivals = np.cumsum(rng.exponential(0.2, size=40))
    for i, a in enumerate(arrivals):
        if i == 7:
            records.append(RequestRecord(i, "chat", float(a), status="rejected", num_prompt_tokens=9000))
            continue
        out = int(rng.integers(1, 30))
        first = float(a + rng.uniform(0.05, 0.3))
        times = first + 0.02 * np.arange(out) * rng.uniform(0.9, 1.1)
        records.append(RequestRecord(i, "chat", float(a), first, float(times[-1]), int(rng.integers(50, 500)), out,
                                     emit_times_s=array("d", times.tolist())))
    path = tmp_path / "twin-requests.csv"
    requests_to_frame(records).to_csv(path, index=False)
    [run] = read_results(path)
    want = compute_metrics(records)
    for key, value in run.metrics.items():
        assert value == pytest.approx(want[key], rel=1e-9), key
    assert len(run.metrics) == 15


@pytest.mark.parametrize("header, row, message", [
    (["send_time", "first_token_time", "end_time", "output_tokens"], [0, 0.1, 1, 5],
     "no prompt tokens column (accepted names: prompt_tokens, input_tokens, num_prompt_tokens"),
    (["send_time", "prompt_tokens", "output_tokens", "end_time"], [0, 5, 5, 1],
     "no first-token time or TTFT column (accepted names: first_token_time, first_token, ttft, time_to_first_token)"),
    (["send_time_ms", "ttft_ms", "e2el_ms", "prompt_tokens", "output_tokens"], ["soon", 1, 2, 5, 5],
     "row 2: send_time_ms = 'soon': must be a finite number >= 0 (the column name's ending gives the unit"),
    (["send_time", "first_token_time", "end_time", "prompt_tokens", "output_tokens"], [5, 4, 6, 5, 5],
     "row 2: times out of order (send 5 s, first token 4 s, end 6 s)"),
    (["send_time", "first_token_time", "end_time", "prompt_tokens", "output_tokens"], [0, 1, 2, -1, 5],
     "row 2: prompt_tokens = -1: must be a whole number >= 1"),
    (["send_time", "first_token_time", "end_time", "prompt_tokens", "output_tokens"], [0, 1, 2, 7, 2.5],
     "row 2: output_tokens = '2.5': must be a whole number >= 1"),
    (["send_time", "first_token_time", "end_time", "prompt_tokens", "output_tokens", "status"], [0, 1, 2, 3, 5, "500"],
     "no completed request"),
    (["send_time", "ttft", "latency", "prompt_tokens", "output_tokens", "concurrency"], [0, 1, 2, 3, 5, 0],
     "row 2: concurrency = 0: must be a whole number >= 1"),
])
def test_broken_table_names_the_field(tmp_path, header, row, message):
    p = write_csv(tmp_path / "bad.csv", header, [row])
    with pytest.raises(TwinInputError) as exc:
        read_results(p)
    assert message in str(exc.value) and "bad.csv" in str(exc.value) and "\n" not in str(exc.value)


def test_non_utf8_table(tmp_path):
    p = tmp_path / "r.csv"
    p.write_bytes(b"send_time,first_token_time,end_time,prompt_tokens,output_tokens\n0,1,2,\xff,4\n")
    with pytest.raises(TwinInputError, match=r"r\.csv:2: not UTF-8 text \(byte 0xff\)"):
        read_results(p)


# ----------------------------------------------------------------------------------------------------------
# inference-perf
# ----------------------------------------------------------------------------------------------------------
def lifecycle_requests():
    return [
        {"start_time": 50.0, "end_time": 50.5, "request": "{}", "response": "{}",
         "info": {"input_tokens": 100, "output_tokens": 3, "output_token_times": [50.1, 50.3, 50.5]},
         "error": None},
        {"start_time": 50.2, "end_time": 50.4, "request": "{}", "response": "{}",
         "info": {"input_tokens": 40, "output_tokens": 2, "output_token_times": [50.3, 50.4]}, "error": None},
        {"start_time": 50.3, "end_time": 50.31, "request": "{}", "response": None, "info": None,
         "error": {"error_type": "ClientConnectorError", "error_msg": "refused"}},
    ]


def test_inference_perf_per_request_file(tmp_path):
    d = tmp_path / "exp-7"
    d.mkdir()
    p = d / "per_request_lifecycle_metrics.json"
    p.write_text(json.dumps(lifecycle_requests()))
    [run] = read_results(p)
    assert run.source == "inference-perf per-request" and run.name == "exp-7/per_request_lifecycle_metrics"
    assert run.prompt_tokens == LengthSample(values=(100, 40)) and run.output_tokens == LengthSample(values=(3, 2))
    m = run.metrics
    assert (m["completed"], m["failed"]) == (2, 1)
    assert m["mean_ttft_ms"] == pytest.approx(100.0)
    assert m["mean_itl_ms"] == pytest.approx(1000 * (0.2 + 0.2 + 0.1) / 3)   # the token gaps
    assert m["mean_tpot_ms"] == pytest.approx(1000 * (0.2 + 0.1) / 2)
    assert m["mean_e2el_ms"] == pytest.approx(350.0)
    assert run.rate_per_s == pytest.approx(2 / 0.3)


def test_inference_perf_newer_layout_with_several_messages_per_token(tmp_path):
    reqs = lifecycle_requests()
    for r in reqs[:2]:
        info = r["info"]
        times = info.pop("output_token_times")
        # two stream messages per token: the gaps are not ITLs
        doubled = sorted(times + [t - 0.01 for t in times[1:]] + [times[0]])
        r["info"] = {"request_metrics": {"text": {"input_tokens": info.pop("input_tokens")}},
                     "response_metrics": {"output_tokens": info.pop("output_tokens"), "output_token_times": doubled,
                                          "chunk_times": doubled, "server_usage": None},
                     "extra_info": {}, "lora_adapter": None, "labels": {}}
    p = tmp_path / "per_request_lifecycle_metrics.json"
    p.write_text(json.dumps(reqs))
    [run] = read_results(p)
    assert run.prompt_tokens == LengthSample(values=(100, 40)) and run.output_tokens == LengthSample(values=(3, 2))
    m = run.metrics
    assert m["mean_ttft_ms"] == pytest.approx(100.0) and m["mean_e2el_ms"] == pytest.approx(350.0)
    # ITL from the latencies and token counts: (0.4 + 0.1) / (2 + 1)
    assert m["mean_itl_ms"] == pytest.approx(1000 * 0.5 / 3)


@pytest.mark.parametrize("edit, message", [
    (lambda r: r[0]["info"].update(output_token_times="soon"), "request [0]: info.output_token_times must be a list"),
    (lambda r: r[1]["info"].pop("input_tokens"), "request [1]: missing field info.input_tokens"),
    (lambda r: r[1]["info"].update(output_token_times=[]), "request [1]: info.output_token_times is empty: TTFT "
                                                           "needs a streamed run"),
    (lambda r: r[1].update(start_time=-1), "request [1]: start_time = -1"),
    (lambda r: r[0]["info"].update(output_token_times=[50.3, 50.1]), "request [0]: times out of order"),
])
def test_broken_inference_perf_per_request_file(tmp_path, edit, message):
    reqs = lifecycle_requests()
    edit(reqs)
    p = tmp_path / "per_request_lifecycle_metrics.json"
    p.write_text(json.dumps(reqs))
    with pytest.raises(TwinInputError) as exc:
        read_results(p)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_inference_perf_stage_file_goes_to_the_stage_reader(tmp_path):
    stage = {"load_summary": {"count": 100, "requested_rate": 5.0, "send_duration": 20.0},
             "successes": {"count": 100, "latency": {"time_to_first_token": {"mean": 0.05, "median": 0.04},
                                                    "request_latency": {"mean": 1.05, "median": 1.0}},
                           "prompt_len": {"min": 100, "median": 200, "max": 300},
                           "output_len": {"min": 50, "median": 51, "max": 52},
                           "throughput": {"requests_per_sec": 4.9}},
             "failures": {"count": 0}}
    p = tmp_path / "results_stage_0_lifecycle_metrics.json"
    p.write_text(json.dumps(stage))
    [run] = read_results(p)
    assert run.source == "inference-perf" and run.rate_per_s == 5.0
    assert run.metrics["mean_tpot_ms"] == pytest.approx(1000 / 50)
