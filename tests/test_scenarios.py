"""The bundled what-if scenarios: each loads and validates, and each shows its effect because of what the
scheduler and the cost model do, not because a number was put in. Tests run small, seeded versions of the
scenarios (overrides on the bundled files) and state why each threshold is safe."""

from __future__ import annotations

import numpy as np
import pytest

from twin.sim.run import metrics_of, run_body
from twin.scenario import list_scenarios, load_scenario

BUNDLED = {"concurrency_cap_trap", "azure_conversation_replay", "static_vs_continuous", "prefix_caching_agentic",
           "chunked_prefill_itl"}


def run(name: str, variant: str = "baseline", overrides: dict | None = None):
    sc = load_scenario(name)
    body = sc.body(variant, overrides)
    result = run_body(body, sc.base_dir)
    return result, metrics_of(result, body)


def test_every_bundled_scenario_and_variant_validates():
    found = {p.stem for p in list_scenarios()}
    assert BUNDLED <= found
    for path in list_scenarios():
        sc = load_scenario(path)
        assert sc.baseline_data.get("description"), path.stem
        for name in sc.names():
            sc.body(name)  # raises on any invalid variant
    assert set(load_scenario("static_vs_continuous").names()) == {
        "baseline", "static-varied", "continuous-equal", "static-equal"}
    assert set(load_scenario("prefix_caching_agentic").names()) == {
        "baseline", "caching-on", "caching-on-timestamped"}
    assert set(load_scenario("chunked_prefill_itl").names()) == {"baseline", "chunked-8192", "no-chunking"}


# ---- the concurrency-cap trap: the TTFT staircase ---------------------------------------------------------------
def _first_wave(result, n=16):
    wave = [r for r in result.requests if r.arrival_s == 0.0]
    assert len(wave) == n
    return wave


# the staircase is the scheduler's: take the request path's random part out to see its steps exactly
STEADY_PATH = {"cost_model": {"params": {"request_path_jitter_s": 0.0}}}


def test_concurrency_cap_staircase_on_the_roofline_model():
    capped, m_capped = run("concurrency_cap_trap", overrides=STEADY_PATH)
    default, m_default = run("concurrency_cap_trap", "vllm-default", overrides=STEADY_PATH)
    wave = sorted(_first_wave(capped), key=lambda r: r.ttft_s)
    ttft = np.array([r.ttft_s for r in wave])
    # one service time, measured from the model: the first four streams' time from first to last token
    service = float(np.mean([r.finish_s - r.first_token_s for r in wave[:4]]))
    assert 1.0 < service < 3.0  # 255 weight-bound decode steps of an 8B model on an H100 (about 7 ms each)
    fast, slow = ttft[:4], ttft[4:]
    assert fast.max() < 0.05 * service                   # 4 streams start at once
    assert slow.min() > 0.95 * service                   # 12 wait at least one whole service time
    # the staircase: wave k starts when wave k-1 ends, so its TTFT is k x (the first wave's E2EL) + its own
    # prefill step (the first wave's TTFT)
    period = float(np.mean([r.e2el_s for r in wave[:4]]))
    for k in (1, 2, 3):
        assert ttft[4 * k:4 * k + 4] == pytest.approx([k * period + fast.mean()] * 4, rel=0.01)
    # the cause, visible in the server counters: 4 running, the other 12 queued
    assert m_capped["mean_running_batch"] == pytest.approx(4.0, rel=0.01)
    assert m_capped["mean_queue_length"] > 8
    # the default cap runs all 16 at once: each decode step reads the weights once for 16 tokens instead of
    # 4, and at this batch size costs only a little more, so throughput is ~4x (assert > 2.5x)
    ttft_default = [r.ttft_s for r in _first_wave(default)]
    assert max(ttft_default) == min(ttft_default) < 0.2 * service  # all 16 prompts in one 8,192-token step
    assert m_default["mean_running_batch"] == pytest.approx(16.0, rel=0.01)
    assert m_default["request_throughput"] > 2.5 * m_capped["request_throughput"]
    assert m_default["p99_ttft_ms"] < 0.1 * m_capped["p99_ttft_ms"]


def test_concurrency_cap_staircase_is_exact_on_a_constant_cost_model():
    # a constant 10 ms step: the wave's TTFTs must be k x (256 steps) + one prefill step, exactly
    step = 0.01
    result, _ = run("concurrency_cap_trap", overrides={
        "cost_model": {"kind": "constant", "params": {"step_s": step}}, "workload": {"num_requests": 16}})
    ttft = sorted(r.ttft_s for r in _first_wave(result))
    expected = [k * 256 * step + step for k in range(4) for _ in range(4)]
    assert ttft == pytest.approx(expected, abs=1e-9)


# ---- prefix caching for an agentic workload ------------------------------------------------------------------
def test_prefix_caching_cuts_ttft_and_a_timestamp_header_undoes_it():
    small = {"workload": {"duration_s": 40}}
    _, off = run("prefix_caching_agentic", overrides=small)
    _, on = run("prefix_caching_agentic", "caching-on", small)
    _, stamped = run("prefix_caching_agentic", "caching-on-timestamped", small)
    assert off["completed"] == on["completed"] == stamped["completed"] > 250
    # with caching each prompt prefills ~200 task tokens instead of ~3,200 (a 3,000-token shared prefix):
    # the prefill work falls ~15x, so the median TTFT falls far more than the asserted 3x
    assert on["prefix_cache_hit_rate"] > 0.8
    assert on["median_ttft_ms"] * 3 < off["median_ttft_ms"]
    assert on["p99_ttft_ms"] * 3 < off["p99_ttft_ms"]
    # a unique first block makes every later block miss: hit rate ~0 and most of the gain is lost
    assert stamped["prefix_cache_hit_rate"] < 0.02
    lost = (stamped["median_ttft_ms"] - on["median_ttft_ms"]) / (off["median_ttft_ms"] - on["median_ttft_ms"])
    assert lost > 0.8


# ---- static against continuous batching ------------------------------------------------------------------------
def test_static_batching_falls_behind_only_when_output_lengths_vary():
    """32 closed-loop streams, 32 sequences either way. A static batch runs until its longest request ends, so its
    decode efficiency is mean / max output length over the batch: 1 with equal lengths; for a lognormal with
    sigma 1.2 the max of 32 draws is ~6-10x the mean, so static throughput is ~0.15-0.3 of continuous (decode
    steps are weight-bound and cost about the same at any batch size). Asserted: >= 0.85 with equal lengths
    (both run the same batches; only prefill scheduling differs), <= 0.5 with varied lengths."""
    small = {"workload": {"num_requests": 128}}
    thr = {}
    for variant in ("baseline", "static-varied", "continuous-equal", "static-equal"):
        result, m = run("static_vs_continuous", variant, small)
        assert m["completed"] == 128
        thr[variant] = m["output_throughput"]
        if variant == "static-varied":
            static_varied = m
    assert thr["static-equal"] >= 0.85 * thr["continuous-equal"]
    assert thr["static-varied"] <= 0.5 * thr["baseline"]
    # the cause: the static batch's live sequences dwindle while its longest request finishes
    assert static_varied["mean_running_batch"] < 0.5 * 32


# ---- chunked prefill and the ITL tail --------------------------------------------------------------------------
def test_chunked_prefill_lowers_the_itl_tail():
    small = {"workload": {"duration_s": 30}}
    chunked, m_on = run("chunked_prefill_itl", overrides=small)
    whole, m_off = run("chunked_prefill_itl", "no-chunking", small)
    assert m_on["completed"] == m_off["completed"] > 150
    # without chunking a 6-12K-token prompt is one step; decodes sharing it wait that long
    steps = whole.steps
    long_prefill = steps.column("duration_s")[steps.column("num_prefill_tokens") >= 6000]
    assert len(long_prefill) > 0
    assert m_off["p99_itl_ms"] > 0.5 * 1000 * np.median(long_prefill)
    # with a 2,048-token budget no step is longer than ~one chunk, so the tail is several times lower
    assert steps.column("num_new_tokens").max() > 6000 >= chunked.steps.column("num_new_tokens").max()
    assert m_on["p99_itl_ms"] * 2 < m_off["p99_itl_ms"]
    assert m_on["max_kv_usage"] < 1.0 and m_off["num_preemptions"] == 0
