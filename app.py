"""What-if dashboard for the LLM-serving twin: ``streamlit run app.py`` (listens on 127.0.0.1; see
``.streamlit/config.toml``).

Thin on purpose: `twin.dashboard.sidebar` derives every widget from (start point, explicit changes),
`twin.dashboard.state` turns them into scenario mappings, `twin.dashboard.worker` simulates each in a process
that Stop ends, and `twin.dashboard.page` draws the verdicts, what they mean, and one chart at a time.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from typing import Any

import streamlit as st

from twin.dashboard import page, pd_page, share, sidebar, worker
from twin.dashboard.messages import name_uploads, plain
from twin.dashboard import state as dash
from twin.errors import TwinInputError

RUNS_KEPT = 16  # a run can hold ~10 MB
sweep_cached = st.cache_data(show_spinner=False, max_entries=512)(dash.run_sweep_point)


@st.cache_resource
def warm_workers() -> bool:
    worker.warm_up()  # once per server: the worker pool is importing the twin while the page draws
    return True


@st.cache_resource
def run_store() -> OrderedDict:
    """Finished runs by scenario mapping (seed included), shared by every session of this server."""
    return OrderedDict()


def run_key(raw: dict[str, Any], base_dir: str | None) -> str:
    return hashlib.sha256(json.dumps([raw, base_dir], sort_keys=True, default=str).encode()).hexdigest()


def fail(message: str) -> None:
    """Bad input: one message in the page, nothing below it (as written: Markdown in it is not rendered)."""
    st.error(plain(name_uploads(message, st.session_state.get("_uploads", {}))))
    st.stop()


def simulate(configs: dict[str, dict], base_dir: str | None, columns: dict[str, Any], show) -> dict:
    """Every configuration from the store or a worker; each column is drawn as soon as its run is there."""
    store = run_store()
    runs: dict[str, dash.RunOutput] = {}
    for name, raw in configs.items():  # bad input and oversized runs are refused here, before any worker
        try:
            dash.check_size(dash.validate(raw))
        except TwinInputError as exc:
            fail(f"{'Baseline' if name == dash.BASELINE_LABEL else 'What-if'}: {exc}")
    for name, raw in configs.items():
        key = run_key(raw, base_dir)
        if key in store:
            store.move_to_end(key)
            runs[name] = store[key]
    todo = [name for name in configs if name not in runs]
    stop_slot = st.empty()
    if todo and stop_slot.button("Stop the simulation", key="s:stop", type="primary"):
        stop_slot.empty()
        st.info("Stopped: the simulation was ended. Change a setting (or press R) to run again.")
        st.stop()
    jobs = {name: worker.Job(dash.run_scenario, configs[name], base_dir, label=name) for name in todo}
    status = st.empty()
    shown: set[str] = set()

    def draw_ready() -> None:
        for name in configs:
            if name not in shown and (name in runs or (name in jobs and jobs[name].done())):
                if name not in runs:
                    try:
                        runs[name] = jobs[name].result()
                    except (TwinInputError, RuntimeError) as exc:
                        status.empty()
                        fail(f"{'Baseline' if name == dash.BASELINE_LABEL else 'What-if'}: {exc}")
                    store[run_key(configs[name], base_dir)] = runs[name]
                    while len(store) > RUNS_KEPT:
                        store.popitem(last=False)
                with columns[name]:
                    show(runs[name])
                shown.add(name)

    t0 = time.monotonic()

    def tick(pending: list[str]) -> None:
        draw_ready()
        status.info(f"Simulating {' and '.join(pending)}… {time.monotonic() - t0:.1f} s "
                    "(the Stop button above ends it)")

    try:
        worker.run_jobs(jobs, tick)
        draw_ready()
    finally:
        for job in jobs.values():
            job.cancel()
    status.empty()
    stop_slot.empty()
    return dash.in_config_order(configs, runs)   # baseline first (and blue) whichever run finished first


def main() -> None:
    st.set_page_config(page_title="LLM serving twin: what-if", page_icon="📈", layout="wide")
    st.title("What if…? An LLM-serving digital twin")
    warm_workers()
    if "_url" not in st.session_state:  # the shared what-if this session was opened with, read once
        st.session_state["_url"] = dict(st.query_params)
        if (unknown := share.unknown_params_warning(st.session_state["_url"])) is not None:
            st.warning(unknown)
    url = st.session_state["_url"]
    try:
        scenario, base_dir, scenario_id, bundled = sidebar.choose_scenario(url)
        if url.get("scenario") != bundled:  # the user moved on: the shared what-if no longer applies
            url = st.session_state["_url"] = {}
        exp = sidebar.experiment_settings(scenario, scenario_id, url)
        if url.get("start") != exp["start"]:
            url = st.session_state["_url"] = {}
        common = {k: exp[k] for k in ("seed", "trace_window_s", "profile_path")}
        base_raw = dash.with_experiment(scenario.raw(), **common)
        start_raw = dash.with_experiment(scenario.raw(exp["start"]), **common)
        defaults = dash.form_defaults(start_raw, base_dir)
        seeds = share.decode(url, defaults)
    except TwinInputError as exc:
        fail(str(exc))
        return
    classes = dash.class_names(start_raw)
    gen = sidebar.generation(scenario_id, exp["start"])
    try:
        values = sidebar.whatif_settings(defaults, classes, gen, seeds, dash.pool_lines(start_raw, base_dir))
        whatif_raw = dash.apply_form(start_raw, values, defaults)
    except TwinInputError as exc:
        fail(f"What-if: {exc}")
        return
    changed = dash.form_changes(defaults, values)
    changes = dash.describe_changes(defaults, values, classes)
    if bundled is not None:
        st.query_params.from_dict(share.encode(bundled, exp["start"], exp["seed"], changed))
    else:
        st.query_params.clear()

    st.caption(plain(scenario.baseline_data.get("description") or scenario.name))
    c1, c2 = st.columns(2)
    c1.subheader("Baseline")
    c2.subheader("What-if")
    start = "" if exp["start"] == dash.BASELINE else f"variant **{plain(exp['start'])}**"
    what = "; ".join(filter(None, [start, *map(plain, changes)]))
    c2.markdown(f"Changes: {what}" if what else "_No changes yet: the what-if is the baseline. Pick a variant "
                "or change a setting in the sidebar._")
    t0 = time.perf_counter()
    runs = simulate({dash.BASELINE_LABEL: base_raw, dash.WHATIF_LABEL: whatif_raw}, base_dir,
                    {dash.BASELINE_LABEL: c1, dash.WHATIF_LABEL: c2},
                    lambda run: page.show_run(run, exp["profile_name"]))
    elapsed = time.perf_counter() - t0
    base, whatif = runs[dash.BASELINE_LABEL], runs[dash.WHATIF_LABEL]
    page.show_cards(base.metrics, whatif.metrics)
    st.caption(f"{base.info['num_requests']:,} and {whatif.info['num_requests']:,} requests "
               f"({base.info['simulated_s']:,.0f} s and {whatif.info['simulated_s']:,.0f} s of traffic), simulated in "
               f"{base.info['wall_s']:.2f} s and {whatif.info['wall_s']:.2f} s; "
               + (f"this answer took {elapsed:.2f} s." if elapsed > 0.2 else "both runs came from the cache."))
    page.show_table(base, whatif)
    page.show_whatif_band(base_raw, whatif_raw)     # issue 33 round 22: the held-out error of a predicted change
    if pd_page.has_pools(runs):     # prefill/decode pools: each pool's load, the KV link, TTFT's parts
        pd_page.show_pools(runs)
    page.show_chart(runs, base_raw, whatif_raw, base_dir, sweep_cached)
    page.show_downloads(runs, whatif_raw, shareable=bundled is not None)


main()
