"""`twin diagnose` reads the per-request files `twin calibrate --from-results` reads, through the same readers
(``twin.analysis.measured_readers``), and the twin's own ``--json`` names its model so `twin calibrate
--from-results` reads it back without ``--model``.

Each format holds the same six hand-written requests (one failed); each must give the requests a `vllm bench
serve` JSON with ``start_times`` gives (arrivals re-based to 0, TTFT, E2E latency, token counts), exactly up to
the format's own rounding."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from tests.client_layouts import Req, guidellm_doc, write_aiperf
from twin.analysis.measured import load_measured
from twin.cli.main import main
from twin.errors import TwinInputError
from twin.fitting.readers import read_results
from twin.hardware.catalog import resolve_model
from twin.results.export import served_model, write_json
from twin.scenario import load_scenario
from twin.sim.run import run_body

T0 = 1_700_000_000.0          # epoch send times, as the clients write them
REQS = [Req(T0 + 0.00, 0.050, 0.410, 120, 4, [0.050, 0.170, 0.290, 0.410]),
        Req(T0 + 0.25, 0.080, 0.500, 300, 3, [0.080, 0.290, 0.500]),
        Req(T0 + 0.50, None, None, 64, 0),
        Req(T0 + 0.75, 0.060, 0.300, 40, 2, [0.060, 0.300]),
        Req(T0 + 1.00, 0.070, 0.670, 512, 5, [0.070, 0.220, 0.370, 0.520, 0.670]),
        Req(T0 + 1.50, 0.040, 0.160, 16, 2, [0.040, 0.160])]
OK = [r for r in REQS if r.ok]


def _bench(path):
    """The reference: a `vllm bench serve --save-detailed` JSON of the same requests."""
    doc = {"backend": "vllm", "completed": len(OK), "failed": 1, "request_throughput": 3.0, "mean_ttft_ms": 60.0,
           "input_lens": [r.prompt for r in REQS], "output_lens": [r.output for r in REQS],
           "ttfts": [r.ttft_s or 0.0 for r in REQS], "latencies": [r.e2el_s or 0.0 for r in REQS],
           "start_times": [r.send_s - T0 for r in REQS], "errors": ["" if r.ok else "failed" for r in REQS]}
    path.write_text(json.dumps(doc))
    return path


def _inference_perf(path):
    rows = []
    for r in REQS:
        if r.ok:
            info = {"input_tokens": r.prompt, "output_tokens": r.output,
                    "output_token_times": [r.send_s + t for t in r.token_times_s]}
            rows.append({"start_time": r.send_s, "end_time": r.send_s + r.e2el_s, "info": info, "error": None})
        else:
            rows.append({"start_time": r.send_s, "end_time": None, "info": None,
                         "error": {"error_type": "timeout", "error_msg": "timed out"}})
    path.write_text(json.dumps(rows))
    return path


def _table_rows():
    return [{"send_time": r.send_s, "ttft": r.ttft_s, "latency": r.e2el_s, "prompt_tokens": r.prompt,
             "output_tokens": r.output if r.ok else None} for r in REQS]


def _jsonl(path):
    path.write_text("".join(json.dumps(row) + "\n" for row in _table_rows()))
    return path


def _json_list(path):
    path.write_text(json.dumps(_table_rows()))
    return path


def _aiperf(path):
    return write_aiperf(path.parent / "aiperf", REQS, concurrency=2, rate=None) / "profile_export.jsonl"


def _guidellm(path):
    path.write_text(json.dumps(guidellm_doc([({"type_": "concurrent", "streams": 2}, REQS)])))
    return path


FORMATS = {"inference-perf per_request_lifecycle_metrics.json": (_inference_perf, "per_request.json", None),
           "JSON Lines table": (_jsonl, "requests.jsonl", None),
           "JSON list table": (_json_list, "requests.json", None),
           "AIPerf profile_export.jsonl (closed loop, 2 users)": (_aiperf, "x.jsonl", 2),
           "GuideLLM report with every request (2 streams)": (_guidellm, "benchmarks.json", 2)}


@pytest.mark.parametrize("kind", FORMATS)
def test_every_per_request_format_gives_the_same_requests(tmp_path, kind):
    write, name, users = FORMATS[kind]
    ref = load_measured(_bench(tmp_path / "bench.json"))
    m = load_measured(write(tmp_path / name))
    order = np.argsort(ref.arrival_s, kind="stable")
    for field in ("arrival_s", "ttft_s", "e2el_s"):
        np.testing.assert_allclose(getattr(m, field), getattr(ref, field)[order], rtol=0, atol=1e-6, err_msg=field)
    for field in ("input_lens", "output_lens"):
        assert getattr(m, field).tolist() == getattr(ref, field)[order].tolist(), field
    assert m.num_failed == 1 and m.notes == ["1 failed request left out"]
    assert m.max_concurrency == users and m.hit_rate is None


def test_diagnose_prints_a_verdict_on_an_inference_perf_per_request_file(tmp_path):
    path = _inference_perf(tmp_path / "per_request_lifecycle_metrics.json")
    res = CliRunner().invoke(main, ["diagnose", str(path)])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("per_request_lifecycle_metrics.json: 5 completed requests\nverdict: ")


def test_an_aiperf_aggregate_alone_says_what_to_bring(tmp_path):
    agg = write_aiperf(tmp_path / "aiperf", REQS, concurrency=2, rate=None) / "profile_export_aiperf.json"
    (agg.parent / "profile_export.jsonl").unlink()
    with pytest.raises(TwinInputError) as exc:
        load_measured(agg)
    assert str(exc.value) == (
        f"{agg} (AIPerf profile_export): lists no per-request times for every request (a summary, or a sample of "
        f"the requests): nothing to replay; bring the client's per-request file; twin calibrate --from-results "
        f"fits the twin to this file as it is")


def test_a_guidellm_sample_of_the_requests_is_not_replayed(tmp_path):
    doc = guidellm_doc([({"type_": "concurrent", "streams": 2}, REQS)])
    doc["benchmarks"][0]["requests"]["successful"] = doc["benchmarks"][0]["requests"]["successful"][:3]
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TwinInputError, match=r"\(GuideLLM benchmarks.json/.yaml\): lists no per-request times"):
        load_measured(path)


def test_a_file_of_several_runs_names_them(tmp_path):
    rows = [{**row, "concurrency": 1 + i % 2} for i, row in enumerate(_table_rows())]
    path = tmp_path / "sweep.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(TwinInputError) as exc:
        load_measured(path)
    assert str(exc.value) == (f"{path}: holds 2 runs (sweep/c1, sweep/c2); twin diagnose reads one run: pick one "
                              f"with --run NAME (twin calibrate --from-results reads them all)")


def test_the_readers_hostile_input_checks_apply(tmp_path):
    """A request ending before it started: the inference-perf reader's own error, as `twin calibrate` gives it."""
    path = _inference_perf(tmp_path / "per_request.json")
    rows = json.loads(path.read_text())
    rows[1]["end_time"] = rows[1]["start_time"] - 1.0
    path.write_text(json.dumps(rows))
    with pytest.raises(TwinInputError) as exc:
        load_measured(path)
    with pytest.raises(TwinInputError) as calibrate:
        read_results(path)
    assert str(exc.value) == str(calibrate.value) and "end_time = " in str(exc.value)


def test_a_bench_json_and_a_summary_keep_diagnoses_own_reading(tmp_path):
    """Files no per-request calibration reader claims read as before (a vllm bench serve JSON, a summary)."""
    m = load_measured(_bench(tmp_path / "bench.json"))
    assert m.source == str(tmp_path / "bench.json") and len(m) == 5
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"backend": "vllm", "completed": 400, "mean_ttft_ms": 31.2, "request_throughput": 9.9}))
    with pytest.raises(TwinInputError, match="saved without --save-detailed"):
        load_measured(path)


def test_served_model():
    assert served_model({"model": "tiny"}) == "tiny"
    assert served_model({"deployment": {"model": "llama-3.1-8b", "gpu": "H100-SXM"}}) == "llama-3.1-8b"
    assert served_model({"deployment": {"model": None}}) is None and served_model({}) is None


def test_the_twins_json_names_its_model_and_calibrate_reads_it_back(tmp_path):
    sc = load_scenario("concurrency_cap_trap")
    body = sc.body("baseline", {"workload": {"num_requests": 8}})
    path = write_json(run_body(body, sc.base_dir), tmp_path / "run.json")
    doc = json.loads(path.read_text())
    assert doc["model_id"] == "llama-3.1-8b" == doc["twin"]["config"]["deployment"]["model"]
    (run,) = read_results(path)
    assert run.model == "llama-3.1-8b" and resolve_model(run.model).name == body.deployment.model


def test_the_twins_run_as_an_inference_perf_per_request_file_gets_the_bench_jsons_diagnosis(tmp_path):
    """The same requests (the twin's concurrency_cap_trap run) as a `vllm bench serve` JSON and as inference-perf's
    per-request file (epoch times, one output_token_times entry per token): the same verdict and fit, once the
    closed loop's 16 users are given (inference-perf's file does not state them)."""
    sc = load_scenario("concurrency_cap_trap")
    bench = write_json(run_body(sc.body("baseline", {}), sc.base_dir), tmp_path / "bench.json")
    doc = json.loads(bench.read_text())
    rows = []
    for s, ttft, lat, p, o, gaps in zip(doc["start_times"], doc["ttfts"], doc["latencies"], doc["input_lens"],
                                         doc["output_lens"], doc["itls"], strict=True):
        times = list(T0 + s + ttft + np.concatenate([[0.0], np.cumsum(gaps)]))
        times[-1] = T0 + s + lat      # the last token ends the request: no rounding past end_time (a closed
        # loop's next request starts at that very time; a later last token would overlap it)
        rows.append({"start_time": T0 + s, "end_time": T0 + s + lat, "error": None,
                     "info": {"input_tokens": p, "output_tokens": o, "output_token_times": times}})
    per_request = tmp_path / "per_request_lifecycle_metrics.json"
    per_request.write_text(json.dumps(rows))
    out = {}
    for path, extra in ((bench, []), (per_request, ["--max-concurrency", "16"])):
        res = CliRunner().invoke(main, ["diagnose", str(path), "--scenario", "concurrency_cap_trap", *extra])
        assert res.exit_code == 0, res.output
        out[path.name] = res.output.splitlines()[1:]
    assert out["bench.json"] == out[per_request.name]
    assert out["bench.json"][0] == ("verdict: Concurrency cap of 4 sequences (max_num_seqs = 4): 12 of 16 streams "
                                    "queue behind it")
