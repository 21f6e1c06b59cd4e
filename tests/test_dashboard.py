"""Dashboard glue without Streamlit: settings in and out of a scenario, uploads, runs, sweeps, downloads."""

from __future__ import annotations

import csv
import io
import json

import pytest

from twin.dashboard import state as dash
from twin.errors import TwinInputError
from twin.scenario import load_scenario

SMALL = {
    "name": "small",
    "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
    "server": {"max_num_seqs": 8, "max_model_len": 8192},
    "workload": {
        "arrivals": {"process": "poisson", "rate_per_s": 4},
        "num_requests": 40,
        "classes": [{"name": "chat", "share": 1.0,
                     "prompt": {"shared_prefix_tokens": 500,
                                "suffix_tokens": {"lognormal": {"median": 200, "sigma": 0.5}}},
                     "output_tokens": {"uniform": [50, 150]}}],
    },
    "slo": {"ttft_ms": 1000},
    "seed": 3,
}


def test_bundled_scenarios_start_with_the_dashboard_default():
    names = list(dash.bundled_scenarios())
    assert names[0] == dash.DEFAULT_SCENARIO
    assert "concurrency_cap_trap" in names
    with pytest.raises(TwinInputError, match="not bundled"):
        dash.load_bundled("no-such-scenario")


def test_form_defaults_resolve_vllm_defaults():
    d = dash.form_defaults(dict(SMALL, server={"max_model_len": 8192}))
    assert d["max_num_seqs"] == 1024 and d["max_num_batched_tokens"] == 16384  # vLLM 0.28 serve on an H100
    assert d["gpu"] == "H100-SXM" and d["arrival_mode"] == "rate" and d["rate_per_s"] == 4.0
    assert d["classes.0.suffix_tokens"] == 200 and d["classes.0.output_tokens"] == 100
    assert d["classes.0.shared_prefix_tokens"] == 500
    assert "time_scale" not in d


def test_unchanged_form_gives_back_the_same_scenario():
    d = dash.form_defaults(SMALL)
    assert dash.apply_form(SMALL, dict(d), d) == SMALL
    assert dash.describe_changes(d, dict(d)) == []


def test_changes_are_written_into_the_scenario_and_described():
    d = dash.form_defaults(SMALL)
    values = dict(d, max_num_seqs=32, enable_prefix_caching=False, rate_per_s=6.0,
                  **{"classes.0.suffix_tokens": 400, "classes.0.output_tokens": 200})
    raw = dash.apply_form(SMALL, values, d)
    assert raw["server"] == {"max_num_seqs": 32, "max_model_len": 8192, "enable_prefix_caching": False}
    assert raw["workload"]["arrivals"] == {"process": "poisson", "rate_per_s": 6.0}
    assert raw["workload"]["classes"][0]["prompt"]["suffix_tokens"] == {"lognormal": {"median": 400, "sigma": 0.5}}
    assert raw["workload"]["classes"][0]["output_tokens"] == {"uniform": [100, 300]}
    assert SMALL["server"] == {"max_num_seqs": 8, "max_model_len": 8192}  # the input is not touched
    text = dash.describe_changes(d, values, dash.class_names(SMALL))
    assert "max_num_seqs: 8 → 32" in text and "prefix caching: on → off" in text
    assert "chat suffix tokens: 200 → 400" in text


def test_switching_to_closed_loop_replaces_the_arrivals():
    d = dash.form_defaults(SMALL)
    raw = dash.apply_form(SMALL, dict(d, arrival_mode="concurrency", concurrency=12), d)
    assert raw["workload"]["arrivals"] == {"process": "closed_loop", "concurrency": 12}
    dash.validate(raw)


def test_bad_widget_value_is_a_one_line_input_error():
    d = dash.form_defaults(SMALL)
    raw = dash.apply_form(SMALL, dict(d, max_num_batched_tokens=4), d)
    with pytest.raises(TwinInputError, match=r"max_num_batched_tokens \(4\) must be >= max_num_seqs \(8\)"):
        dash.run_scenario(raw)


def test_length_centres_move_each_kind_of_distribution():
    assert dash.length_center(300) == 300 and dash.with_center(300, 10) == 10
    assert dash.with_center({"fixed": 5}, 7) == {"fixed": 7}
    assert dash.with_center({"normal": {"mean": 10, "std": 2}}, 20) == {"normal": {"mean": 20, "std": 2}}
    assert dash.length_center({"empirical": {"path": "x.csv", "column": "a"}}) is None


@pytest.mark.skipif(not dash.speculative_supported() or "speculative_decoding" not in dash.bundled_scenarios(),
                    reason="no speculative_decoding section or scenario")
def test_speculative_settings_turn_it_on_off_and_set_one_acceptance():
    sc = load_scenario("speculative_decoding")
    raw = sc.raw()
    d = dash.form_defaults(raw)
    assert d["spec.enabled"] and d["spec.method"] == "eagle" and d["spec.num_speculative_tokens"] == 4
    assert d["spec.acceptance_rate"] is None  # per-class acceptance: kept unless the user sets one rate
    off = dash.apply_form(raw, dict(d, **{"spec.enabled": False}), d)
    assert off["speculative_decoding"] is None
    dm = dash.apply_form(raw, dict(d, **{"spec.method": "draft_model", "spec.acceptance_rate": 0.6}), d)
    spec = dm["speculative_decoding"]
    assert spec["method"] == "draft_model" and spec["draft_model"] == dash.DEFAULT_DRAFT_MODEL
    assert spec["acceptance"] == {"default": {"rate": 0.6}}
    dash.validate(dm)
    plain = dash.form_defaults(SMALL)
    on = dash.apply_form(SMALL, dict(plain, **{"spec.enabled": True}), plain)
    assert on["speculative_decoding"]["acceptance"] == {"default": {"rate": dash.DEFAULT_ACCEPTANCE}}
    dash.validate(on)


def test_uploaded_yaml_errors_name_the_line():
    with pytest.raises(TwinInputError, match=r"up\.yaml:\d+:\d+: malformed YAML"):
        dash.scenario_from_yaml(b"workload:\n  arrivals: [unclosed\n", "up.yaml")
    with pytest.raises(TwinInputError, match="server.max_num_seqs"):
        dash.scenario_from_yaml("server: {max_num_seqs: 0}\nworkload: {}\n", "up.yaml")
    with pytest.raises(TwinInputError, match="empty"):
        dash.scenario_from_yaml("", "up.yaml")


def test_uploaded_trace_becomes_a_scenario(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    text = "num_prefill_tokens,num_decode_tokens\n" + "\n".join(f"{100 + i},{20 + i}" for i in range(30)) + "\n"
    path = dash.save_upload(text.encode(), "lengths.csv")
    assert path.parent == tmp_path / dash.UPLOAD_DIR_NAME and path.suffix == ".csv"
    assert dash.save_upload(text.encode(), "again.csv") == path  # content-addressed
    sc = dash.trace_scenario(path, "lengths.csv")
    raw = sc.raw()
    assert raw["workload"]["arrivals"] == {"process": "poisson", "rate_per_s": 4.0}  # no timestamps in the file
    d = dash.form_defaults(raw)
    assert d["arrival_mode"] == "rate" and d["time_scale"] == 1.0
    out = dash.run_scenario(dash.with_experiment(raw, seed=1, trace_window_s=None))
    assert out.metrics["completed"] == 30


def test_run_output_downloads_and_cards():
    base = dash.run_scenario(SMALL)
    assert base.info["max_num_seqs"] == 8 and base.metrics["completed"] == 40
    data = json.loads(dash.result_json(base))
    assert data["completed"] == 40 and len(data["ttfts"]) == 40
    assert data["twin"]["diagnosis"]["limit"] == base.diagnosis.limit
    rows = list(csv.DictReader(io.StringIO(dash.requests_csv(base).decode())))
    assert len(rows) == 40 and "ttft_s" in rows[0]
    d = dash.form_defaults(SMALL)
    whatif = dash.run_scenario(dash.apply_form(SMALL, dict(d, max_num_seqs=2), d))
    cards = {c["key"]: c for c in dash.headline_cards(base.metrics, whatif.metrics)}
    assert cards["p99_ttft_ms"]["delta"].startswith("+") and cards["p99_ttft_ms"]["delta_color"] == "inverse"
    assert cards["request_throughput"]["delta_color"] == "normal"
    same = dash.headline_cards(base.metrics, base.metrics)
    assert all(c["delta"] is None for c in same)
    table = dash.comparison_rows(base.metrics, whatif.metrics)
    assert {"metric", "baseline", "what-if", "change", "verdict"} <= set(table[0])


def test_sweep_plan_shares_loads_and_adds_the_whatif_point():
    d = dash.form_defaults(SMALL)
    whatif = dash.apply_form(SMALL, dict(d, rate_per_s=5.0), d)
    plan = dash.sweep_plan(SMALL, whatif)
    base_loads = [v for _, v in plan["baseline"]]
    assert base_loads == [1.0, 2.0, 3.0, 4.0, 6.0, 8.0]
    assert [v for _, v in plan["what-if"]] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0]
    closed = load_scenario("concurrency_cap_trap").raw()
    assert [v for _, v in dash.sweep_plan(closed, closed)["baseline"]] == [4.0, 8.0, 12.0, 16.0, 24.0, 32.0]


def test_sweep_point_is_a_short_run_at_the_given_load():
    shaped = dash.with_load(dict(SMALL, workload=dict(SMALL["workload"], duration_s=600)), "rate", 2.0, 25)
    assert shaped["workload"]["num_requests"] == 25 and shaped["workload"]["duration_s"] is None
    point = dash.run_sweep_point(SMALL, "rate", 2.0)
    assert point["load"] == "2 req/s" and point["completed"] == 40
    assert point["output_throughput"] > 0 and point["p99_ttft_ms"] > 0


def test_experiment_settings_apply_seed_window_and_profile():
    raw = load_scenario("azure_conversation_replay").raw()
    assert dash.trace_window_default(raw) == dash.TRACE_WINDOW_S
    out = dash.with_experiment(raw, seed=7, trace_window_s=120.0, profile_path="/p.json")
    assert out["seed"] == 7 and out["workload"]["trace"]["window_s"] == 120.0
    assert out["cost_model"] == {"kind": "profile", "profile": "/p.json"}
    assert dash.trace_window_default(SMALL) is None


@pytest.mark.skipif(not dash.profile_supported(), reason="twin.cost.profile not present")
def test_calibrated_profile_replaces_the_cost_model(tmp_path):
    raw = load_scenario("concurrency_cap_trap").raw()
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TwinInputError, match="not valid JSON"):
        dash.run_scenario(dash.with_experiment(raw, profile_path=str(bad)))
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"format": "twin-profile", "version": 1, "cost_model": {
        "coefficients": {"step": 0.006, "seqs": 2e-5, "tokens": 3e-5}}}))
    out = dash.run_scenario(dash.with_experiment(raw, profile_path=str(good)))
    assert out.metrics["completed"] == 64
    assert out.diagnosis.stats["step_split_source"] == "roofline"  # a profile has no compute/memory split


# ------------------------------------------------------------------------------------------------ safety
def test_the_dashboard_listens_on_loopback_by_default():
    import tomllib
    from pathlib import Path

    config = tomllib.loads((Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "streamlit run app.py" in readme and "0.0.0.0" not in readme


@pytest.mark.parametrize("text, field", [
    ("workload: {trace: {path: /etc/passwd}}\n", "workload.trace.path '/etc/passwd'"),
    ("workload: {trace: {path: ../../etc/passwd}}\n", "workload.trace.path '../../etc/passwd'"),
    ("cost_model: {kind: profile, profile: ~/.ssh/id_rsa.json}\nworkload: {num_requests: 5}\n",
     "cost_model.profile '~/.ssh/id_rsa.json'"),
    ("deployment: {gpu: /home/x/gpu.yaml}\nworkload: {num_requests: 5}\n", "deployment.gpu '/home/x/gpu.yaml'"),
    ("workload: {num_requests: 5}\nvariants: {v: {workload: {trace: {path: /etc/shadow}}}}\n",
     "variants.v.workload.trace.path"),
])
def test_an_uploaded_scenario_may_not_name_server_paths(text, field):
    with pytest.raises(TwinInputError) as err:
        dash.scenario_from_yaml(text, "up.yaml")
    msg = str(err.value)
    assert msg.startswith(f"up.yaml: {field}") and "is not allowed" in msg and "\n" not in msg


def test_an_uploaded_scenario_may_name_bundled_traces_and_uploads():
    up = dash.save_upload(b"prompt_tokens,output_tokens\n10,5\n", "lengths.csv")
    sc = dash.scenario_from_yaml(f"workload: {{trace: {{path: '{up}'}}}}\n", "up.yaml")
    assert sc.raw()["workload"]["trace"]["path"] == str(up)
    dash.scenario_from_yaml("workload: {trace: {path: '{traces}/azure_llm_2023_conv.csv'}}\n", "up.yaml")
    assert dash.scenario_from_yaml(json.dumps(SMALL), "up.yaml").raw() == SMALL  # catalogue names, not paths


def test_a_run_too_large_for_the_page_is_refused_before_simulating():
    raw = dict(SMALL, workload=dict(SMALL["workload"], arrivals={"process": "poisson", "rate_per_s": 1000},
                                    duration_s=100, num_requests=None))
    with pytest.raises(TwinInputError, match=r"about 100,000 requests; the dashboard runs at most 50,000"):
        dash.run_scenario(raw)
    assert dash.expected_requests(dash.validate(SMALL)) == 40


# ------------------------------------------------------------------------------------------------ worker
def test_a_worker_is_ended_on_cancel_and_on_its_time_limit():
    import time

    from twin.dashboard import worker

    job = worker.Job(time.sleep, 60, label="sleep")
    assert not job.done()
    job.cancel()
    assert not job.process.is_alive() and job.process.exitcode is not None
    slow = worker.Job(time.sleep, 60, label="slow", limit_s=0.5)
    t0 = time.monotonic()
    while not slow.done():
        time.sleep(0.05)
    assert time.monotonic() - t0 < 30 and not slow.process.is_alive()
    with pytest.raises(TwinInputError, match="longer than 0.5 s"):
        slow.result()
    fine = worker.Job(dash.run_scenario, SMALL, label="small")
    worker.run_jobs({"small": fine}, tick=lambda pending: None)
    assert fine.result().metrics["completed"] == 40
    bad = worker.Job(dash.run_scenario, dict(SMALL, server={"max_num_seqs": 0}), label="bad")
    worker.run_jobs({"bad": bad}, tick=lambda pending: None)
    with pytest.raises(TwinInputError, match="max_num_seqs"):
        bad.result()


# ------------------------------------------------------------------------------------------------ meaning
def test_offered_load_above_what_is_served_is_named_first():
    from twin.dashboard import meaning

    over = dash.run_scenario(dict(SMALL, workload=dict(SMALL["workload"], arrivals={"process": "poisson",
                                                                                    "rate_per_s": 400},
                                                         num_requests=400)))
    load = meaning.offered_vs_served(over)
    assert load["offered"] == 400 and load["served"] < 0.95 * 400 and load["overloaded"]
    assert meaning.limit_line(over).startswith("**Binding limit: offered load (400 req/s) above what this server "
                                               "sustains (")
    calm = dash.run_scenario(SMALL)
    assert not meaning.offered_vs_served(calm)["overloaded"]
    line = meaning.slo_line(calm)
    assert line.startswith("SLO TTFT ≤ 1000 ms: ") and "of requests meet it" in line and "goodput" in line


def test_cost_per_million_tokens_from_the_price_table():
    from twin.dashboard import meaning
    from twin.hardware.pricing import PriceTable

    run = dash.run_scenario(SMALL)
    c = meaning.cost(run, PriceTable({"H100-SXM": 3.6}, use_defaults=False))
    tok_s = run.metrics["output_throughput"]
    assert c["usd_per_m_output"] == pytest.approx(3.6 / (tok_s * 3600) * 1e6, rel=1e-12)
    assert meaning.cost(run, PriceTable({}, use_defaults=False)) is None
    assert "per million output tokens" in meaning.cost_line(run)
    assert meaning.model_line(run).startswith("Cost model: roofline")


def test_numbers_fit_a_card():
    from twin.dashboard import meaning

    assert meaning.fit("output_throughput", 1916.4) == "1,916"
    assert meaning.fit("output_throughput", 123456789.0) == "123M"
    assert meaning.fit("p99_e2el_ms", 45678.9) == "45.7 s"
    assert meaning.fit("p99_e2el_ms", 239832.0) == "4.00 min"
    assert meaning.fit("p99_e2el_ms", 4567890.0) == "1.27 h"
    assert meaning.fit("completed", 239832) == "240k"
    assert meaning.exact("p99_e2el_ms", 239832.4171) == "239,832.417 ms"
    assert meaning.exact("output_throughput", 1916.4) == "1,916.4 tok/s"


# ------------------------------------------------------------------------------------------------ sharing
def test_url_state_round_trips_and_rejects_what_it_cannot_type():
    from twin.dashboard import share

    d = dash.form_defaults(SMALL)
    changes = {"max_num_seqs": 32, "enable_prefix_caching": False, "rate_per_s": 6.5}
    params = share.encode("chat_shared_prompt", "baseline", 3, changes)
    assert params == {"scenario": "chat_shared_prompt", "start": "baseline", "seed": "3", "w.enable_prefix_caching":
                      "false", "w.max_num_seqs": "32", "w.rate_per_s": "6.5"}
    assert share.decode(params, d) == changes
    with pytest.raises(TwinInputError, match=r"w.max_num_seqs='lots': expected a number"):
        share.decode({"w.max_num_seqs": "lots"}, d)
    with pytest.raises(TwinInputError, match=r"w.enable_prefix_caching='maybe': expected true or false"):
        share.decode({"w.enable_prefix_caching": "maybe"}, d)
    with pytest.raises(TwinInputError, match=r"w.time_scale: not a setting of this scenario"):
        share.decode({"w.time_scale": "2"}, d)


def test_the_what_if_yaml_is_a_scenario_that_runs_the_same():
    from twin.dashboard import share
    from twin.scenario import Scenario
    from twin.yaml_input import parse_yaml

    d = dash.form_defaults(SMALL)
    whatif = dash.apply_form(SMALL, dict(d, max_num_seqs=4), d)
    text = share.scenario_yaml(whatif).decode()
    assert parse_yaml(text, "whatif.yaml") == whatif
    assert Scenario(parse_yaml(text, "whatif.yaml")).body().server.max_num_seqs == 4


def test_a_length_only_trace_runs_without_a_replay_window():
    from twin.workload.trace_formats import LENGTH_COLUMN_DEFAULTS

    rows = "".join(f"{100 + i},{20 + i}\n" for i in range(30))
    path = dash.save_upload(("%s,%s\n" % LENGTH_COLUMN_DEFAULTS + rows).encode(), "lengths.csv")
    sc = dash.trace_scenario(path, "lengths.csv")
    assert dash.trace_window_default(sc.raw()) is None  # no timestamps: no window to offer
    raw = dash.with_experiment(sc.raw(), seed=0, trace_window_s=300.0)
    assert "window_s" not in raw["workload"]["trace"]
    assert dash.run_scenario(raw).metrics["completed"] == 30


def test_messages_render_as_written():
    from twin.dashboard.messages import WORD_JOINER, plain

    assert plain("header (a, :x:)") == f"header (a, :{WORD_JOINER}x:)"    # no emoji shortcode left
    assert plain("*bold* `code` [link](u) $x$ _em_") == r"\*bold\* \`code\` \[link\](u) \$x\$ \_em\_"
    assert plain("max_num_seqs: 4 → 16") == "max_num_seqs: 4 → 16"        # underscores inside words stay
    assert plain("# not a heading") == r"\# not a heading" and plain("1. x") == r"1\. x"


def test_an_uploaded_traces_error_names_the_users_file_and_advice_that_mode_allows(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    path = dash.save_upload(b"when,:x:,tokens\n1,2,3\n", "my trace.csv")
    with pytest.raises(TwinInputError) as err:
        dash.trace_scenario(path, "my trace.csv")
    text = str(err.value)
    assert text.startswith("my trace.csv:1: cannot tell the trace format") and str(tmp_path) not in text
    assert "workload.trace.format to one of" not in text and "upload a scenario YAML" in text
    zero = dash.save_upload(b"num_prefill_tokens,num_decode_tokens\n10,0\n", "zeros.csv")
    with pytest.raises(TwinInputError, match=r"^zeros\.csv:2: .*Upload trace refuses such rows") as err:
        dash.trace_scenario(zero, "zeros.csv")
    assert str(tmp_path) not in str(err.value)


def test_runs_are_shown_baseline_first_and_blue_whichever_finishes_first():
    from twin.results.figures import PALETTE, latency_cdfs

    base = dash.run_scenario(SMALL)
    whatif = dash.run_scenario(dash.apply_form(SMALL, dict(dash.form_defaults(SMALL), max_num_seqs=2),
                                               dash.form_defaults(SMALL)))
    configs = {dash.BASELINE_LABEL: SMALL, dash.WHATIF_LABEL: {}}
    for finished in ({dash.WHATIF_LABEL: whatif, dash.BASELINE_LABEL: base},
                     {dash.BASELINE_LABEL: base, dash.WHATIF_LABEL: whatif}):
        runs = dash.in_config_order(configs, finished)
        assert list(runs) == [dash.BASELINE_LABEL, dash.WHATIF_LABEL]
        fig = latency_cdfs({name: run.result for name, run in runs.items()})
        first = fig.data[0]
        assert first.name == dash.BASELINE_LABEL and first.line.color == PALETTE[0] == "#1f77b4"  # blue
        assert fig.data[-1].name == dash.WHATIF_LABEL and fig.data[-1].line.color != PALETTE[0]


def test_messages_name_uploads_by_the_users_file_name(tmp_path):
    from twin.dashboard.messages import name_uploads

    saved = tmp_path / "twin-dashboard-uploads" / "0123abcd.json"
    text = f"Baseline: cost_model.profile {saved}: not a profile (no 'format')"
    assert name_uploads(text, {str(saved): "my profile.json"}) == \
        "Baseline: cost_model.profile my profile.json: not a profile (no 'format')"
    assert name_uploads(text, {}) == text
