"""The ``twin protocol`` report's Plotly figures, keyed as its blocks name them.

``steps``: the predicted relative change of the headline metrics per step, with 95 % intervals; ``latency``: the
TTFT, TPOT and E2E latency CDFs of the baseline and each step's candidate; ``prefix``: the attainable, achieved
and predicted prefix-cache hit rates; ``spec``: the speculative-decoding throughput ratio per task class and
concurrency; ``measured`` (engine mode): predicted against measured change. Each figure is drawn only from the
report's data, so the figures and the text tables agree.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from twin.results.figures import PALETTE, latency_cdfs
from twin.results.numbers import counted
from twin.results.report import label


def protocol_figures(rep: Any) -> dict[str, go.Figure]:
    figs: dict[str, go.Figure] = {}
    steps = [s for s in rep.steps if s.candidate and s.deltas and s.key != "baseline"]
    keys = ("output_throughput", "p99_ttft_ms", "median_tpot_ms", "p99_e2el_ms")
    fig = go.Figure()
    for i, k in enumerate(keys):
        xs, ys, err = [], [], []
        for s in steps:
            rel = s.deltas.get(f"{k}_rel") or {}
            if rel.get("mean") is None:
                continue
            xs.append(f"{s.title}<br><sub>{s.change_label[:60]}</sub>")
            ys.append(rel["mean"] * 100)
            err.append((rel.get("half_width") or 0.0) * 100)
        fig.add_trace(go.Bar(x=xs, y=ys, name=label(k), marker_color=PALETTE[i % len(PALETTE)],
                             error_y=dict(type="data", array=err, visible=True),
                             hovertemplate=f"{label(k)}: %{{y:+.1f}}%<extra></extra>"))
    fig.update_layout(barmode="group", template="plotly_white", height=380, title="Predicted change per step (%)",
                      yaxis_title="change vs baseline (%)", legend=dict(orientation="h", y=-0.25))
    figs["steps"] = fig
    runs = {"baseline": rep.evaluations["baseline"].result}
    for s in steps:
        runs[s.title] = rep.evaluations[s.candidate].result
    figs["latency"] = latency_cdfs(runs)
    pstep = next((s for s in rep.steps if s.key == "prefix_caching"), None)
    if pstep is not None:
        d = pstep.details
        names = ["attainable (oracle)", "achieved now"]
        vals = [d["attainable_hit_rate"], d["achieved_hit_rate"]]
        if d.get("attainable_without_head_rate") is not None:
            names.append("attainable, unique head moved")
            vals.append(d["attainable_without_head_rate"])
        if d.get("hit_rate_after") is not None:
            names.append("predicted after the change")
            vals.append(d["hit_rate_after"])
        f = go.Figure(go.Bar(x=names, y=vals, marker_color=PALETTE[:len(vals)], text=[f"{v:.0%}" for v in vals],
                             textposition="outside"))
        f.update_layout(template="plotly_white", height=320, title="Prefix-cache hit rate (share of prompt tokens)",
                        yaxis=dict(tickformat=".0%", range=[0, 1.1]))
        figs["prefix"] = f
    sstep = next((s for s in rep.steps if s.key == "speculative_decoding"), None)
    if sstep is not None and sstep.details.get("grid"):
        f = go.Figure()
        classes = list(dict.fromkeys(g["task_class"] for g in sstep.details["grid"]))
        for i, c in enumerate(classes):
            cells = [g for g in sstep.details["grid"] if g["task_class"] == c]
            f.add_trace(go.Bar(x=[counted(g["concurrency"], "stream") for g in cells],
                               y=[g["throughput_ratio"].get("mean") for g in cells], name=c,
                               marker_color=PALETTE[i % len(PALETTE)],
                               error_y=dict(type="data", array=[g["throughput_ratio"].get("half_width") or 0.0
                                                                for g in cells], visible=True)))
        f.add_hline(y=1.0, line=dict(color="#444", dash="dash"), annotation_text="no gain")
        f.update_layout(barmode="group", template="plotly_white", height=340,
                        title="Speculative decoding: output throughput with / without", yaxis_title="ratio")
        figs["spec"] = f
    measured = [s for s in rep.steps if s.measured and s.measured.get("deltas")]
    if measured:
        f = make_subplots(rows=1, cols=2, subplot_titles=("output throughput change (%)", "TTFT p99 change (%)"))
        for col, k in enumerate(("output_throughput", "p99_ttft_ms"), start=1):
            names = [s.title for s in measured]
            pred = [((s.deltas.get(f"{k}_rel") or {}).get("mean") or 0.0) * 100 for s in measured]
            meas = [((s.measured["deltas"].get(k) or {}).get("rel") or 0.0) * 100 for s in measured]
            f.add_trace(go.Bar(x=names, y=pred, name="predicted", marker_color=PALETTE[0], showlegend=col == 1),
                        row=1, col=col)
            f.add_trace(go.Bar(x=names, y=meas, name="measured (engine)", marker_color=PALETTE[1],
                               showlegend=col == 1), row=1, col=col)
        f.update_layout(barmode="group", template="plotly_white", height=340, title="Predicted against measured")
        figs["measured"] = f
    return figs


__all__ = ["protocol_figures"]
