"""The Pools section of a prefill/decode run: each pool's engines, load and latency, the KV link, and where
the mean TTFT goes (prefill leg, link queueing, transfer, decode queueing + first step)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from twin.dashboard import state as dash
from twin.dashboard.pd_run import TTFT_PART_LABELS, link_line, pool_rows
from twin.results import numbers

PART_COLORS = ("#1f77b4", "#ff7f0e", "#d62728", "#2ca02c")


def ttft_parts_figure(parts: Mapping[str, Mapping[str, Any]]):
    """A stacked horizontal bar per run of its mean TTFT's parts (runs without them are left out)."""
    import plotly.graph_objects as go

    names = [n for n, p in parts.items() if p and p.get("num_requests")][::-1]   # the first run on top
    fig = go.Figure()
    for (key, label), color in zip(TTFT_PART_LABELS.items(), PART_COLORS):
        fig.add_trace(go.Bar(
            y=names, x=[parts[n][key] for n in names], name=label, orientation="h", marker_color=color,
            text=[numbers.duration_ms(parts[n][key]) for n in names], textposition="inside",
            hovertemplate="%{y}: " + label + " %{text}<extra></extra>"))
    fig.update_layout(barmode="stack", title="Where the mean TTFT goes", xaxis_title="ms",
                      height=160 + 60 * len(names), legend={"orientation": "h", "y": -0.3},
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def has_pools(runs: Mapping[str, dash.RunOutput]) -> bool:
    return any(run.result.config.get("disaggregation") for run in runs.values())


def show_pools(runs: Mapping[str, dash.RunOutput]) -> None:
    """Per run a table of its pools and its KV link; for a colocated run a line saying it has none."""
    import pandas as pd

    st.subheader("Pools (prefill/decode)")
    parts = {}
    for col, (name, run) in zip(st.columns(len(runs)), runs.items()):
        dis = run.result.config.get("disaggregation")
        with col:
            st.markdown(f"**{name}**")
            if not dis:
                st.caption(f"Colocated: one deployment of {run.info['replicas']}×{run.info['tensor_parallel_size']} "
                           f"{run.info['gpu']}, prefill and decode on the same engines.")
                continue
            st.dataframe(pd.DataFrame(pool_rows(dis)), hide_index=True, width="stretch")
            st.caption(link_line(dis))
            parts[name] = dis.get("ttft_parts")
    if any(p and p.get("num_requests") for p in parts.values()):
        st.plotly_chart(ttft_parts_figure(parts), key="fig:pd_ttft")
        n = {name: numbers.count(p.get("num_requests")) for name, p in parts.items() if p}
        st.caption("Mean over the completed requests after the warm-up ("
                   + ", ".join(f"{k}: {v}" for k, v in n.items()) + "); per request the four parts add up to its "
                   "TTFT. The prefill part is the prefill leg's own TTFT: request path, queueing at the prefill "
                   "engine and the prefill itself.")
