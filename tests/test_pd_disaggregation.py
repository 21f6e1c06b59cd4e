"""Prefill/decode disaggregation (twin.deploy): exact TTFT in a constant-cost setup, KV bytes by the model's
layout, conservation of requests across the pools, the link's layer-wise overlap and one-line input errors."""

from __future__ import annotations

import pytest

from twin.core.request import Request
from twin.deploy.pd_pools import resolve_pd
from twin.deploy.run import resolve_for_run, run_body
from twin.errors import TwinInputError
from twin.hardware.catalog import resolve_gpu, resolve_model
from twin.hardware.kv_link import KvLink, kv_transfer_bytes_per_token, resolve_link
from twin.results.records import FINISHED, INCOMPLETE, REJECTED
from twin.scenario import Scenario, ScenarioBody

from tests.core_helpers import make_sched, step

STEP_S, PER_TOKEN_S = 0.01, 1e-5
BW_GB_S, LAT_US = 25.0, 20.0


def pd_data(prefill: int = 1, decode: int = 1, *, num_requests: int = 1, rate: float = 1.0, prompt: int = 1000,
            output: int = 4, link: dict | None = None, **extra) -> dict:
    """A constant-cost P/D scenario mapping (prefill and decode pools of Llama-3.1-8B on A100s, an IB link)."""
    return {
        "deployment": {"gpu": "A100-SXM-80GB", "model": "llama-3.1-8b"},
        "cost_model": {"kind": "constant", "params": {"step_s": STEP_S, "per_token_s": PER_TOKEN_S}},
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": rate}, "num_requests": num_requests,
                     "dataset": {"kind": "random", "input_len": prompt, "output_len": output, "range_ratio": 0.0,
                                 "ignore_eos": True}},
        "disaggregation": {
            "prefill": {"replicas": prefill, "kv_transfer_config": {"kv_role": "kv_producer"}},
            "decode": {"replicas": decode, "kv_transfer_config": {"kv_role": "kv_consumer"}},
            "link": link or {"kind": "infiniband", "bandwidth_gb_s": BW_GB_S, "latency_us": LAT_US}},
        **extra,
    }


def pd_body(*args, **kwargs) -> ScenarioBody:
    return ScenarioBody.model_validate(pd_data(*args, **kwargs))


def test_kv_transfer_bytes_per_token_is_the_models_kv_layout():
    llama = resolve_model("llama-3.1-8b")      # 32 layers x (K, V) x 8 KV heads x 128 dims x 2 bytes
    assert kv_transfer_bytes_per_token(llama, "bf16") == 32 * 2 * 8 * 128 * 2 == 131072
    assert kv_transfer_bytes_per_token(llama, "fp8") == 32 * 2 * 8 * 128 * 1
    ds = resolve_model("deepseek-v3")          # MLA: (kv_lora_rank 512 + rope 64) per layer, once
    assert kv_transfer_bytes_per_token(ds, "bf16") == 61 * (512 + 64) * 2
    # the figure the run moves: prompt tokens x bytes per token, every request
    result = run_body(pd_body(num_requests=3, prompt=700))
    kv = result.config["disaggregation"]["kv_transfer"]
    assert kv["num_transfers"] == 3
    assert kv["total_bytes"] == 3 * 700 * 131072
    assert result.config["disaggregation"]["kv_bytes_per_token"] == 131072


def test_ttft_is_prefill_plus_transfer_plus_first_decode_step():
    result = run_body(pd_body(prompt=1000, output=4))
    rec, = result.requests
    prefill_s = STEP_S + PER_TOKEN_S * 1000                      # one step computes the whole prompt
    transfer_s = LAT_US * 1e-6 + 1000 * 131072 / (BW_GB_S * 1e9)  # latency + bytes / bandwidth
    first_step_s = STEP_S + PER_TOKEN_S * 1                      # the decode recomputes the last prompt token
    assert rec.first_token_s - rec.arrival_s == pytest.approx(prefill_s + transfer_s + first_step_s, rel=1e-12)
    assert rec.status == FINISHED and rec.num_output_tokens == 4
    # then one token per decode step
    assert rec.finish_s - rec.first_token_s == pytest.approx(3 * first_step_s, rel=1e-12)
    assert rec.replica == 1          # engines: 0 prefill, 1 decode


def test_layerwise_ttft_exposes_only_what_the_prefill_step_could_not_hide():
    link = {"kind": "infiniband", "bandwidth_gb_s": BW_GB_S, "latency_us": LAT_US, "layerwise": True}
    rec, = run_body(pd_body(prompt=1000, output=2, link=link)).requests
    prefill_s = STEP_S + PER_TOKEN_S * 1000
    wire_s = 1000 * 131072 / (BW_GB_S * 1e9)              # 5.2 ms, less than the 20 ms step hides
    exposed_s = LAT_US * 1e-6 + max(wire_s / 32, wire_s - prefill_s * 31 / 32)
    assert exposed_s == LAT_US * 1e-6 + wire_s / 32
    assert rec.first_token_s - rec.arrival_s == pytest.approx(prefill_s + exposed_s + STEP_S + PER_TOKEN_S,
                                                              rel=1e-12)


def test_closed_loop_clients_wait_for_their_answer_across_the_pools():
    data = pd_body(2, 1, num_requests=40, prompt=300, output=5).model_dump(exclude_none=True)
    data["workload"]["arrivals"] = {"process": "closed_loop", "concurrency": 4}
    result = run_body(ScenarioBody.model_validate(data))
    recs = sorted(result.requests, key=lambda r: r.arrival_s)
    assert len(recs) == 40 and all(r.status == FINISHED for r in recs)
    # never more than 4 in flight: each client sends its next request when the last one finished
    events = sorted([(r.arrival_s, 1) for r in recs] + [(r.finish_s, -1) for r in recs], key=lambda e: (e[0], e[1]))
    live = peak = 0
    for _, d in events:
        live += d
        peak = max(peak, live)
    assert peak == 4


def test_layerwise_transfer_hides_behind_the_last_prefill_step():
    link = KvLink("infiniband", 10e9, 5e-6, 1, True, 32)
    wire = 1e9 / 10e9                     # 0.1 s on the wire
    # a long step hides all but the last layer's share
    assert link.exposed_s(1e9, 10.0) == pytest.approx(5e-6 + wire / 32)
    # a short step hides (L-1)/L of itself
    assert link.exposed_s(1e9, 0.032) == pytest.approx(5e-6 + wire - 0.032 * 31 / 32)
    assert KvLink("infiniband", 10e9, 5e-6, 1, False, 32).exposed_s(1e9, 10.0) == pytest.approx(5e-6 + wire)
    # two tensor-parallel rank pairs move their shares at once
    assert KvLink("nvlink", 10e9, 0.0, 2, False, 32).exposed_s(1e9, 0.0) == pytest.approx(wire / 2)


def test_requests_are_conserved_across_the_pools():
    body = pd_body(2, 1, num_requests=300, rate=40.0, prompt=600, output=20)
    result = run_body(body)
    dis = result.config["disaggregation"]
    recs = result.requests
    assert len(recs) == 300
    assert all(r.status == FINISHED for r in recs)
    assert dis["pools"]["prefill"]["num_requests"] == 300
    assert dis["pools"]["prefill"]["completed"] == 300
    assert dis["kv_transfer"]["num_transfers"] == 300
    assert dis["pools"]["decode"]["completed"] == 300
    assert {r.replica for r in recs} == {2}            # every client request finished on the decode engine
    assert sum(r.num_output_tokens for r in recs) == 300 * 20
    # every transfer after its prefill, every first token after its transfer could have ended
    assert all(r.first_token_s >= r.arrival_s + 2 * STEP_S for r in recs)


def test_a_run_cut_short_leaves_requests_incomplete_not_lost():
    body = pd_body(1, 1, num_requests=200, rate=200.0, prompt=2000, output=50, max_sim_time_s=0.5)
    result = run_body(body)
    recs = result.requests
    assert 0 < len(recs) < 200 and max(r.arrival_s for r in recs) <= 0.5   # the arrivals before the cut
    assert result.config["disaggregation"]["pools"]["prefill"]["num_requests"] == len(recs)
    statuses = {r.status for r in recs}
    assert INCOMPLETE in statuses and statuses <= {FINISHED, INCOMPLETE}


def test_a_prompt_the_prefill_pool_cannot_hold_is_rejected_and_counted():
    data = pd_body(num_requests=2).model_dump(exclude_none=True)
    data["disaggregation"]["prefill"]["server"] = {"max_model_len": 512}
    body = ScenarioBody.model_validate(data)
    recs = run_body(body).requests
    assert [r.status for r in recs] == [REJECTED, REJECTED]
    assert "max_model_len" in recs[0].reject_reason


def test_decode_admission_counts_the_delivered_kv_once():
    sched = make_sched(max_model_len=200, max_num_batched_tokens=100)
    r = Request("a", 0.0, 40, 3)
    r.load_kv_async = True
    sched.add_request(r)
    step(sched)                                          # blocks allocated, the pull starts
    sched.finish_remote_load(r)                          # the delivered KV: 39 tokens computed
    out, _ = step(sched)
    assert out.num_new_tokens == [1]                     # only the last prompt token is computed
    assert len(sched.kv_cache_manager.get_block_ids("a")) == 3   # 40 tokens in blocks of 16
    assert r.num_output_tokens == 1
    # after a preemption the delivered KV counts no more: what the prefix cache kept of it (its 2 full blocks,
    # registered when the step computed them) is a hit, the rest is recomputed
    sched.running.remove(r)
    sched._preempt(r)
    out, _ = step(sched)
    assert out.num_new_tokens == [41 - 32]


def test_link_and_role_errors_are_one_line():
    with pytest.raises(TwinInputError, match=r"kv_role: 'kv_consumer' cannot produce"):
        Scenario({**pd_body().model_dump(exclude_none=True),
                  "disaggregation": {"prefill": {"kv_transfer_config": {"kv_role": "kv_consumer"}}}}).body()
    with pytest.raises(TwinInputError, match=r"kv_connector: 'MooncakeConnector' differs"):
        Scenario({**pd_body().model_dump(exclude_none=True),
                  "disaggregation": {"decode": {"kv_transfer_config": {"kv_connector": "MooncakeConnector"}}}}).body()
    with pytest.raises(TwinInputError, match=r"more than one NVLink domain of 8"):
        resolve_pd(pd_body(5, 4, link={"kind": "nvlink"}))
    a100, h100 = resolve_gpu("A100-SXM-80GB"), resolve_gpu("H100-SXM")
    with pytest.raises(TwinInputError, match="joins GPUs of one type"):
        resolve_link("nvlink", a100, h100, resolve_model("llama-3.1-8b"), 1, 1, 2)
    data = pd_body().model_dump(exclude_none=True)
    with pytest.raises(TwinInputError, match="disaggregation: with speculative_decoding is not modelled"):
        Scenario({**data, "speculative_decoding": {"method": "ngram", "num_speculative_tokens": 2,
                                                        "acceptance": {"rate": 0.5}}}).body()


def test_nvlink_default_bandwidth_is_half_the_bidirectional_figure():
    pd = resolve_for_run(pd_body(link={"kind": "nvlink"}))
    assert pd.link.bandwidth_bytes_per_s == 600e9 / 2
    assert pd.link.latency_s == 10e-6


def test_the_bundled_scenario_shows_where_disaggregation_helps_and_where_it_loses():
    from twin.deploy.run import metrics_of
    from twin.scenario import load_scenario

    sc = load_scenario("pd_disaggregation")
    runs = {}
    for name in ("colocated-3", "2p1d", "1p1d", "1p1d-nvlink"):
        body = sc.body(name)
        result = run_body(body, sc.base_dir)
        runs[name] = (metrics_of(result, body), result.config.get("disaggregation"))
    co, pd2, pd1, nv = (runs[n][0] for n in ("colocated-3", "2p1d", "1p1d", "1p1d-nvlink"))
    # on the same 3 A100s: decode without prefills in its batches gives a far lower TPOT ...
    assert pd2["median_tpot_ms"] < 0.6 * co["median_tpot_ms"]
    # ... but two prefill engines queue more than three colocated ones: TTFT p99 is worse
    assert pd2["p99_ttft_ms"] > co["p99_ttft_ms"]
    # one prefill A100 cannot keep up with 25 req/s of 1000-token prompts, whatever the link
    assert runs["1p1d"][1]["pools"]["prefill"]["busy_fraction"] > 0.95
    assert pd1["median_ttft_ms"] > 10 * pd2["median_ttft_ms"]
    assert runs["1p1d-nvlink"][1]["kv_transfer"]["mean_transfer_ms"] < 0.2 * runs["1p1d"][1]["kv_transfer"]["mean_transfer_ms"]
    assert nv["median_ttft_ms"] == pytest.approx(pd1["median_ttft_ms"], rel=0.01)


def test_one_seed_one_result():
    body = pd_body(2, 2, num_requests=120, rate=30.0, prompt=500, output=8,
                   link={"kind": "roce", "bandwidth_gb_s": 10, "layerwise": True})
    a, b = run_body(body), run_body(body)
    assert [(r.first_token_s, r.finish_s, r.replica) for r in a.requests] == \
        [(r.first_token_s, r.finish_s, r.replica) for r in b.requests]
    assert a.config["disaggregation"] == b.config["disaggregation"]


def test_twin_run_prints_where_the_mean_ttft_goes():
    from twin.cli.pd_output import pd_pool_lines
    dis = {"ttft_parts": {"num_requests": 3, "prefill_ms": 561.2, "link_wait_ms": 2.3, "transfer_ms": 5.26,
                          "decode_first_step_ms": 34.3, "mean_ttft_ms": 603.06}}
    assert pd_pool_lines("2p1d", dis) == [
        "2p1d mean TTFT 603 ms = prefill 561 ms + link wait 2.30 ms + transfer 5.26 ms + decode blocks, queue and "
        "first step 34.3 ms"]
    assert pd_pool_lines("x", {"ttft_parts": {"num_requests": 0}}) == []
