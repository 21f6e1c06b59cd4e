"""GuideLLM ``benchmarks.json``: a realistic report generated here (GuideLLM 0.4+ layout: ``config.strategy``,
per-request ``GenerativeRequestStats`` with their computed fields, ``StatusDistributionSummary`` metrics; and the
0.2/0.3 layout with ``args.strategy`` and flat request timings), read benchmark by benchmark."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from twin.errors import TwinInputError
from twin.fitting.measured_run import LengthSample, PromptPool
from twin.fitting.readers import read_results
from twin.fitting.readers.request_times import MAX_BURSTINESS

PCTS = (("p001", 0.1), ("p01", 1), ("p05", 5), ("p10", 10), ("p25", 25), ("p50", 50), ("p75", 75), ("p90", 90),
        ("p95", 95), ("p99", 99), ("p999", 99.9))
# (send, first token, last token, end, prompt tokens, output tokens) of each successful request, seconds
REQUESTS = [(100.0, 100.1, 101.0, 101.0, 120, 10), (100.5, 100.7, 102.6, 102.6, 80, 20),
            (101.0, 101.3, 101.3, 101.3, 200, 1)]


def dist(values) -> dict:
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return {"mean": 0.0, "median": 0.0, "mode": 0.0, "variance": 0.0, "std_dev": 0.0, "min": 0.0, "max": 0.0,
                "count": 0, "total_sum": 0.0, "percentiles": {k: 0.0 for k, _ in PCTS}, "pdf": None}
    return {"mean": float(v.mean()), "median": float(np.median(v)), "mode": float(v[0]),
            "variance": float(v.var()), "std_dev": float(v.std()), "min": float(v.min()), "max": float(v.max()),
            "count": int(v.size), "total_sum": float(v.sum()),
            "percentiles": dict(zip([k for k, _ in PCTS], np.percentile(v, [q for _, q in PCTS]).tolist())),
            "pdf": None}


def status_dist(values) -> dict:
    return {"successful": dist(values), "incomplete": dist([]), "errored": dist([]), "total": dist(values)}


def request_stats(i: int, send, first, last, end, prompt, output) -> dict:
    """One ``GenerativeRequestStats`` as GuideLLM's model_dump writes it, computed fields included."""
    return {
        "type_": "generative_request_stats", "request_id": f"req-{i}", "response_id": None, "request_args": None,
        "output": "x" * output, "reasoning_output": None, "tool_calls": None,
        "info": {"request_id": f"req-{i}", "status": "completed", "scheduler_node_id": 0,
                 "timings": {"targeted_start": send, "queued": send - 0.01, "dequeued": send - 0.005,
                             "scheduled_at": send - 0.005, "resolve_start": send - 0.001, "request_start": send,
                             "first_token_iteration": first, "last_token_iteration": last,
                             "token_iterations": output, "request_end": end, "resolve_end": end + 0.001,
                             "finalized": end + 0.002}},
        "input_metrics": {"text_tokens": prompt, "total_tokens": prompt},
        "output_metrics": {"text_tokens": output, "total_tokens": output},
        "request_start_time": send, "request_end_time": end, "request_latency": end - send,
        "prompt_tokens": prompt, "output_tokens": output, "total_tokens": prompt + output,
        "time_to_first_token_ms": 1000 * (first - send),
        "time_per_output_token_ms": 1000 * (last - send) / output,
        "inter_token_latency_ms": 1000 * (last - first) / (output - 1) if output > 1 else None,
        "tokens_per_second": (prompt + output) / (end - send), "output_tokens_per_second": output / (end - send),
    }


def benchmark(k: int, strategy: dict, requests=REQUESTS, *, errored: int = 1) -> dict:
    ok = [request_stats(i, *r) for i, r in enumerate(requests)]
    bad = [dict(request_stats(100 + i, 101.5, 101.5, 101.5, 101.6, 50, 1), output_metrics={}, output_tokens=None,
                time_to_first_token_ms=None, info={"status": "errored", "timings": {"request_start": 101.5}})
           for i in range(errored)]
    itl = [r["inter_token_latency_ms"] for r in ok if r["inter_token_latency_ms"] is not None]
    return {
        "type_": "generative_benchmark",
        "config": {"id_": f"b{k}", "run_id": "run-1", "run_index": k, "strategy": dict(strategy), "constraints": {},
                   "sample_requests": None, "warmup": {}, "cooldown": {}, "prefer_response_metrics": True,
                   "profile": {"type_": "sweep"}, "requests": {}, "backend": {"model": "Qwen/Qwen3-8B"},
                   "environment": {}},
        "scheduler_state": {"node_id": 0, "num_processes": 1},
        "scheduler_metrics": {"start_time": 99.9, "request_start_time": 100.0, "measure_start_time": 100.0,
                              "measure_end_time": 102.6, "request_end_time": 102.6, "end_time": 102.7,
                              "requests_made": {"successful": len(ok), "incomplete": 0, "errored": errored,
                                                "total": len(ok) + errored}},
        "metrics": {
            "request_totals": {"successful": len(ok), "incomplete": 0, "errored": errored,
                               "total": len(ok) + errored},
            "requests_per_second": status_dist([1.1, 1.2]), "request_concurrency": status_dist([1, 2]),
            "request_latency": status_dist([r["request_latency"] for r in ok]),
            "prompt_token_count": status_dist([r["prompt_tokens"] for r in ok]),
            "output_token_count": status_dist([r["output_tokens"] for r in ok]),
            "time_to_first_token_ms": status_dist([r["time_to_first_token_ms"] for r in ok]),
            "time_per_output_token_ms": status_dist([r["time_per_output_token_ms"] for r in ok]),
            "inter_token_latency_ms": status_dist(itl), "output_tokens_per_second": status_dist([12.0, 13.0]),
        },
        "requests": {"successful": ok, "incomplete": [], "errored": bad, "total": None},
        "start_time": 100.0, "end_time": 102.6, "duration": 2.6, "warmup_duration": 0.0, "cooldown_duration": 0.0,
    }


STRATEGIES = [
    {"type_": "synchronous", "worker_count": 1, "max_concurrency": 1},
    {"type_": "throughput", "worker_count": 8, "max_concurrency": 64, "rampup_duration": 0.0},
    {"type_": "constant", "rate": 4.0, "max_concurrency": None},
    {"type_": "poisson", "rate": 2.5, "random_seed": 42, "max_concurrency": None},
    {"type_": "concurrent", "streams": 8, "rampup_duration": 0.0, "max_concurrency": 8},
]


def report(benchmarks=None) -> dict:
    return {"metadata": {"version": 1, "guidellm_version": "0.4.0"},
            "args": {"target": "http://localhost:8000", "model": "Qwen/Qwen3-8B", "profile": "sweep",
                     "data": ["prompt_tokens=128,output_tokens=16,prefix_tokens=32,prefix_count=2"]},
            "benchmarks": [benchmark(k, s) for k, s in enumerate(STRATEGIES)] if benchmarks is None else benchmarks}


def write(tmp_path, doc, name="benchmarks.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_every_strategy_becomes_its_load(tmp_path):
    runs = read_results(write(tmp_path, report()))
    assert [r.name for r in runs] == ["benchmarks/0:synchronous", "benchmarks/1:throughput",
                                      "benchmarks/2:constant@4", "benchmarks/3:poisson@2.5",
                                      "benchmarks/4:concurrent@8"]
    loads = [(r.rate_per_s, r.max_concurrency, r.burstiness, r.closed_loop) for r in runs]
    assert loads == [(None, 1, 1.0, True), (math.inf, 64, 1.0, True), (4.0, None, MAX_BURSTINESS, False),
                     (2.5, None, 1.0, False), (None, 8, 1.0, True)]
    assert {r.source for r in runs} == {"guidellm"} and {r.experiment for r in runs} == {"benchmarks"}
    assert {r.model for r in runs} == {"Qwen/Qwen3-8B"}


def test_full_request_list_gives_exact_lengths_and_vllm_metrics(tmp_path):
    run = read_results(write(tmp_path, report()))[2]
    assert run.num_requests == 4 and run.duration_s == 2.6
    assert run.prompt_tokens == LengthSample(values=(120, 80, 200))
    assert run.output_tokens == LengthSample(values=(10, 20, 1))
    assert run.prompt_pool == PromptPool(2, 2, 32)
    m = run.metrics
    assert (m["completed"], m["failed"]) == (3, 1)
    assert m["mean_ttft_ms"] == pytest.approx(200.0) and m["median_ttft_ms"] == pytest.approx(200.0)
    # TPOT per request with > 1 token: 0.9 / 9 and 1.9 / 19 s
    assert m["mean_tpot_ms"] == pytest.approx(100.0) and m["mean_itl_ms"] == pytest.approx(100.0)
    assert m["mean_e2el_ms"] == pytest.approx(1000 * (1.0 + 2.1 + 0.3) / 3)
    # first send (100.0) to last completion (102.6)
    assert m["request_throughput"] == pytest.approx(3 / 2.6) and m["output_throughput"] == pytest.approx(31 / 2.6)


def test_sampled_requests_use_the_summaries_for_metrics(tmp_path):
    doc = report()
    b = doc["benchmarks"][3]
    b["metrics"]["request_totals"]["successful"] = 30      # 3 listed of 30: a sample
    [_, _, _, run, _] = read_results(write(tmp_path, doc))
    assert run.num_requests == 31
    assert run.prompt_tokens == LengthSample(values=(120, 80, 200))     # the sample's lengths
    m = run.metrics
    ttft = b["metrics"]["time_to_first_token_ms"]["successful"]
    itl = b["metrics"]["inter_token_latency_ms"]["successful"]
    assert (m["completed"], m["failed"]) == (30, 1)
    assert m["mean_ttft_ms"] == ttft["mean"] and m["p90_ttft_ms"] == ttft["percentiles"]["p90"]
    assert m["median_tpot_ms"] == itl["median"] and m["mean_itl_ms"] == itl["mean"]
    assert m["p99_e2el_ms"] == pytest.approx(1000 * b["metrics"]["request_latency"]["successful"]["percentiles"]["p99"])
    assert m["request_throughput"] == pytest.approx(1.15) and m["output_throughput"] == pytest.approx(12.5)


def test_no_request_list_gives_length_quantiles(tmp_path):
    doc = report()
    doc["benchmarks"][0]["requests"] = {"successful": [], "incomplete": [], "errored": [], "total": None}
    run = read_results(write(tmp_path, doc))[0]
    pct = doc["benchmarks"][0]["metrics"]["prompt_token_count"]["successful"]["percentiles"]
    assert run.prompt_tokens.quantiles[0] == (0.0, 80.0) and run.prompt_tokens.quantiles[-1] == (1.0, 200.0)
    assert (0.5, pct["p50"]) in run.prompt_tokens.quantiles and len(run.prompt_tokens.quantiles) == 13


def test_old_report_layout(tmp_path):
    old = []
    for k, s in enumerate(STRATEGIES[2:4]):
        b = benchmark(k, s)
        for r in b["requests"]["successful"] + b["requests"]["errored"]:
            t = r.pop("info")["timings"]
            for key in ("request_start_time", "request_end_time", "time_to_first_token_ms", "input_metrics",
                        "output_metrics"):
                r.pop(key)
            r.update(start_time=t["request_start"], end_time=t.get("request_end", 101.6),
                     first_token_time=t.get("first_token_iteration"), last_token_time=t.get("last_token_iteration"))
        metrics = b.pop("metrics")
        b = {"type_": "generative_benchmark", "run_id": "r", "args": {"strategy": b["config"]["strategy"]},
             "run_stats": {"start_time": 100.0, "end_time": 102.6}, "worker": {"backend_model": "old-model"},
             "request_totals": metrics.pop("request_totals"), "metrics": metrics, "requests": b["requests"]}
        old.append(b)
    runs = read_results(write(tmp_path, {"benchmarks": old}))
    assert [(r.rate_per_s, r.model, r.duration_s) for r in runs] == [(4.0, "old-model", pytest.approx(2.6)),
                                                                      (2.5, "old-model", pytest.approx(2.6))]
    assert runs[0].metrics["mean_ttft_ms"] == pytest.approx(200.0)
    assert runs[0].output_tokens == LengthSample(values=(10, 20, 1))


def test_intermediate_report_layout(tmp_path):
    """GuideLLM 0.3: ``scheduler.strategy``, ``benchmarker.backend``, ``request_totals`` beside ``metrics``."""
    b = benchmark(0, STRATEGIES[4])
    config = b.pop("config")
    b["scheduler"] = {"strategy": config["strategy"], "constraints": {}, "state": {}}
    b["benchmarker"] = {"args": {}, "profile": {}, "requests": {}, "backend": {"model": "mid-model"},
                        "environment": {}}
    b["request_totals"] = b["metrics"].pop("request_totals")
    [run] = read_results(write(tmp_path, {"benchmarks": [b]}))
    assert (run.max_concurrency, run.closed_loop, run.model) == (8, True, "mid-model")
    assert run.metrics["completed"] == 3


def _broken(edit):
    doc = report()
    edit(doc)
    return doc


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["benchmarks"][1]["config"]["strategy"].update(type_="knee"),
     "benchmarks[1]: strategy.type_ = 'knee': expected synchronous, concurrent, throughput, constant or poisson"),
    (lambda d: d["benchmarks"][2]["config"]["strategy"].pop("rate"), "benchmarks[2]: missing field rate"),
    (lambda d: d["benchmarks"][3]["config"]["strategy"].update(rate=-2), "strategy.rate = -2"),
    (lambda d: d["benchmarks"][4]["config"]["strategy"].update(streams=0),
     "strategy.streams = 0: must be a whole number >= 1"),
    (lambda d: d["benchmarks"][0]["metrics"].pop("request_totals"), "missing field metrics.request_totals"),
    (lambda d: d["benchmarks"][0]["requests"]["successful"][1].update(request_start_time=None,
                                                                      info={"timings": {}}),
     "requests.successful[1]: missing field request_start_time"),
    (lambda d: d["benchmarks"][0]["requests"]["successful"][0].update(prompt_tokens=-5, input_metrics={}),
     "requests.successful[0].prompt_tokens = -5"),
    (lambda d: d["benchmarks"][0]["requests"]["successful"][0].update(request_end_time=99.0),
     "requests.successful[0]: times out of order"),
    (lambda d: (d["benchmarks"][0]["metrics"]["request_totals"].update(successful=9),
                d["benchmarks"][0]["metrics"].pop("time_to_first_token_ms")),
     "missing field metrics.time_to_first_token_ms.successful"),
    (lambda d: d["benchmarks"][0]["metrics"]["request_totals"].update(successful=0),
     "request_totals.successful = 0: no request completed"),
    (lambda d: d.update(benchmarks=[]), "benchmarks is empty"),
])
def test_broken_report_names_the_field(tmp_path, edit, message):
    with pytest.raises(TwinInputError) as exc:
        read_results(write(tmp_path, _broken(edit)))
    assert message in str(exc.value) and "benchmarks.json" in str(exc.value) and "\n" not in str(exc.value)


def test_report_is_recognised_by_content(tmp_path):
    runs = read_results(write(tmp_path, copy.deepcopy(report()), name="sweep-2026-12-03.out"))
    assert len(runs) == 5 and runs[0].name.startswith("sweep-2026-12-03/")
