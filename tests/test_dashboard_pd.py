"""The dashboard on prefill/decode (``disaggregation:``) scenarios: runs through twin.deploy with a diagnosis per
pool, exact pool counts and conservation, the TTFT parts, the form (pools read-only, shared knobs reach both
pools), the cost over both pools, and the page's Pools section headless (AppTest)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from twin.analysis.pool_causes import PER_POOL_NOTE
from twin.dashboard import meaning, share
from twin.dashboard import state as dash
from twin.dashboard.pd_run import link_line, pool_rows
from twin.deploy.pd_pools import resolve_pd
from twin.errors import TwinInputError
from twin.hardware.pricing import PriceTable
from twin.results.records import FINISHED, INCOMPLETE
from twin.scenario import load_scenario

from tests.test_pd_disaggregation import BW_GB_S, LAT_US, PER_TOKEN_S, STEP_S, pd_data

KV_BYTES_PER_TOKEN = 131072          # llama-3.1-8b, bf16: 32 layers x (K, V) x 8 KV heads x 128 dims x 2 bytes


def test_a_pd_run_has_exact_pools_and_a_diagnosis_per_pool():
    run = dash.run_scenario(pd_data(2, 1, num_requests=60, rate=20.0, prompt=500, output=8))
    dis = run.result.config["disaggregation"]
    assert [(p["pool"], p["engines"], p["gpus"]) for p in run.info["pools"]] == [("prefill", 2, 2), ("decode", 1, 1)]
    assert run.info["num_gpus"] == 3 and run.info["num_requests"] == 60
    assert dis["pools"]["prefill"]["engines"] == 2 and dis["pools"]["decode"]["engines"] == 1
    assert dis["pools"]["prefill"]["completed"] == dis["pools"]["decode"]["completed"] == 60
    assert dis["kv_transfer"]["num_transfers"] == 60
    assert dis["kv_transfer"]["total_bytes"] == 60 * 500 * KV_BYTES_PER_TOKEN
    assert run.metrics["completed"] == 60
    assert set(run.pool_diagnoses) == {"prefill", "decode"}
    d = run.diagnosis
    assert d.verdict.startswith(("Prefill pool: ", "Decode pool: "))
    assert "\n\nPrefill pool: " in d.verdict or "\n\nDecode pool: " in d.verdict      # both pools named
    assert d.notes[-1] == PER_POOL_NOTE and d.stats["pool"] in ("prefill", "decode")
    assert d.saturated == any(p.saturated for p in run.pool_diagnoses.values())
    assert dash.headline(run.info).startswith("llama-3.1-8b disaggregated: prefill 2×TP1 A100-SXM-80GB")
    assert meaning.limit_line(run).startswith("**")                                  # the page's lines draw
    # each pool's own steps: the prefill engines are 0 and 1, the decode engine 2
    assert {r.replica for r in run.result.requests} == {2}


def test_ttft_parts_are_exact_in_a_constant_cost_setup():
    run = dash.run_scenario(pd_data(prompt=1000, output=4))
    parts = run.result.config["disaggregation"]["ttft_parts"]
    assert parts["num_requests"] == 1
    assert parts["prefill_ms"] == pytest.approx((STEP_S + PER_TOKEN_S * 1000) * 1e3, rel=1e-12)
    assert parts["link_wait_ms"] == 0.0
    assert parts["transfer_ms"] == pytest.approx((LAT_US * 1e-6 + 1000 * KV_BYTES_PER_TOKEN / (BW_GB_S * 1e9)) * 1e3,
                                                 rel=1e-12)
    assert parts["decode_first_step_ms"] == pytest.approx((STEP_S + PER_TOKEN_S) * 1e3, rel=1e-9)
    assert parts["mean_ttft_ms"] == pytest.approx(run.metrics["mean_ttft_ms"], rel=1e-12)


def test_ttft_parts_add_up_to_the_mean_ttft_under_load():
    run = dash.run_scenario(pd_data(1, 2, num_requests=120, rate=60.0, prompt=800, output=10, warmup_s=0.5))
    parts = run.result.config["disaggregation"]["ttft_parts"]
    assert parts["num_requests"] == run.metrics["completed"] < 120        # the warm-up's requests left out
    total = parts["prefill_ms"] + parts["link_wait_ms"] + parts["transfer_ms"] + parts["decode_first_step_ms"]
    assert total == pytest.approx(run.metrics["mean_ttft_ms"], rel=1e-9)
    assert parts["mean_ttft_ms"] == pytest.approx(run.metrics["mean_ttft_ms"], rel=1e-12)
    assert parts["link_wait_ms"] > 0                                     # one prefill engine's way out queues


def test_requests_are_conserved_across_the_pools_when_the_run_is_cut():
    run = dash.run_scenario(pd_data(1, 1, num_requests=200, rate=200.0, prompt=2000, output=50, max_sim_time_s=0.5))
    recs = run.result.requests
    pools = run.result.config["disaggregation"]["pools"]
    incomplete = sum(r.status == INCOMPLETE for r in recs)
    finished = sum(r.status == FINISHED for r in recs)
    assert incomplete > 0 and finished + incomplete == len(recs)
    # every request that reached the prefill pool either completed at the client or is still in flight
    assert pools["prefill"]["num_requests"] == len(recs) == pools["decode"]["completed"] + incomplete
    assert pools["prefill"]["failed"] == pools["decode"]["failed"] == 0
    rows = {r[""]: r for r in pool_rows(run.result.config["disaggregation"])}
    p = pools["prefill"]
    assert rows["requests: completed / failed / in flight"]["prefill"] == \
        f"{p['completed']:,} / 0 / {p['num_requests'] - p['completed']:,}"
    assert rows["requests: completed / failed / in flight"]["decode"] == f"{finished:,} / 0 / {incomplete:,}"


def test_pool_rows_and_link_line_use_the_shared_number_formats():
    dis = {"pools": {"prefill": {"engines": 2, "gpus": 2, "num_requests": 10, "completed": 9, "failed": 0,
                                 "busy_fraction": 0.5, "mean_queue_length": 1.25, "mean_running_batch": 3.0,
                                 "mean_kv_usage": 0.1, "max_kv_usage": 0.2, "median_ttft_ms": 812.0,
                                 "p99_ttft_ms": 4510.0, "prefix_cache_hit_rate": 0.25, "num_preemptions": 0},
                     "decode": {"engines": 1, "gpus": 1, "num_requests": 10, "completed": 10, "failed": 0,
                                "mean_tpot_ms": 11.5, "p99_tpot_ms": 12.26, "p99_itl_ms": 13.0}},
           "link": {"kind": "infiniband", "bandwidth_gb_s": 25.0, "latency_us": 20.0, "lanes": 1},
           "kv_transfer": {"num_transfers": 1500, "mean_bytes": 131_072_000.0, "mean_transfer_ms": 5.26288,
                           "p99_transfer_ms": 5.26288, "mean_link_wait_ms": 0.0, "p99_link_wait_ms": 10.5}}
    rows = {r[""]: (r["prefill"], r["decode"]) for r in pool_rows(dis)}
    assert rows["engines (GPUs)"] == ("2 (2 GPUs)", "1 (1 GPU)")
    assert rows["busy fraction"] == ("50.0%", "-")
    assert rows["prefill latency p50 / p99 (prefill) · TTFT p50 / p99 (decode)"] == ("812 ms / 4.51 s", "- / -")
    assert rows["TPOT mean / p99"] == ("-", "11.5 ms / 12.3 ms")
    assert rows["prefix-cache hit rate"] == ("25.0%", "-")
    assert link_line(dis) == ("KV link (infiniband, 25.0 GB/s × 1, 20.0 µs): 1,500 transfers, 131 MB each; transfer "
                              "time mean / p99 5.26 ms / 5.26 ms; link queueing mean / p99 0 ms / 10.5 ms")


def test_the_form_shows_the_pools_and_edits_only_what_both_pools_share():
    data = pd_data(2, 1)
    data["server"] = {"max_num_seqs": 64}
    data["disaggregation"]["prefill"]["server"] = {"max_num_batched_tokens": 8192}
    defaults = dash.form_defaults(data)
    for key in ("gpu", "tensor_parallel_size", "replicas", "scheduler", "max_num_batched_tokens", "spec.enabled"):
        assert key not in defaults
    assert defaults["model"] == "llama-3.1-8b" and defaults["max_num_seqs"] == 64
    lines = dash.pool_lines(data)
    assert lines[0] == "prefill: 2 engines × TP1 A100-SXM-80GB (2 GPUs), router round_robin, NixlConnector"
    assert lines[1] == "decode: 1 engine × TP1 A100-SXM-80GB (1 GPU), router round_robin, NixlConnector"
    assert lines[2] == "KV link: infiniband, 25.0 GB/s × 1, 20.0 µs"
    assert lines[3] == "per pool, max_num_batched_tokens: prefill 8192, decode 2048 (set by the prefill pool)"
    assert dash.pool_lines(dash.with_experiment({k: v for k, v in data.items() if k != "disaggregation"})) is None
    # a shared knob changed once reaches both pools
    whatif = dash.apply_form(data, {**defaults, "max_num_seqs": 16, "enable_prefix_caching": False}, defaults)
    pd = resolve_pd(dash.validate(whatif))
    for pool in ("prefill", "decode"):
        sc = pd.deployments[pool].scheduler_config
        assert (sc.max_num_seqs, sc.enable_prefix_caching) == (16, False)
    assert pd.deployments["prefill"].scheduler_config.max_num_batched_tokens == 8192
    assert whatif["disaggregation"] == data["disaggregation"]               # the pools as the file has them
    # a shared URL cannot set what the page does not offer for pools
    with pytest.raises(TwinInputError, match=r"^URL parameter w\.replicas: not a setting of this scenario"):
        share.decode({"w.replicas": "3"}, defaults)


def test_the_cost_counts_both_pools_gpus():
    run = dash.run_scenario(pd_data(2, 1, num_requests=20, rate=20.0, prompt=300, output=8))
    price = PriceTable().get("A100-SXM-80GB")
    c = meaning.cost(run)
    assert c["usd_per_hour"] == pytest.approx(3 * price, rel=1e-12)
    assert c["usd_per_gpu_hour"] == pytest.approx(price, rel=1e-12)
    assert "× 3 GPUs" in meaning.cost_line(run)


def test_a_sweep_point_runs_a_pd_body():
    point = dash.run_sweep_point(pd_data(num_requests=40, rate=10.0, prompt=300, output=8), "rate", 5.0)
    assert point["completed"] == 40 and point["load"] == "5 req/s" and point["failed"] == 0


def test_the_bundled_scenario_offers_its_pd_variants():
    sc = load_scenario("pd_disaggregation")
    assert {"baseline", "colocated-3", "1p1d", "2p1d", "1p2d"} <= set(dash.start_points(sc))
    raw = copy.deepcopy(sc.raw("1p1d"))
    assert "gpu" not in dash.form_defaults(raw, None)


# ---- the page, headless ---------------------------------------------------------------------------------------
APP = str(Path(__file__).resolve().parent.parent / "app.py")


def test_the_page_shows_the_pools_of_a_pd_variant_against_the_colocated_baseline():
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["s:bundled"] = "pd_disaggregation"
    at.run()
    start = [w for w in at.selectbox if w.key.startswith("e:") and w.key.endswith(":start")]
    start[0].set_value("2p1d").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert "Pools (prefill/decode)" in [s.value for s in at.subheader]
    table = at.dataframe[-1].value
    assert list(table.columns) == ["", "prefill", "decode"]
    assert table.iloc[0].tolist() == ["engines (GPUs)", "2 (2 GPUs)", "1 (1 GPU)"]
    captions = [c.value for c in at.caption]
    assert any(c.startswith("KV link (infiniband, 25.0 GB/s × 1, 20.0 µs): 1,500 transfers") for c in captions)
    assert any(c.startswith("Colocated: one deployment of 2×1 A100-SXM-80GB") for c in captions)
    assert any(c.startswith("Mean over the completed requests") for c in captions)
    assert len(at.get("plotly_chart")) == 2        # the latency CDFs and where TTFT goes
    assert any(w.value.startswith(("Prefill pool: ", "Decode pool: ")) for w in [*at.warning, *at.success])
    # the pools are shown, not edited: no GPU, tensor-parallel or replica widget
    keys = [w.key for w in [*at.selectbox, *at.number_input]]
    assert not any(k.endswith((":gpu", ":tensor_parallel_size", ":replicas")) for k in keys)
    # a knob both pools share: changed once, the what-if runs with it
    [w for w in at.number_input if w.key.endswith(":max_num_seqs")][0].set_value(32).run()
    assert not at.exception and not at.error
    assert at.query_params["w.max_num_seqs"] == "32"
    assert "Changes: variant **2p1d**; max_num_seqs: 256 → 32" in [m.value for m in at.markdown]
    at.segmented_control(key="s:chart").set_value("Step time").run()
    assert not at.exception and not at.error
    assert len(at.get("plotly_chart")) == 2        # where TTFT goes, and the step split per pool


def test_an_uploaded_pd_scenario_may_not_name_a_server_file_in_a_pool():
    import yaml

    data = pd_data()
    data["disaggregation"]["prefill"]["gpu"] = "/etc/passwd"
    with pytest.raises(TwinInputError, match=r"disaggregation\.prefill\.gpu ./etc/passwd. is not allowed"):
        dash.scenario_from_yaml(yaml.safe_dump(data), "up.yaml")


def test_downloads_and_the_limit_line_of_a_pd_run():
    import json

    run = dash.run_scenario(pd_data(2, 1, num_requests=20, rate=20.0, prompt=300, output=8))
    data = json.loads(dash.result_json(run))
    assert data["completed"] == 20 and data["twin"]["diagnosis"]["verdict"] == run.diagnosis.verdict
    assert dash.requests_csv(run).decode().count("\n") == 21            # a header and one line per request
    line = meaning.limit_line(run)
    assert line.endswith(f"({run.diagnosis.stats['pool']} pool)**") or line.endswith(
        f"({run.diagnosis.stats['pool']} pool)")


def test_the_charts_and_the_load_sweep_draw_for_a_pd_what_if():
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["s:bundled"] = "pd_disaggregation"
    at.run()
    [w for w in at.selectbox if w.key.startswith("e:") and w.key.endswith(":start")][0].set_value("1p1d").run()
    for chart in ("Server over time", "Batch composition", "Prefix cache"):
        at.segmented_control(key="s:chart").set_value(chart).run()
        assert not at.exception and not at.error, chart
        over_both = any(c.value.startswith("A prefill/decode run's lines") for c in at.caption)
        assert over_both == (chart == "Server over time")
    at.segmented_control(key="s:chart").set_value("Throughput vs latency").run()
    n = len(at.get("plotly_chart"))
    at.toggle(key="s:sweep").set_value(True).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert len(at.get("plotly_chart")) == n + 1
