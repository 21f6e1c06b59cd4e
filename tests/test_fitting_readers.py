"""Result readers: `vllm bench serve` JSON (with and without per-request arrays, appended runs, metadata), the
per-request core (arrival process, metrics as vLLM defines them), and ``read_results`` recognising every format by
its content. GuideLLM and per-request tables: test_fitting_readers_guidellm.py, test_fitting_readers_tables.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from twin.errors import TwinInputError
from twin.fitting.measured_run import LengthSample, PromptPool
from twin.fitting.readers import read_results
from twin.fitting.readers.request_times import MAX_BURSTINESS, RequestTimes, arrival_process, measured_metrics


def bench_doc(*, detailed: bool = True, **over) -> dict:
    """A `vllm bench serve --save-result [--save-detailed]` result of 4 requests, one failed, keys in vLLM's order."""
    doc = {
        "date": "20261203-080000", "endpoint_type": "vllm", "backend": "vllm", "label": None,
        "model_id": "meta-llama/Llama-3.1-8B-Instruct", "tokenizer_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": 4, "request_rate": 2.5, "burstiness": 0.5, "max_concurrency": 8,
        "duration": 3.5, "completed": 3, "failed": 1, "total_input_tokens": 600, "total_output_tokens": 31,
        "request_throughput": 0.857, "request_goodput": None, "output_throughput": 8.86,
        "total_token_throughput": 180.2,
        "input_lens": [100, 200, 300, 400], "output_lens": [10, 20, 0, 1],
        "ttfts": [0.1, 0.2, 0.0, 0.3], "itls": [[0.1] * 9, [0.1] * 19, [], []],
        "latencies": [1.0, 2.1, 0.0, 0.3], "start_times": [10.0, 10.4, 10.8, 11.2],
        "generated_texts": ["a", "b", "", "c"], "errors": ["", "", "timeout", ""],
        "max_output_tokens_per_s": 12.0, "max_concurrent_requests": 2,
        "mean_ttft_ms": 200.0, "median_ttft_ms": 200.0, "std_ttft_ms": 81.6, "p99_ttft_ms": 298.0,
        "mean_tpot_ms": 100.0, "median_tpot_ms": 100.0, "std_tpot_ms": 0.0, "p99_tpot_ms": 100.0,
        "mean_itl_ms": 100.0, "median_itl_ms": 100.0, "std_itl_ms": 0.0, "p99_itl_ms": 100.0,
    }
    if not detailed:
        for key in ("input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors"):
            del doc[key]
    doc.update(over)
    return doc


def write(tmp_path: Path, name: str, content) -> Path:
    p = tmp_path / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content if isinstance(content, str) else json.dumps(content))
    return p


# ----------------------------------------------------------------------------------------------------------
# vllm bench serve
# ----------------------------------------------------------------------------------------------------------
def test_detailed_result_gives_exact_lengths_load_and_file_metrics(tmp_path):
    [run] = read_results(write(tmp_path, "conc8.json", bench_doc()))
    assert run.source == "vllm-bench-serve" and run.name == "conc8"
    assert (run.rate_per_s, run.burstiness, run.max_concurrency) == (2.5, 0.5, 8)
    assert run.num_requests == 4 and run.duration_s == 3.5
    # the failed request (errors[2]) is left out of the lengths; send order kept
    assert run.prompt_tokens == LengthSample(values=(100, 200, 400))
    assert run.output_tokens == LengthSample(values=(10, 20, 1))
    assert run.model == "meta-llama/Llama-3.1-8B-Instruct" and run.prompt_pool is None
    assert run.metrics["completed"] == 3 and run.metrics["failed"] == 1
    assert run.metrics["mean_ttft_ms"] == 200.0 and run.metrics["p99_tpot_ms"] == 100.0
    assert run.metrics["request_throughput"] == 0.857 and run.metrics["output_throughput"] == 8.86
    # no e2el statistics in the file (vLLM's default --percentile-metrics): computed from the completed latencies
    assert run.metrics["mean_e2el_ms"] == pytest.approx(1000 * (1.0 + 2.1 + 0.3) / 3)
    assert run.metrics["median_e2el_ms"] == pytest.approx(1000.0)
    assert run.metrics["p99_e2el_ms"] == pytest.approx(1000 * float(np.percentile([1.0, 2.1, 0.3], 99)))
    assert "p90_ttft_ms" not in run.metrics      # not in the file: unknown, not invented


def test_summary_only_result_gives_mean_lengths_as_constants(tmp_path):
    [run] = read_results(write(tmp_path, "r.json", bench_doc(detailed=False, request_rate="inf",
                                                              max_concurrency=None, burstiness=1.0)))
    assert run.prompt_tokens == LengthSample.constant(200) and run.output_tokens == LengthSample.constant(10)
    assert math.isinf(run.rate_per_s) and run.max_concurrency is None and not run.closed_loop
    # latencies survive without --save-detailed (vLLM does not drop them); the failed one (0 s) is left out
    assert run.metrics["mean_e2el_ms"] == pytest.approx(1000 * 3.4 / 3)


def test_inf_rate_with_concurrency_is_a_closed_loop(tmp_path):
    [run] = read_results(write(tmp_path, "r.json", bench_doc(request_rate="inf", max_concurrency=16)))
    assert run.closed_loop and run.max_concurrency == 16


def test_appended_results_are_one_run_per_line(tmp_path):
    lines = [json.dumps(bench_doc(max_concurrency=c, detailed=False)) for c in (1, 4)]
    runs = read_results(write(tmp_path, "sweep.json", "\n".join(lines) + "\n"))
    assert [r.name for r in runs] == ["sweep#1", "sweep#2"]
    assert [r.max_concurrency for r in runs] == [1, 4]
    assert {r.experiment for r in runs} == {"sweep"}


def test_metadata_gives_prefix_sharing_gpu_tp_and_server_settings(tmp_path):
    doc = bench_doc(random_prefix_len="64", gpu="H100-SXM", tensor_parallel_size="2", max_num_seqs="128",
                    enable_prefix_caching="true", gpu_memory_utilization="0.85")
    [run] = read_results(write(tmp_path, "r.json", doc))
    assert run.prompt_pool == PromptPool(1, 4, 64)
    assert (run.gpu, run.tensor_parallel_size) == ("H100-SXM", 2)
    assert run.server == {"max_num_seqs": 128, "enable_prefix_caching": True, "gpu_memory_utilization": 0.85}
    [rep] = read_results(write(tmp_path, "p.json", bench_doc(prefix_repetition_prefix_len=256,
                                                             prefix_repetition_num_prefixes=3)))
    assert rep.prompt_pool == PromptPool(3, 2, 256)


@pytest.mark.parametrize("over, message", [
    ({"completed": None}, "missing field completed"),
    ({"completed": 0}, "completed = 0: no request completed"),
    ({"request_rate": -1}, "request_rate = -1: must be a number > 0 or \"inf\""),
    ({"request_rate": "fast"}, "request_rate = 'fast'"),
    ({"burstiness": float("nan")}, "burstiness = nan: must be a finite number >= 0"),
    ({"max_concurrency": 0}, "max_concurrency = 0: must be a whole number >= 1"),
    ({"input_lens": [100, 200, 300]}, "output_lens has 4 entries, expected 3"),
    ({"output_lens": [10, -3, 0, 1]}, "output_lens[1] = -3: must be a finite number >= 0"),
    ({"input_lens": [100, 0, 300, 400]}, "input_lens[1] = 0: a completed request needs a whole number of tokens"),
    ({"errors": ["x", "y", "z", "w"]}, "every request failed"),
    ({"mean_ttft_ms": "slow"}, "mean_ttft_ms = 'slow'"),
    ({"ramp_up_strategy": "linear"}, "ramp_up_strategy = 'linear': a ramp-up run"),
    ({"gpu_memory_utilization": "most"}, "gpu_memory_utilization = 'most': must be a number in (0, 1]"),
    ({"enable_prefix_caching": "sometimes"}, "enable_prefix_caching = 'sometimes': must be true or false"),
    ({"random_prefix_len": "-5"}, "random_prefix_len = -5: must be a whole number >= 0"),
])
def test_broken_bench_result_names_the_field(tmp_path, over, message):
    doc = bench_doc(**over)
    doc = {k: v for k, v in doc.items() if v is not None or k not in over}
    with pytest.raises(TwinInputError) as exc:
        read_results(write(tmp_path, "bad.json", doc))
    text = str(exc.value)
    assert message in text and str(tmp_path / "bad.json") in text and "\n" not in text


def test_missing_totals_without_arrays_names_the_field(tmp_path):
    doc = bench_doc(detailed=False)
    del doc["total_output_tokens"]
    with pytest.raises(TwinInputError, match="missing field total_output_tokens"):
        read_results(write(tmp_path, "r.json", doc))


def test_broken_appended_line_names_the_line(tmp_path):
    good = json.dumps(bench_doc(detailed=False))
    bad = json.dumps(bench_doc(detailed=False, completed="x"))
    with pytest.raises(TwinInputError, match=r"s\.json, line 2: completed = 'x'"):
        read_results(write(tmp_path, "s.json", good + "\n" + bad))


# ----------------------------------------------------------------------------------------------------------
# unreadable files
# ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, content, message", [
    ("empty.json", "", "empty file"),
    ("blank.csv", "  \n\n", "empty file"),
    ("latin1.json", b'{"model_id": "caf\xe9"}', "latin1.json:1: not UTF-8 text (byte 0xe9)"),
    ("trunc.json", '{"completed": 3, "request_rate": ', "line 1: not valid JSON"),
    ("other.json", {"hello": 1}, "not a result format twin reads (inference-perf per-request, inference-perf, "
                                 "GuideLLM benchmarks.json/.yaml, AIPerf profile_export, vllm bench serve JSON, per-request CSV/JSONL)"),
    ("notes.txt", "just some words\n", "not a result format twin reads"),
])
def test_unreadable_file_gets_one_line(tmp_path, name, content, message):
    with pytest.raises(TwinInputError) as exc:
        read_results(write(tmp_path, name, content))
    assert message in str(exc.value) and name in str(exc.value) and "\n" not in str(exc.value)


def test_missing_path(tmp_path):
    with pytest.raises(TwinInputError, match="no such file or folder"):
        read_results(tmp_path / "nope.json")


# ----------------------------------------------------------------------------------------------------------
# per-request core
# ----------------------------------------------------------------------------------------------------------
def test_metrics_follow_vllm_definitions_exactly():
    t = RequestTimes(send_s=np.array([0.0, 1.0, 2.0, 2.5]), ttft_s=np.array([0.1, 0.2, 0.3, np.nan]),
                     e2el_s=np.array([1.1, 2.2, 0.3, np.nan]), prompt_tokens=np.array([5.0, 6, 7, 0]),
                     output_tokens=np.array([11.0, 21, 1, 0]), ok=np.array([True, True, True, False]))
    m = measured_metrics(t)
    assert (m["completed"], m["failed"]) == (3, 1)
    assert m["mean_ttft_ms"] == pytest.approx(200.0) and m["median_ttft_ms"] == pytest.approx(200.0)
    assert m["p90_ttft_ms"] == pytest.approx(280.0) and m["p99_ttft_ms"] == pytest.approx(298.0)
    # TPOT leaves out the one-token request: (1.0 / 10, 2.0 / 20)
    assert m["mean_tpot_ms"] == pytest.approx(100.0) and m["p99_tpot_ms"] == pytest.approx(100.0)
    assert m["mean_itl_ms"] == pytest.approx(100.0)
    assert m["mean_e2el_ms"] == pytest.approx(1200.0) and m["median_e2el_ms"] == pytest.approx(1100.0)
    # first send (0 s) to last completion (1 + 2.2 s)
    assert m["request_throughput"] == pytest.approx(3 / 3.2) and m["output_throughput"] == pytest.approx(33 / 3.2)


def test_itl_from_token_gaps_when_given():
    t = RequestTimes(np.array([0.0, 1.0]), np.array([0.1, 0.1]), np.array([0.4, 0.2]), np.array([5.0, 5]),
                     np.array([3.0, 2]), np.array([True, True]), itl_s=[np.array([0.1, 0.2]), np.array([0.1])])
    assert measured_metrics(t)["mean_itl_ms"] == pytest.approx(400 / 3)


def test_arrival_process_recovers_rate_and_burstiness():
    # seeded: 4000 gamma(4) gaps at 10 req/s; tolerances are about 4 standard errors
    rng = np.random.default_rng(7)
    sends = np.cumsum(rng.gamma(4.0, 1 / 40.0, size=4000))
    rate, shape = arrival_process(sends)
    assert rate == pytest.approx(10.0, rel=0.03) and shape == pytest.approx(4.0, rel=0.10)
    assert arrival_process(np.arange(50) * 0.25) == (4.0, MAX_BURSTINESS)
    assert arrival_process(np.zeros(8)) == (math.inf, 1.0)


# ----------------------------------------------------------------------------------------------------------
# any broken field: one line, never a traceback
# ----------------------------------------------------------------------------------------------------------
WEIRD = [None, "x", -1, [], {}, float("nan"), True, 0, 1e308, "inf", [1, "a"], {"a": 1}]


def _paths(o, pre=()):
    if isinstance(o, dict):
        for k, v in o.items():
            yield pre + (k,)
            yield from _paths(v, pre + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o[:3]):
            yield pre + (i,)
            yield from _paths(v, pre + (i,))


def test_random_field_damage_is_read_or_one_line_error(tmp_path):
    """Seeded: 60 documents per format, each with one field (at any depth) replaced by an odd value."""
    import random

    from test_fitting_readers_guidellm import report
    from test_fitting_readers_tables import lifecycle_requests

    rng = random.Random(11)
    for name, base in (("b.json", bench_doc()), ("benchmarks.json", report()),
                       ("per_request_lifecycle_metrics.json", lifecycle_requests())):
        paths, text = list(_paths(base)), json.dumps(base)
        for trial in range(60):
            doc = json.loads(text)
            path = rng.choice(paths)
            target = doc
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = rng.choice(WEIRD)
            f = tmp_path / f"{trial}-{name}"
            f.write_text(json.dumps(doc))
            try:
                read_results(f)
            except TwinInputError as exc:
                assert "\n" not in str(exc), (name, path)
