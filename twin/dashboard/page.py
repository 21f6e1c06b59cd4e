"""The dashboard's result sections: one run's verdict and what it means, the metric cards, the charts (only
the one asked for is built), the load sweep, and the downloads (results, the what-if as YAML)."""

from __future__ import annotations

from typing import Any, Callable

import streamlit as st

from twin.dashboard import meaning, share
from twin.dashboard import state as dash
from twin.results.heldout_note import bands_markdown

CHARTS = ("Latency CDFs", "Server over time", "Batch composition", "Prefix cache", "Throughput vs latency",
          "Step time")


def show_run(run: dash.RunOutput, profile_name: str | None = None) -> None:
    """The verdict with what it means beside it: the limit (offered load first), the SLO attainment and
    goodput, the cost per million tokens, the cost model used."""
    st.caption(dash.headline(run.info))
    st.markdown(meaning.limit_line(run))
    d = run.diagnosis
    (st.warning if d.saturated else st.success)(d.verdict)
    st.caption(meaning.evidence_line(run))     # the run's own figures and the knob, as `twin run` prints them
    st.markdown(meaning.slo_line(run))
    st.markdown(meaning.cost_line(run))
    model = meaning.model_line(run)
    if profile_name:
        model += f" (uploaded as {profile_name})"
    st.caption(model)
    for note in d.notes:
        st.caption(note)
    if run.info.get("heldout_bands"):          # round 19 (issue 33): how far off the twin was on unseen servers
        with st.expander("Error band (held-out evidence)"):
            st.markdown(bands_markdown(run.info["heldout_bands"]))


CARDS_PER_ROW = 5
# metric cards sized for a 1280 px window with the sidebar open: a smaller value font than Streamlit's 2.25rem,
# labels that may wrap between words rather than be cut short
CARD_CSS = """<style>
[data-testid="stMetricValue"] { font-size: 1.6rem; }
[data-testid="stMetricLabel"] p, [data-testid="stMetricLabel"] div { white-space: normal; overflow: visible; }
</style>"""


def show_cards(base: dict[str, Any], whatif: dict[str, Any]) -> None:
    """The metric cards, at most `CARDS_PER_ROW` a row: for each group a baseline row above a what-if row
    (the what-if's cards carry the change); each card's tooltip holds the exact value."""
    st.html(CARD_CSS)
    cards = dash.headline_cards(base, whatif)
    for start in range(0, len(cards), CARDS_PER_ROW):
        group = cards[start:start + CARDS_PER_ROW]
        for title, which in (("Baseline", "baseline"), ("What-if", "whatif")):
            cols = st.columns([1] * (CARDS_PER_ROW + 1), vertical_alignment="center")
            cols[0].markdown(f"**{title}**")
            for col, card in zip(cols[1:], group):
                tip = f"{title}: {card[which + '_exact']}"
                if which == "baseline":
                    col.metric(card["label"], card["baseline"], help=tip)
                else:
                    col.metric(card["label"], card["whatif"], delta=card["delta"], help=tip,
                               delta_color=card["delta_color"] if card["delta"] else "off")


def _figures():
    from twin.results import figures  # plotly: imported when the first chart is drawn, not before the verdicts

    return figures


def show_sweep(base_raw: dict, whatif_raw: dict, base_dir: str | None, sweep_point: Callable[..., dict]) -> None:
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
            points.append(sweep_point(raw, kind, value, base_dir))
            done += 1
            bar.progress(done / total, text=f"sweeping load: {name} at {dash.load_label(kind, value)}")
        sweeps[name] = points
    bar.empty()
    st.plotly_chart(_figures().throughput_latency(sweeps), key="fig:sweep")
    show_sweep_whatif(plan, [base_raw, whatif_raw])


def show_sweep_whatif(plan: dict[str, list], raws: list[dict]) -> None:
    """Under the load sweep: how far off the twin's predicted change of that load was held out (issue 33,
    ``twin.plan.whatif_axes.load_whatif``, the block `twin sweep` prints)."""
    from twin.dashboard.form import validate
    from twin.plan.whatif_axes import load_whatif
    from twin.results.whatif_view import whatif_markdown

    kinds = list(dict.fromkeys(kind for loads in plan.values() for kind, _ in loads))
    text = whatif_markdown(load_whatif(kinds, [validate(raw) for raw in raws]))
    if text:
        with st.expander("What-if band along the load (held-out evidence of predicted changes)"):
            st.markdown(text)


def show_chart(runs: dict[str, dash.RunOutput], base_raw: dict, whatif_raw: dict, base_dir: str | None,
               sweep_point: Callable[..., dict]) -> None:
    """One chart at a time, built only when asked for (a figure over every request and step is not free)."""
    which = st.segmented_control("Chart", CHARTS, default=CHARTS[0], key="s:chart") or CHARTS[0]
    results = {name: run.result for name, run in runs.items()}
    figures = _figures()
    if which == "Latency CDFs":
        st.plotly_chart(figures.latency_cdfs(results), key="fig:cdf")
    elif which == "Server over time":
        st.plotly_chart(figures.server_timeseries(results), key="fig:timeseries")
        if any("pools" in run.info for run in runs.values()):
            st.caption("A prefill/decode run's lines are over the engines of both pools; the Pools section above "
                       "gives each pool's queue, batch and KV use.")
    elif which == "Batch composition":
        at = st.slider("Where in the run", 0, 100, 50, step=5, format="%d%%", key="s:slice",
                       help="200 consecutive engine steps of replica 0, centred here.")
        for col, (name, run) in zip(st.columns(2), runs.items()):
            with col:
                engine = " (engine 0: a prefill engine)" if "pools" in run.info else ""
                st.plotly_chart(figures.batch_composition(run.result, run.info["max_num_batched_tokens"],
                                                          title=f"{name}: tokens per step{engine}", at=at / 100),
                                key=f"fig:batch:{name}")
    elif which == "Prefix cache":
        overall = {name: run.metrics.get("prefix_cache_hit_rate") for name, run in runs.items()}
        st.plotly_chart(figures.prefix_hit_rate(results, overall), key="fig:prefix")
        from twin.results.offload_text import tier_hit_line

        for name, run in runs.items():      # KV offload tiers (server.kv_offloading_size): hits per tier
            off = run.result.config.get("kv_offload")
            if off:
                st.caption(f"{name}, hit rate by tier: {tier_hit_line(off)}")
    elif which == "Throughput vs latency":
        show_sweep(base_raw, whatif_raw, base_dir, sweep_point)
    else:
        splits = {}
        for name, run in runs.items():   # a P/D run: each pool's typical step (twin.dashboard.pd_run)
            per_pool = run.pool_diagnoses or {None: run.diagnosis}
            splits.update({name if pool is None else f"{name} · {pool}": d.step_split for pool, d in per_pool.items()})
        if all(s is None for s in splits.values()):
            st.info("This cost model does not split step time into compute and memory.")
            return
        st.plotly_chart(figures.step_time_split(splits), key="fig:split")
        sources = {d.stats.get("step_split_source") for run in runs.values()
                   for d in (run.pool_diagnoses or {None: run.diagnosis}).values()}
        origin = ("the roofline model of each deployment (the runs' cost model has no compute/memory split)"
                  if sources == {"roofline"} else "the cost model's explain()")
        st.caption(f"From {origin}, applied to the runs' typical steps; memory is the weight and KV traffic "
                   "left exposed beyond what overlaps with compute.")


def show_table(base: dash.RunOutput, whatif: dash.RunOutput) -> None:
    import pandas as pd

    with st.expander("All metrics"):
        st.dataframe(pd.DataFrame(dash.comparison_rows(base.metrics, whatif.metrics)), hide_index=True,
                     width="stretch")


def show_whatif_band(base_raw: dict, whatif_raw: dict) -> None:
    """How far off the twin's predicted change was held out, per knob the what-if changes (round 22, issue 33:
    ``twin.results.whatif_view``, the block `twin compare` prints); nothing where no knob changed."""
    from twin.dashboard.form import validate
    from twin.results.whatif_view import whatif_doc, whatif_markdown

    runs = {name: {"body": validate(raw), "deployment": None}
            for name, raw in ((dash.BASELINE_LABEL, base_raw), (dash.WHATIF_LABEL, whatif_raw))}
    text = whatif_markdown(whatif_doc(runs))
    if text:
        with st.expander("What-if band (held-out evidence of predicted changes)"):
            st.markdown(text)


def show_downloads(runs: dict[str, dash.RunOutput], whatif_raw: dict, shareable: bool) -> None:
    st.subheader("Downloads and sharing")
    cols = st.columns(5)
    for i, (name, run) in enumerate(runs.items()):
        slug = name.replace("-", "")
        cols[2 * i].download_button(f"{name}: vllm bench serve JSON", lambda r=run: dash.result_json(r),
                                    file_name=f"{slug}_result.json", mime="application/json",
                                    on_click="ignore", key=f"dl:json:{name}")
        cols[2 * i + 1].download_button(f"{name}: requests CSV", lambda r=run: dash.requests_csv(r),
                                        file_name=f"{slug}_requests.csv", mime="text/csv", on_click="ignore",
                                        key=f"dl:csv:{name}")
    cols[4].download_button("what-if: scenario YAML", lambda: share.scenario_yaml(whatif_raw),
                            file_name="whatif.yaml", mime="application/x-yaml", on_click="ignore",
                            key="dl:yaml", help="One configuration; `twin run whatif.yaml` runs it.")
    if shareable:
        st.caption("The address bar holds this what-if (scenario, start point, seed and your changes): copy it "
                   "to share the same page.")
    else:
        st.caption("An uploaded scenario or trace cannot travel in a URL: share the scenario YAML instead.")
