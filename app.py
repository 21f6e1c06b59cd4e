"""What-if dashboard for the LLM-serving twin: ``streamlit run app.py``.

Thin on purpose: the sidebar collects a configuration, `twin.dashboard.state` turns it into scenario mappings and
runs them (cached on scenario + seed), `twin.analysis.causes` names the binding limit and `twin.results.figures` draws.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pandas as pd
import streamlit as st

from twin.dashboard import state as dash
from twin.results import figures
from twin.errors import TwinInputError

SOURCES = ("Bundled scenario", "Upload scenario YAML", "Upload trace")
SCHEDULERS = ("continuous", "prefill_first", "static")
PREFIX_HEADERS = ("none", "timestamp", "shuffled_sections")

run_cached = st.cache_data(show_spinner=False, max_entries=16)(dash.run_scenario)  # a run can hold ~10 MB
sweep_cached = st.cache_data(show_spinner=False, max_entries=512)(dash.run_sweep_point)


def fail(message: str) -> None:
    """Bad input: one message in the page, nothing below it."""
    st.error(message)
    st.stop()


def reset_on_change(marker: str, context: Any, prefix: str) -> None:
    """Widgets under ``prefix`` start again from their defaults when ``context`` changes."""
    if st.session_state.get(marker) != context:
        for key in [k for k in st.session_state if str(k).startswith(prefix)]:
            del st.session_state[key]
        st.session_state[marker] = context


# ------------------------------------------------------------------------------------------------ sidebar
def choose_scenario():
    st.sidebar.header("Scenario")
    source = st.sidebar.radio("Source", SOURCES, key="s:source", label_visibility="collapsed")
    if source == SOURCES[0]:
        bundled = dash.bundled_scenarios()
        name = st.sidebar.selectbox("Bundled scenario", list(bundled), key="s:bundled")
        return dash.load_bundled(name), str(bundled[name].parent), f"bundled:{name}"
    if source == SOURCES[1]:
        up = st.sidebar.file_uploader("Scenario YAML", type=["yaml", "yml"], key="s:yaml")
        if up is None:
            st.info("Upload a scenario YAML file (the format of `scenarios/*.yaml`) in the sidebar.")
            st.stop()
        data = up.getvalue()
        return dash.scenario_from_yaml(data, up.name), None, "yaml:" + hashlib.sha256(data).hexdigest()
    up = st.sidebar.file_uploader("Trace (Azure / BurstGPT / length CSV, Mooncake JSONL)",
                                  type=["csv", "jsonl", "json"], key="s:trace")
    if up is None:
        st.info("Upload a trace file in the sidebar; it is replayed on the default deployment.")
        st.stop()
    path = dash.save_upload(up.getvalue(), up.name)
    return dash.trace_scenario(path, up.name), None, f"trace:{path.name}"


def experiment_settings(scenario, scenario_id: str) -> dict[str, Any]:
    reset_on_change("_scenario", scenario_id, "e:")
    st.sidebar.header("Experiment")
    base_raw = scenario.raw()
    seed = st.sidebar.number_input("Seed", min_value=0, value=int(base_raw.get("seed", 0) or 0), step=1,
                                   key="e:seed", help="Same seed, same traffic: the baseline and the what-if "
                                   "see identical requests.")
    window = dash.trace_window_default(base_raw)
    if window is not None:
        window = st.sidebar.number_input("Replay window (s of trace, 0 = all)", min_value=0.0, value=window,
                                         step=60.0, key="e:window")
    profile_path = None
    if dash.profile_supported():
        up = st.sidebar.file_uploader("Calibrated profile (JSON)", type=["json"], key="e:profile",
                                      help="Replaces the roofline cost model in both runs.")
        if up is not None:
            profile_path = str(dash.save_upload(up.getvalue(), up.name))
    names = dash.start_points(scenario)
    start = st.sidebar.selectbox("What-if starts from", names, index=names.index(dash.default_start(scenario)),
                                 key="e:start", help="The baseline or one of the scenario's variants; the "
                                 "settings below change it further.")
    return {"seed": seed, "trace_window_s": window, "profile_path": profile_path, "start": start}


def _lo(bound: float, value: float | None) -> float:
    """A widget's lower bound that never rejects the scenario's own value (validation judges it instead)."""
    return bound if value is None else min(bound, value)


def whatif_settings(d: dict[str, Any], classes: list[str]) -> dict[str, Any]:
    """The what-if widgets, each starting at the configuration's own (resolved) value."""
    v: dict[str, Any] = {}
    sb = st.sidebar
    sb.header("What-if settings")
    with sb.expander("Deployment", expanded=True):
        gpus, models = dash.gpu_options(d["gpu"]), dash.model_options(d["model"])
        v["gpu"] = st.selectbox("GPU", gpus, index=gpus.index(d["gpu"]), key="w:gpu")
        v["model"] = st.selectbox("Model", models, index=models.index(d["model"]), key="w:model")
        c1, c2 = st.columns(2)
        v["tensor_parallel_size"] = c1.number_input("Tensor parallel", min_value=1,
                                                    value=d["tensor_parallel_size"], key="w:tensor_parallel_size")
        v["replicas"] = c2.number_input("Replicas", min_value=1, value=d["replicas"], key="w:replicas")
    with sb.expander("Scheduler", expanded=True):
        v["scheduler"] = st.selectbox("Scheduler", SCHEDULERS, index=SCHEDULERS.index(d["scheduler"]),
                                      key="w:scheduler")
        c1, c2 = st.columns(2)
        v["max_num_seqs"] = c1.number_input("max_num_seqs", min_value=1, value=d["max_num_seqs"],
                                            key="w:max_num_seqs")
        v["max_num_batched_tokens"] = c2.number_input("max_num_batched_tokens", min_value=1,
                                                      value=d["max_num_batched_tokens"], step=256,
                                                      key="w:max_num_batched_tokens")
        v["enable_chunked_prefill"] = st.checkbox("Chunked prefill", d["enable_chunked_prefill"],
                                                  key="w:enable_chunked_prefill")
        v["enable_prefix_caching"] = st.checkbox("Prefix caching", d["enable_prefix_caching"],
                                                 key="w:enable_prefix_caching")
        c1, c2 = st.columns(2)
        v["block_size"] = c1.number_input("block_size", min_value=1, value=d["block_size"], key="w:block_size")
        gmu = float(d["gpu_memory_utilization"])
        v["gpu_memory_utilization"] = c2.number_input("gpu_memory_utilization", min_value=_lo(0.01, gmu),
                                                      max_value=1.0, value=gmu, step=0.05,
                                                      key="w:gpu_memory_utilization")
    with sb.expander("Workload", expanded=True):
        if "arrival_mode" in d:
            modes = ["rate", "concurrency"]
            v["arrival_mode"] = st.radio("Load", modes, index=modes.index(d["arrival_mode"]), horizontal=True,
                                         key="w:arrival_mode",
                                         format_func=lambda m: "open loop (rate)" if m == "rate" else
                                         "closed loop (users)")
            if v["arrival_mode"] == "rate":
                rate = float(d.get("rate_per_s", 4.0))
                v["rate_per_s"] = st.number_input("Arrival rate (req/s)", min_value=_lo(0.01, rate), value=rate,
                                                  step=0.5, key="w:rate_per_s")
            else:
                v["concurrency"] = st.number_input("Concurrent users", min_value=1,
                                                   value=int(d.get("concurrency", 16)), key="w:concurrency")
        if "time_scale" in d:
            scale = float(d["time_scale"])
            v["time_scale"] = st.number_input("Trace speed-up (2 = twice the load)", min_value=_lo(0.01, scale),
                                              value=scale, step=0.25, key="w:time_scale")
        if "duration_s" in d:
            c1, c2 = st.columns(2)
            v["duration_s"] = c1.number_input("Duration (s)", min_value=_lo(1.0, d["duration_s"]),
                                              value=d["duration_s"], step=60.0, key="w:duration_s")
            v["num_requests"] = c2.number_input("Requests (max)", min_value=1, value=d["num_requests"],
                                                key="w:num_requests")
        if "prefix_header" in d:
            v["prefix_header"] = st.selectbox(
                "Prefix header", PREFIX_HEADERS, index=PREFIX_HEADERS.index(d["prefix_header"]),
                key="w:prefix_header", help="timestamp: a unique header before the shared prompt (it defeats "
                "prefix caching); shuffled_sections: the shared prompt's sections in a random order.")
        for i, name in enumerate(classes):
            keys = [k for k in (f"classes.{i}.shared_prefix_tokens", f"classes.{i}.suffix_tokens",
                                f"classes.{i}.output_tokens") if k in d]
            if not keys:
                continue
            st.caption(f"Class **{name}** (typical tokens)")
            cols = st.columns(len(keys))
            for col, key in zip(cols, keys):
                title = {"shared_prefix_tokens": "shared prefix", "suffix_tokens": "prompt",
                         "output_tokens": "output"}[key.split(".")[-1]]
                v[key] = col.number_input(title, min_value=0, value=int(d[key]), step=50, key=f"w:{key}")
    if "spec.enabled" in d:
        with sb.expander("Speculative decoding", expanded=bool(d["spec.enabled"])):
            v["spec.enabled"] = st.toggle("Speculative decoding", d["spec.enabled"], key="w:spec.enabled")
            if v["spec.enabled"]:
                methods = list(dash.SPEC_METHODS)
                if d["spec.method"] not in methods:
                    methods.insert(0, d["spec.method"])
                v["spec.method"] = st.selectbox("Method", methods, index=methods.index(d["spec.method"]),
                                                key="w:spec.method")
                v["spec.num_speculative_tokens"] = st.number_input(
                    "num_speculative_tokens", min_value=1, max_value=32, value=d["spec.num_speculative_tokens"],
                    key="w:spec.num_speculative_tokens")
                if v["spec.method"] == "draft_model":
                    drafts = dash.model_options(d["spec.draft_model"])
                    v["spec.draft_model"] = st.selectbox("Draft model", drafts,
                                                         index=drafts.index(d["spec.draft_model"]),
                                                         key="w:spec.draft_model")
                v["spec.acceptance_rate"] = st.number_input(
                    "Acceptance rate (every class)", min_value=0.0, max_value=1.0, value=d["spec.acceptance_rate"],
                    step=0.05, key="w:spec.acceptance_rate", placeholder="per class, as in the scenario",
                    help="Per-token probability a draft is accepted. Empty keeps the scenario's per-class "
                    "acceptance.")
    return v


# ------------------------------------------------------------------------------------------------ page
def show_verdict(run: dash.RunOutput) -> None:
    d = run.diagnosis
    if d.binding:
        st.markdown(f"**Binding limit: {d.limit_name}**")
    else:
        st.markdown(f"**No limit binds** · the step time is set by {d.limit_name}")
    (st.warning if d.saturated else st.success)(d.verdict)
    for note in d.notes:
        st.caption(note)


def show_cards(base: dict[str, Any], whatif: dict[str, Any]) -> None:
    """Two rows of metric cards, baseline above what-if; the what-if's carry the change."""
    cards = dash.headline_cards(base, whatif)
    for title, which in (("Baseline", "baseline"), ("What-if", "whatif")):
        cols = st.columns([0.7] + [1] * len(cards), vertical_alignment="center")
        cols[0].markdown(f"**{title}**")
        for col, card in zip(cols[1:], cards):
            if which == "baseline":
                col.metric(card["label"], card["baseline"])
            else:
                col.metric(card["label"], card["whatif"], delta=card["delta"],
                           delta_color=card["delta_color"] if card["delta"] else "off")


def show_sweep(base_raw: dict, whatif_raw: dict, base_dir: str | None) -> None:
    plan = dash.sweep_plan(base_raw, whatif_raw)
    if not plan:
        st.info("This workload has no single load knob (piecewise or burst arrivals): no sweep.")
        return
    if not st.toggle("Run the load sweep", key="s:sweep",
                     help=f"{dash.SWEEP_REQUESTS} requests per point; each point is cached."):
        st.caption("Sweeps the load from ¼ to 2× the baseline's and plots throughput against TTFT and TPOT.")
        return
    total = sum(len(p) for p in plan.values())
    bar = st.progress(0.0, text="sweeping load")
    sweeps: dict[str, list] = {}
    done = 0
    for name, loads in plan.items():
        raw = base_raw if name == dash.BASELINE_LABEL else whatif_raw
        points = []
        for kind, value in loads:
            points.append(sweep_cached(raw, kind, value, base_dir))
            done += 1
            bar.progress(done / total, text=f"sweeping load: {name} at {dash.load_label(kind, value)}")
        sweeps[name] = points
    bar.empty()
    st.plotly_chart(figures.throughput_latency(sweeps), key="fig:sweep")


def main() -> None:
    st.set_page_config(page_title="LLM serving twin: what-if", page_icon="📈", layout="wide")
    st.title("What if…? An LLM-serving digital twin")
    try:
        scenario, base_dir, scenario_id = choose_scenario()
        exp = experiment_settings(scenario, scenario_id)
        common = {k: exp[k] for k in ("seed", "trace_window_s", "profile_path")}
        base_raw = dash.with_experiment(scenario.raw(), **common)
        start_raw = dash.with_experiment(scenario.raw(exp["start"]), **common)
        reset_on_change("_start", (scenario_id, exp["start"]), "w:")
        defaults = dash.form_defaults(start_raw, base_dir)
    except TwinInputError as exc:
        fail(str(exc))
        return
    classes = dash.class_names(start_raw)
    values = whatif_settings(defaults, classes)
    try:
        whatif_raw = dash.apply_form(start_raw, values, defaults)
    except TwinInputError as exc:
        fail(f"What-if: {exc}")
        return
    changes = dash.describe_changes(defaults, values, classes)

    st.caption(scenario.baseline_data.get("description") or scenario.name)
    t0 = time.perf_counter()
    runs: dict[str, dash.RunOutput] = {}
    with st.spinner("Simulating…"):
        for name, raw in ((dash.BASELINE_LABEL, base_raw), (dash.WHATIF_LABEL, whatif_raw)):
            try:
                runs[name] = run_cached(raw, base_dir)
            except TwinInputError as exc:
                fail(f"{'Baseline' if name == dash.BASELINE_LABEL else 'What-if'}: {exc}")
                return
    elapsed = time.perf_counter() - t0
    fresh = elapsed > 0.2  # else both came from the cache
    base, whatif = runs[dash.BASELINE_LABEL], runs[dash.WHATIF_LABEL]

    c1, c2 = st.columns(2)
    with c1:
        st.subheader("Baseline")
        st.caption(dash.headline(base.info))
        show_verdict(base)
    with c2:
        start = "" if exp["start"] == dash.BASELINE else f"variant **{exp['start']}**"
        st.subheader("What-if")
        st.caption(dash.headline(whatif.info))
        what = "; ".join(filter(None, [start, *changes]))
        st.markdown(f"Changes: {what}" if what else "_No changes yet: the what-if is the baseline. Pick a variant "
                    "or change a setting in the sidebar._")
        show_verdict(whatif)
    show_cards(base.metrics, whatif.metrics)
    st.caption(f"{base.info['num_requests']:,} and {whatif.info['num_requests']:,} requests "
               f"({base.info['simulated_s']:,.0f} s and {whatif.info['simulated_s']:,.0f} s of traffic), simulated in "
               f"{base.info['wall_s']:.2f} s and {whatif.info['wall_s']:.2f} s; "
               + (f"this answer took {elapsed:.2f} s." if fresh else "both runs came from the cache."))
    with st.expander("All metrics"):
        st.dataframe(pd.DataFrame(dash.comparison_rows(base.metrics, whatif.metrics)), hide_index=True,
                     width="stretch")

    results = {name: run.result for name, run in runs.items()}
    tabs = st.tabs(["Latency CDFs", "Server over time", "Batch composition", "Prefix cache",
                    "Throughput vs latency", "Step time"])
    with tabs[0]:
        st.plotly_chart(figures.latency_cdfs(results), key="fig:cdf")
    with tabs[1]:
        st.plotly_chart(figures.server_timeseries(results), key="fig:timeseries")
    with tabs[2]:
        at = st.slider("Where in the run", 0, 100, 50, step=5, format="%d%%", key="s:slice",
                       help="200 consecutive engine steps of replica 0, centred here.")
        cols = st.columns(2)
        for col, (name, run) in zip(cols, runs.items()):
            with col:
                st.plotly_chart(figures.batch_composition(run.result, run.info["max_num_batched_tokens"],
                                                          title=f"{name}: tokens per step", at=at / 100),
                                key=f"fig:batch:{name}")
    with tabs[3]:
        overall = {name: run.metrics.get("prefix_cache_hit_rate") for name, run in runs.items()}
        st.plotly_chart(figures.prefix_hit_rate(results, overall), key="fig:prefix")
    with tabs[4]:
        show_sweep(base_raw, whatif_raw, base_dir)
    with tabs[5]:
        splits = {name: run.diagnosis.step_split for name, run in runs.items()}
        if any(s is not None for s in splits.values()):
            st.plotly_chart(figures.step_time_split(splits), key="fig:split")
            sources = {run.diagnosis.stats.get("step_split_source") for run in runs.values()}
            origin = ("the roofline model of each deployment (the runs' cost model has no compute/memory split)"
                      if sources == {"roofline"} else "the cost model's explain()")
            st.caption(f"From {origin}, applied to the runs' typical steps; memory is the weight and KV traffic "
                       "left exposed beyond what overlaps with compute.")
        else:
            st.info("This cost model does not split step time into compute and memory.")

    st.subheader("Downloads")
    cols = st.columns(4)
    for i, (name, run) in enumerate(runs.items()):
        slug = name.replace("-", "")
        cols[2 * i].download_button(f"{name}: vllm bench serve JSON", lambda r=run: dash.result_json(r),
                                    file_name=f"{slug}_result.json", mime="application/json",
                                    on_click="ignore", key=f"dl:json:{name}")
        cols[2 * i + 1].download_button(f"{name}: requests CSV", lambda r=run: dash.requests_csv(r),
                                        file_name=f"{slug}_requests.csv", mime="text/csv", on_click="ignore",
                                        key=f"dl:csv:{name}")


main()
