"""The dashboard's sidebar: which scenario, the experiment settings, the what-if widgets.

One source of truth: every widget is derived from (the start point's resolved settings, the explicit changes).
Widget keys carry a *generation*, a digest of the context they belong to (the scenario for the experiment
settings; scenario and start point for the what-if settings). Switching either creates fresh widgets at the
new configuration's values; deleting session state would not do, since a keyed widget keeps its browser-side
value and would feed the previous scenario's numbers into the next run.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

import streamlit as st

from twin.dashboard import share
from twin.dashboard import state as dash
from twin.dashboard.share import JS_MAX_INT
from twin.errors import TwinInputError

SOURCES = ("Bundled scenario", "Upload scenario YAML", "Upload trace")
SCHEDULERS = ("continuous", "prefill_first", "static")
PREFIX_HEADERS = ("none", "timestamp", "shuffled_sections")
KV_HELP = ("The KV cache format (vLLM's --kv-cache-dtype). auto leaves kv_dtype out: bf16, except that a checkpoint "
           "that declares its KV format (Kimi-K2.5 NVFP4: fp8) must be given one. fp8 halves the bytes a token's KV "
           "takes, so about twice the tokens fit in the pool.")


def generation(*context: Any) -> str:
    """A short digest naming a widget context."""
    return hashlib.sha256(json.dumps(context, default=str).encode()).hexdigest()[:10]


def wk(gen: str, name: str) -> str:
    """The key of what-if widget ``name`` in generation ``gen``."""
    return f"w:{gen}:{name}"


def ek(gen: str, name: str) -> str:
    """The key of experiment widget ``name`` in generation ``gen``."""
    return f"e:{gen}:{name}"


def remember_upload(saved, name: str) -> None:
    """The server's copy of an upload and the user's name for it: messages name the user's file
    (`twin.dashboard.messages.name_uploads`)."""
    st.session_state.setdefault("_uploads", {})[str(saved)] = name


def _index(options, value, key: str, url: Mapping[str, Any]) -> int:
    """``value``'s place in ``options``; ``url``: the explicit changes a shared link carries (its message names
    the URL parameter when the value came from there)."""
    if value not in options:
        raise share.choice_error(key, value, options, from_url=key in url)
    return list(options).index(value)


def choose_scenario(url: dict[str, str]):
    """(scenario, base_dir, scenario_id, bundled name or None); ``url`` may name the bundled scenario."""
    st.sidebar.header("Scenario")
    source = st.sidebar.radio("Source", SOURCES, key="s:source", label_visibility="collapsed")
    if source == SOURCES[0]:
        bundled = dash.bundled_scenarios()
        names = list(bundled)
        wanted = url.get("scenario")
        index = names.index(wanted) if wanted in names else 0
        if wanted not in names and share.link_params(url):     # a link's other parameters need its scenario
            st.warning(share.url_choice_warning("scenario", wanted, names, names[0],
                                                share.link_params(url, ("scenario",))))
        name = st.sidebar.selectbox("Bundled scenario", names, index=index, key="s:bundled")
        return dash.load_bundled(name), str(bundled[name].parent), f"bundled:{name}", name
    if source == SOURCES[1]:
        up = st.sidebar.file_uploader("Scenario YAML", type=["yaml", "yml"], key="s:yaml",
                                      help="It may name only bundled data ({traces}/..., bundled scenarios) or "
                                      "files uploaded here, never other paths on the server.")
        if up is None:
            st.info("Upload a scenario YAML file (the format of `scenarios/*.yaml`) in the sidebar.")
            st.stop()
        data = up.getvalue()
        return (dash.scenario_from_yaml(data, up.name), str(dash.upload_dir()),
                "yaml:" + hashlib.sha256(data).hexdigest(), None)
    up = st.sidebar.file_uploader("Trace (Azure / BurstGPT / length CSV, Mooncake JSONL)",
                                  type=["csv", "jsonl", "json"], key="s:trace")
    if up is None:
        st.info("Upload a trace file in the sidebar; it is replayed on the default deployment.")
        st.stop()
    path = dash.save_upload(up.getvalue(), up.name)
    remember_upload(path, up.name)
    return dash.trace_scenario(path, up.name), None, f"trace:{path.name}", None


def experiment_settings(scenario, scenario_id: str, url: dict[str, str]) -> dict[str, Any]:
    """Seed, replay window, calibrated profile and start point; fresh widgets for every scenario."""
    gen = generation(scenario_id)
    st.sidebar.header("Experiment")
    base_raw = scenario.raw()
    seed0 = int(base_raw.get("seed", 0) or 0)
    if "seed" in url:       # a shared link's seed seeds a number widget: a whole number a browser holds exactly
        text = str(url["seed"])
        if not (text.isascii() and text.isdigit() and int(text) <= JS_MAX_INT):
            raise TwinInputError(f"URL parameter seed={text!r}: expected a whole number in [0, {JS_MAX_INT}]")
        seed0 = int(text)
    seed = st.sidebar.number_input("Seed", min_value=0, value=seed0, step=1, key=ek(gen, "seed"),
                                   help="Same seed, same traffic: the baseline and the what-if see identical "
                                   "requests.")
    window = dash.trace_window_default(base_raw)
    if window is not None:
        window = st.sidebar.number_input("Replay window (s of trace, 0 = all)", min_value=0.0, value=window,
                                         step=60.0, key=ek(gen, "window"),
                                         help="A trace without timestamps (lengths only) ignores it.")
    profile_path = profile_name = None
    if dash.profile_supported():
        up = st.sidebar.file_uploader("Calibrated profile (JSON)", type=["json"], key=ek(gen, "profile"),
                                      help="Replaces the cost model in both runs.")
        if up is not None:
            profile_path, profile_name = str(dash.save_upload(up.getvalue(), up.name)), up.name
            remember_upload(profile_path, up.name)
    names = dash.start_points(scenario)
    start0 = url.get("start") if url.get("start") in names else dash.default_start(scenario)
    changes = [k for k in share.link_params(url) if k.startswith(share.CHANGE_PREFIX)]
    if url.get("start") not in names and ("start" in url or changes):   # the changes were made for its start
        st.warning(share.url_choice_warning("start", url.get("start"), names, start0, changes))
    start = st.sidebar.selectbox("What-if starts from", names, index=names.index(start0), key=ek(gen, "start"),
                                 help="The baseline or one of the scenario's variants; the settings below change "
                                 "it further.")
    return {"seed": seed, "trace_window_s": window, "profile_path": profile_path, "profile_name": profile_name,
            "start": start}


def _lo(bound: float, value: float | None) -> float:
    """A widget's lower bound that never rejects the scenario's own value (validation judges it instead)."""
    return bound if value is None else min(bound, value)


def whatif_settings(defaults: dict[str, Any], classes: list[str], gen: str,
                    seeds: dict[str, Any] | None = None, pools: list[str] | None = None) -> dict[str, Any]:
    """The what-if widgets, each starting at the configuration's own (resolved) value, or at ``seeds`` (the
    explicit changes a shared URL carries). Their keys hold ``gen``, the (scenario, start point) they belong
    to: a new scenario or start point makes new widgets, so nothing the browser remembers leaks into it.
    ``pools``: a prefill/decode configuration's pools, described in place of the GPU, TP and replica widgets
    (only the settings in ``defaults`` get a widget)."""
    url = seeds or {}
    d = {**defaults, **url}
    v: dict[str, Any] = {}
    sb = st.sidebar
    sb.header("What-if settings")
    with sb.expander("Deployment", expanded=True):
        models = dash.model_options(d["model"])
        if pools is None:
            gpus = dash.gpu_options(d["gpu"])
            v["gpu"] = st.selectbox("GPU", gpus, index=_index(gpus, d["gpu"], "gpu", url), key=wk(gen, "gpu"))
        v["model"] = st.selectbox("Model", models, index=_index(models, d["model"], "model", url), key=wk(gen, "model"))
        if "kv_dtype" in d:
            v["kv_dtype"] = st.selectbox("KV cache (kv_dtype)", dash.KV_DTYPES,
                                         index=_index(dash.KV_DTYPES, d["kv_dtype"], "kv_dtype", url),
                                         key=wk(gen, "kv_dtype"), help=KV_HELP)
        if pools is None:
            c1, c2 = st.columns(2)
            v["tensor_parallel_size"] = c1.number_input("Tensor parallel", min_value=1,
                                                        value=d["tensor_parallel_size"],
                                                        key=wk(gen, "tensor_parallel_size"))
            v["replicas"] = c2.number_input("Replicas", min_value=1, value=d["replicas"], key=wk(gen, "replicas"))
        else:   # prefill/decode pools: shown as the scenario has them, not edited (twin.dashboard.pd_form)
            st.markdown("**Prefill/decode pools** (read-only)")
            for line in pools:
                st.caption(line)
            st.caption(dash.POOLS_NOTE)
    with sb.expander("Scheduler", expanded=True):
        if "scheduler" in d:
            v["scheduler"] = st.selectbox("Scheduler", SCHEDULERS,
                                          index=_index(SCHEDULERS, d["scheduler"], "scheduler", url),
                                          key=wk(gen, "scheduler"))
        c1, c2 = st.columns(2)
        if "max_num_seqs" in d:
            v["max_num_seqs"] = c1.number_input("max_num_seqs", min_value=1, value=d["max_num_seqs"],
                                                key=wk(gen, "max_num_seqs"))
        if "max_num_batched_tokens" in d:
            v["max_num_batched_tokens"] = c2.number_input("max_num_batched_tokens", min_value=1,
                                                          value=d["max_num_batched_tokens"], step=256,
                                                          key=wk(gen, "max_num_batched_tokens"))
        if "enable_chunked_prefill" in d:
            v["enable_chunked_prefill"] = st.checkbox("Chunked prefill", d["enable_chunked_prefill"],
                                                      key=wk(gen, "enable_chunked_prefill"))
        if "enable_prefix_caching" in d:
            v["enable_prefix_caching"] = st.checkbox("Prefix caching", d["enable_prefix_caching"],
                                                     key=wk(gen, "enable_prefix_caching"))
        c1, c2 = st.columns(2)
        if "block_size" in d:
            v["block_size"] = c1.number_input("block_size", min_value=1, value=d["block_size"],
                                              key=wk(gen, "block_size"))
        if "gpu_memory_utilization" in d:
            gmu = float(d["gpu_memory_utilization"])
            v["gpu_memory_utilization"] = c2.number_input("gpu_memory_utilization", min_value=_lo(0.01, gmu),
                                                          max_value=1.0, value=gmu, step=0.05,
                                                          key=wk(gen, "gpu_memory_utilization"))
    with sb.expander("Workload", expanded=True):
        if "arrival_mode" in d:
            modes = ["rate", "concurrency"]
            v["arrival_mode"] = st.radio("Load", modes, index=_index(modes, d["arrival_mode"], "arrival_mode", url),
                                         horizontal=True, key=wk(gen, "arrival_mode"),
                                         format_func=lambda m: "open loop (rate)" if m == "rate" else
                                         "closed loop (users)")
            if v["arrival_mode"] == "rate":
                rate = float(d.get("rate_per_s", 4.0))
                v["rate_per_s"] = st.number_input("Arrival rate (req/s)", min_value=_lo(0.01, rate), value=rate,
                                                  step=0.5, key=wk(gen, "rate_per_s"))
            else:
                v["concurrency"] = st.number_input("Concurrent users", min_value=1,
                                                   value=int(d.get("concurrency", 16)), key=wk(gen, "concurrency"))
        if "time_scale" in d:
            scale = float(d["time_scale"])
            v["time_scale"] = st.number_input("Trace speed-up (2 = twice the load)", min_value=_lo(0.01, scale),
                                              value=scale, step=0.25, key=wk(gen, "time_scale"))
        if "duration_s" in d:
            c1, c2 = st.columns(2)
            v["duration_s"] = c1.number_input("Duration (s)", min_value=_lo(1.0, d["duration_s"]),
                                              value=d["duration_s"], step=60.0, key=wk(gen, "duration_s"))
            v["num_requests"] = c2.number_input("Requests (max)", min_value=1, value=d["num_requests"],
                                                key=wk(gen, "num_requests"))
        if "prefix_header" in d:
            v["prefix_header"] = st.selectbox(
                "Prefix header", PREFIX_HEADERS, index=_index(PREFIX_HEADERS, d["prefix_header"], "prefix_header", url),
                key=wk(gen, "prefix_header"), help="timestamp: a unique header before the shared prompt (it defeats "
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
                v[key] = col.number_input(title, min_value=0, value=int(d[key]), step=50, key=wk(gen, key))
    if "spec.enabled" in d:
        with sb.expander("Speculative decoding", expanded=bool(d["spec.enabled"])):
            v["spec.enabled"] = st.toggle("Speculative decoding", d["spec.enabled"], key=wk(gen, "spec.enabled"))
            if v["spec.enabled"]:
                methods = list(dash.SPEC_METHODS)
                if d["spec.method"] not in methods:
                    methods.insert(0, d["spec.method"])
                v["spec.method"] = st.selectbox("Method", methods,
                                                index=_index(methods, d["spec.method"], "spec.method", url),
                                                key=wk(gen, "spec.method"))
                v["spec.num_speculative_tokens"] = st.number_input(
                    "num_speculative_tokens", min_value=1, max_value=32, value=d["spec.num_speculative_tokens"],
                    key=wk(gen, "spec.num_speculative_tokens"))
                if v["spec.method"] == "draft_model":
                    drafts = dash.model_options(d["spec.draft_model"])
                    v["spec.draft_model"] = st.selectbox(
                        "Draft model", drafts, index=_index(drafts, d["spec.draft_model"], "spec.draft_model", url),
                        key=wk(gen, "spec.draft_model"))
                v["spec.acceptance_rate"] = st.number_input(
                    "Acceptance rate (every class)", min_value=0.0, max_value=1.0, value=d["spec.acceptance_rate"],
                    step=0.05, key=wk(gen, "spec.acceptance_rate"), placeholder="per class, as in the scenario",
                    help="Per-token probability a draft is accepted. Empty keeps the scenario's per-class "
                    "acceptance.")
    return v


