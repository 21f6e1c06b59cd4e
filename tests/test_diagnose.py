"""``twin diagnose``: measured per-request results in, causes out.

The story end to end: a server capped at max_num_seqs = 4 under 16 closed-loop streams (made with the twin and
written as a ``vllm bench serve`` JSON) is diagnosed as a cap of 4 with 12 streams queued, the fit picks 4 with
high confidence; the same traffic with the cap lifted (vLLM's default) shows no cap. Also: CSV input, input
without a scenario (measurements only), reconstructing closed-loop arrivals, KV preemption, a prefix cache that
does not hit, and bad input as one-line errors."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from twin.sim.run import run_body
from twin.cli.main import main
from twin.analysis.diagnose import (
    CONCURRENCY_CAP,
    KV_PREEMPTION,
    NONE,
    PREFIX_CACHE,
    diagnose_measured,
)
from twin.analysis.measured import load_measured, measured_from_bench
from twin.analysis.measured_profile import profile
from twin.errors import TwinInputError
from twin.results.export import to_bench_serve_json, write_json, write_table
from twin.scenario import load_scenario


@pytest.fixture(scope="module")
def cap_trap():
    return load_scenario("concurrency_cap_trap")


def _bench_doc(sc, variant, overrides=None, **metadata):
    result = run_body(sc.body(variant, overrides), sc.base_dir)
    return result, json.loads(json.dumps(to_bench_serve_json(result, metadata=metadata or None), default=str))


@pytest.fixture(scope="module")
def capped(cap_trap, tmp_path_factory):
    """Results of the capped server, as vllm bench serve writes them for --max-concurrency 16."""
    result, doc = _bench_doc(cap_trap, "baseline", max_concurrency=16, request_rate="inf")
    path = tmp_path_factory.mktemp("capped") / "capped.json"
    write_json(doc, path)
    return result, doc, path


@pytest.fixture(scope="module")
def lifted(cap_trap, tmp_path_factory):
    result, doc = _bench_doc(cap_trap, "vllm-default", max_concurrency=16, request_rate="inf")
    path = tmp_path_factory.mktemp("lifted") / "lifted.json"
    write_json(doc, path)
    return result, doc, path


def test_story_names_the_cap_of_four_and_the_twelve_queued_streams(capped, tmp_path):
    _, _, path = capped
    out = tmp_path / "report"
    res = CliRunner().invoke(main, ["diagnose", str(path), "--scenario", "concurrency_cap_trap", "--out", str(out)])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "Concurrency cap of 4 sequences (max_num_seqs = 4): 12 of 16 streams queue behind it" in text
    assert "TTFT staircase" in text
    data = json.loads((out / "diagnosis.json").read_text())
    assert data["cap"] == 4 and data["queued_streams"] == 12 and data["offered_concurrency"] == 16
    assert data["causes"][0]["kind"] == CONCURRENCY_CAP
    fit = data["fit"]
    assert fit["best"]["max_num_seqs"] == 4 and fit["best"]["binds"]
    assert fit["confidence"] == "high" and fit["margin"] > 0.5
    assert fit["runner_up"]["max_num_seqs"] != 4
    md = (out / "diagnosis.md").read_text()
    assert md.startswith("# Diagnosis: capped.json") and "## Fit" in md
    html = (out / "diagnosis.html").read_text()
    assert "plotly" in html.lower() and "TTFT against arrival time" in html


def test_staircase_waves_and_the_opening_burst(capped):
    _, doc, _ = capped
    prof = profile(measured_from_bench(doc, "capped"))
    # 4 served at once, then 4 after one service time, 4 after two; the closed loop settles at three waits
    assert prof.waves == {0: 4, 1: 4, 2: 4, 3: 52}
    assert prof.burst_size == 16 and prof.burst_fast == 4
    assert prof.max_decoding == 4 and prof.max_in_flight == 16
    assert prof.staircase and prof.cap_evidence


def test_lifted_cap_shows_no_cap(lifted, tmp_path):
    _, _, path = lifted
    res = CliRunner().invoke(main, ["diagnose", str(path), "--scenario", "concurrency_cap_trap", "--out",
                                    str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "Concurrency cap" not in res.output and "the server keeps up" in res.output
    data = json.loads((tmp_path / "diagnosis.json").read_text())
    assert data["cap"] is None and data["queued_streams"] is None
    assert [c["kind"] for c in data["causes"]] == [NONE]
    assert data["fit"]["best"]["uncapped"] and not data["fit"]["best"]["binds"]
    assert data["fit"]["confidence"] == "high"


def test_open_loop_replay_and_measurements_only_agree(capped):
    """Without max_concurrency the measured arrivals are replayed as they came; without a scenario the
    measurements alone still name the cap."""
    _, doc, _ = capped
    d = {k: v for k, v in doc.items() if k != "max_concurrency"}
    sc = load_scenario("concurrency_cap_trap")
    rep = diagnose_measured(measured_from_bench(d, "open"), sc.body(), sc.base_dir)
    assert rep.cap == 4 and rep.queued_streams == 12 and not rep.fit.closed_loop
    alone = diagnose_measured(measured_from_bench(doc, "alone"))
    assert alone.fit is None and alone.cap == 4 and alone.queued_streams == 12


def test_csv_of_request_times(capped, tmp_path):
    result, _, _ = capped
    path = tmp_path / "requests.csv"
    write_table(result.requests_frame(), path)  # what `twin run --requests-out` writes
    res = CliRunner().invoke(main, ["diagnose", str(path), "--scenario", "concurrency_cap_trap",
                                    "--max-concurrency", "16", "--candidates", "2,4,8,16"])
    assert res.exit_code == 0, res.output
    assert "Concurrency cap of 4" in res.output and "12 of 16 streams" in " ".join(res.output.split())


def test_closed_loop_arrivals_rebuilt_without_start_times(capped):
    _, doc, _ = capped
    d = {k: v for k, v in doc.items() if k != "start_times"}
    m = measured_from_bench(d, "no-starts")
    assert any("reconstructed" in n for n in m.notes)
    # the first 16 start at once, the 17th when the first finishes
    assert (m.arrival_s[:16] == 0).all() and m.arrival_s[16] == pytest.approx(min(m.e2el_s[:16]))
    assert diagnose_measured(m).cap == 4


def test_kv_preemption_named_when_the_pool_is_small(cap_trap):
    small = {"server": {"num_gpu_blocks_override": 400, "max_model_len": 4096}}
    result, doc = _bench_doc(cap_trap, "vllm-default", small, max_concurrency=16)
    assert result.num_preemptions > 0
    rep = diagnose_measured(measured_from_bench(doc, "kv"), cap_trap.body("vllm-default", small), cap_trap.base_dir)
    kinds = [c.kind for c in rep.causes]
    assert KV_PREEMPTION in kinds and CONCURRENCY_CAP not in kinds
    kv = next(c for c in rep.causes if c.kind == KV_PREEMPTION)
    assert kv.likelihood == "likely" and any("stall mid-stream" in e for e in kv.evidence)


def test_prefix_cache_below_what_the_traffic_allows():
    """Measured with caching off, diagnosed against a deployment meant to cache: the fit prefers a cache that
    does not hit; a measured hit rate of 0 says so directly."""
    sc = load_scenario("prefix_caching_agentic")
    short = {"workload": {"duration_s": 15}}
    _, doc = _bench_doc(sc, "baseline", short)
    body = sc.body("caching-on", short)
    m = measured_from_bench(doc, "agentic")
    rep = diagnose_measured(m, body, sc.base_dir, candidates=[4, 1024])
    cause = next(c for c in rep.causes if c.kind == PREFIX_CACHE)
    assert "attainable" in cause.title and not rep.fit.best.prefix_caching
    rep2 = diagnose_measured(m, body, sc.base_dir, candidates=[1024], hit_rate=0.0)
    cause2 = next(c for c in rep2.causes if c.kind == PREFIX_CACHE)
    assert cause2.likelihood == "likely" and "measured hit rate 0%" in cause2.evidence[0]


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("ttfts"), "'ttfts' is missing"),
    (lambda d: d["latencies"].pop(), "'latencies' has 63 entries, 'input_lens' has 64"),
    (lambda d: d["start_times"].append(1.0), "'start_times' has 65 entries"),
    (lambda d: d["ttfts"].__setitem__(3, "fast"), "ttfts[3] = 'fast': must be a number >= 0"),
    (lambda d: d["ttfts"].__setitem__(2, 1e6), "ttfts[2] = 1e+06 s exceeds latencies[2]"),
    (lambda d: [d.pop("start_times"), d.pop("max_concurrency"), d.pop("request_rate")], "needs 'start_times'"),
    (lambda d: d.__setitem__("input_lens", []), "'input_lens' is empty"),
])
def test_bad_bench_json_is_one_line(capped, tmp_path, edit, message):
    _, doc, _ = capped
    d = json.loads(json.dumps(doc))
    edit(d)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(TwinInputError) as err:
        load_measured(path)
    assert message in str(err.value) and "\n" not in str(err.value)
    res = CliRunner().invoke(main, ["diagnose", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert len([line for line in res.output.splitlines() if line.strip()]) == 1


@pytest.mark.parametrize("text, message", [
    ("arrival_s,first_token_s,num_prompt_tokens,num_output_tokens\n0,0.1,10,5\n", "no finish column"),
    ("arrival_s,first_token_s,finish_s,num_output_tokens\n0,0.1,1,5\n", "no input column"),
    ("arrival_s,first_token_s,finish_s,num_prompt_tokens,num_output_tokens\n0,0.5,0.2,10,5\n",
     "row 2: times out of order"),
    ("arrival_s,first_token_s,finish_s,num_prompt_tokens,num_output_tokens\nsoon,0.5,1,10,5\n",
     "row 2: arrival_s = 'soon': must be a number"),
])
def test_bad_csv_is_one_line(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(TwinInputError) as err:
        load_measured(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_missing_file_and_set_without_scenario(tmp_path, capped):
    res = CliRunner().invoke(main, ["diagnose", str(tmp_path / "nope.json")])
    assert res.exit_code == 2 and "no such file" in res.output
    res = CliRunner().invoke(main, ["diagnose", str(capped[2]), "--set", "server.max_num_seqs=8"])
    assert res.exit_code == 2 and "--set: needs --scenario" in res.output


def test_vllm_results_without_latencies_use_ttft_plus_itls(capped):
    """Recent vllm bench serve files carry ttfts and itls but no latencies."""
    _, doc, _ = capped
    d = {k: v for k, v in doc.items() if k != "latencies"}
    m = measured_from_bench(d, "vllm")
    full = measured_from_bench(doc, "twin")
    assert m.e2el_s == pytest.approx(full.e2el_s)
    assert any("TTFT + the sum of the ITLs" in n for n in m.notes)
    d.pop("itls")
    with pytest.raises(TwinInputError, match="'latencies' is missing \\(or 'e2els'"):
        measured_from_bench(d, "vllm")


def test_failed_requests_are_left_out(capped):
    _, doc, _ = capped
    d = json.loads(json.dumps(doc))
    d["output_lens"][5] = 0
    d["ttfts"][5] = d["latencies"][5] = 0.0
    d["itls"][5] = []
    m = measured_from_bench(d, "failed")
    assert len(m) == 63 and m.num_failed == 1 and math.isfinite(m.ttft_s.max())
