"""Plotly figures of runs: latency CDFs, server time series, batch composition, prefix hits, load sweeps.

Every builder takes ``{label: SimResult}`` (or precomputed rows) and returns a ``plotly.graph_objects.Figure``;
nothing here runs a simulation or knows about Streamlit, so the CLI's reports can reuse them (e.g.
``fig.write_html``). Long step logs are reduced to at most a few hundred points per series before plotting:
time series are averaged per time bin (each step weighted by its duration), CDFs are drawn through
quantiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from twin.results.records import FINISHED, REJECTED
from twin.results.sim_result import SimResult

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
PREFILL_COLOR = "#ff7f0e"
DECODE_COLOR = "#1f77b4"
MAX_POINTS = 400
TEMPLATE = "plotly_white"


def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _layout(fig: go.Figure, title: str | None, height: int) -> go.Figure:
    fig.update_layout(
        template=TEMPLATE, height=height, margin=dict(l=60, r=20, t=80, b=45),
        title=dict(text=title, x=0.01, xanchor="left", y=0.985, yanchor="top", yref="container") if title else None,
        # top right of the whole figure, level with its title: clear of the subplot titles
        legend=dict(orientation="h", xref="container", yref="container", x=0.99, y=0.99, xanchor="right",
                    yanchor="top", bgcolor="rgba(0,0,0,0)"),
        hovermode="x unified",
    )
    return fig


# --------------------------------------------------------------------------------------------------------
# reductions
# --------------------------------------------------------------------------------------------------------
def quantile_curve(values: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(x, F(x)) of the empirical CDF of ``values``: every point when there are few, else ``max_points``
    quantiles (the curve through them is the same to the eye)."""
    v = np.sort(np.asarray(values, float))
    v = v[np.isfinite(v)]
    n = v.size
    if n == 0:
        return np.empty(0), np.empty(0)
    if n <= max_points:
        return v, np.arange(1, n + 1) / n
    p = np.linspace(0.0, 1.0, max_points)
    return np.quantile(v, p), p


def binned_steps(result: SimResult, max_points: int = MAX_POINTS) -> dict[str, np.ndarray]:
    """The step log reduced to at most ``max_points`` time bins.

    Per bin: ``t`` (bin centre, s), ``queue`` and ``running`` (requests, summed over replicas), ``kv_usage``
    (0..1, over the replicas' steps), each the duration-weighted mean of its steps (for queue and running,
    idle time with no step counts as empty), ``preemptions`` (count in the bin), ``busy`` (step time /
    (bin width x replicas))."""
    steps = result.steps
    start = steps.column("start_s")
    empty = {k: np.empty(0) for k in ("t", "queue", "running", "kv_usage", "preemptions", "busy")}
    if start.size == 0:
        return empty
    dur = steps.column("duration_s")
    replica = steps.column("replica")
    t0 = float(result.sim_start_s or 0.0)
    t1 = float(max(result.sim_end_s or 0.0, float((start + dur).max())))
    if t1 <= t0:
        t1 = t0 + 1e-9
    n_bins = int(max(1, min(max_points, start.size)))
    edges = np.linspace(t0, t1, n_bins + 1)
    width = edges[1] - edges[0]
    idx = np.clip(((start - t0) / width).astype(np.int64), 0, n_bins - 1)
    n_rep = int(replica.max()) + 1 if replica.size else 1
    end = start + dur

    busy_time = _bin_integrals(start, end, np.ones_like(dur), edges)
    queue = _bin_integrals(start, end, steps.column("num_waiting").astype(float), edges) / width
    running = _bin_integrals(start, end, steps.column("num_running").astype(float), edges) / width
    kv_time = _bin_integrals(start, end, steps.column("kv_usage"), edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        # over the steps of every replica that ran in the bin (a gap where nothing ran)
        kv = np.where(busy_time > 1e-12 * width, kv_time / busy_time, np.nan)
    preempt = np.bincount(idx, weights=steps.column("num_preempted").astype(float), minlength=n_bins)
    return {"t": (edges[:-1] + edges[1:]) / 2, "queue": queue, "running": running, "kv_usage": kv,
            "preemptions": preempt, "busy": busy_time / (width * n_rep)}


def _bin_integrals(start: np.ndarray, end: np.ndarray, values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per bin, the integral of the step function that is ``values[i]`` on ``[start[i], end[i])`` (steps may
    overlap, e.g. across replicas): a step straddling an edge is split between its bins exactly.

    F(t) = sum over steps of v (min(t, end) - start)^+ (clipped at end) = [t V_s(t) - W_s(t)] - [t V_e(t) - W_e(t)]
    with V, W the prefix sums of v and v x time over steps started (ended) before t."""
    def prefix(times: np.ndarray) -> np.ndarray:
        order = np.argsort(times, kind="stable")
        t_sorted = times[order]
        v = values[order]
        cv = np.concatenate([[0.0], np.cumsum(v)])
        cw = np.concatenate([[0.0], np.cumsum(v * t_sorted)])
        k = np.searchsorted(t_sorted, edges, side="left")
        return edges * cv[k] - cw[k]

    F = prefix(start) - prefix(end)
    return np.diff(F)


def step_slice(result: SimResult, num_steps: int = 200, at: float = 0.5, replica: int = 0) -> dict[str, np.ndarray]:
    """``num_steps`` consecutive engine steps of one replica, centred at fraction ``at`` (0..1) of its run:
    ``index`` (step number on that replica), ``start`` and ``duration`` (s), ``prefill``/``decode`` tokens,
    ``prefill_seqs``/``decode_seqs``, ``waiting``."""
    steps = result.steps
    keys = ("index", "start", "duration", "prefill", "decode", "prefill_seqs", "decode_seqs", "waiting")
    if len(steps) == 0:
        return {k: np.empty(0) for k in keys}
    mine = np.flatnonzero(steps.column("replica") == replica)
    mine = mine[np.argsort(steps.column("start_s")[mine], kind="stable")]
    n = mine.size
    if n == 0:
        return {k: np.empty(0) for k in keys}
    w = min(num_steps, n)
    first = int(round(min(max(at, 0.0), 1.0) * (n - w)))
    sel = mine[first:first + w]
    return {"index": np.arange(first, first + w), "start": steps.column("start_s")[sel],
            "duration": steps.column("duration_s")[sel], "prefill": steps.column("num_prefill_tokens")[sel],
            "decode": steps.column("num_decode_tokens")[sel], "prefill_seqs": steps.column("num_prefill_seqs")[sel],
            "decode_seqs": steps.column("num_decode_seqs")[sel], "waiting": steps.column("num_waiting")[sel]}


def prefix_hits_over_time(result: SimResult, max_points: int = 60) -> dict[str, np.ndarray]:
    """Prefix-cache hit rate of the served requests by arrival time: cached prompt tokens / prompt tokens."""
    recs = [r for r in result.requests if r.status != REJECTED and r.num_cached_tokens >= 0]
    if not recs:
        return {"t": np.empty(0), "hit_rate": np.empty(0)}
    t = np.array([r.arrival_s for r in recs])
    hit = np.array([r.num_cached_tokens for r in recs], float)
    prompt = np.array([r.num_prompt_tokens for r in recs], float)
    n_bins = int(max(1, min(max_points, len(recs) // 20 or 1)))
    lo, hi = float(t.min()), float(t.max()) + 1e-9
    edges = np.linspace(lo, hi, n_bins + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, n_bins - 1)
    h = np.bincount(idx, weights=hit, minlength=n_bins)
    q = np.bincount(idx, weights=prompt, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(q > 0, h / q, np.nan)
    return {"t": (edges[:-1] + edges[1:]) / 2, "hit_rate": rate}


# --------------------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------------------
_LATENCY = (("ttft", "TTFT (ms)"), ("tpot", "TPOT (ms)"), ("e2el", "E2E latency (ms)"))


def latency_values_ms(result: SimResult, metric: str) -> np.ndarray:
    attr = {"ttft": "ttft_s", "tpot": "tpot_s", "e2el": "e2el_s"}[metric]
    vals = [getattr(r, attr) for r in result.requests if r.status == FINISHED]
    return np.array([v for v in vals if v is not None], float) * 1000.0


def latency_cdfs(runs: Mapping[str, SimResult], title: str | None = "Latency distributions") -> go.Figure:
    """TTFT, TPOT and E2E latency CDFs, one line per run (log-scaled x when the values span decades)."""
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in _LATENCY], horizontal_spacing=0.07)
    for i, (name, result) in enumerate(runs.items()):
        for col, (metric, _) in enumerate(_LATENCY, start=1):
            x, y = quantile_curve(latency_values_ms(result, metric))
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=name, legendgroup=name, showlegend=col == 1,
                                     line=dict(color=_color(i), width=2),
                                     hovertemplate=f"{name}: %{{x:.1f}} ms at %{{y:.0%}}<extra></extra>"),
                          row=1, col=col)
    for col, (metric, _) in enumerate(_LATENCY, start=1):
        all_vals = np.concatenate([latency_values_ms(r, metric) for r in runs.values()] or [np.empty(0)])
        pos = all_vals[all_vals > 0]
        if pos.size and pos.max() / pos.min() > 50:
            fig.update_xaxes(type="log", dtick=1, minor=dict(ticks="outside", showgrid=True), row=1, col=col)
        fig.update_yaxes(range=[0, 1.02], tickformat=".0%", row=1, col=col,
                         title_text="share of requests" if col == 1 else None)
    _layout(fig, title, 340)
    fig.update_layout(hovermode="closest")
    return fig


def server_timeseries(runs: Mapping[str, SimResult], title: str | None = "Server over time",
                      max_points: int = MAX_POINTS) -> go.Figure:
    """Queue length, running batch, KV usage and preemptions against simulated time."""
    rows = (("queue", "waiting requests"), ("running", "running batch"), ("kv_usage", "KV usage"),
            ("preemptions", "preemptions"))
    fig = make_subplots(rows=len(rows), cols=1, shared_xaxes=True, vertical_spacing=0.05,
                        subplot_titles=[t for _, t in rows])
    for i, (name, result) in enumerate(runs.items()):
        b = binned_steps(result, max_points)
        for r, (key, _) in enumerate(rows, start=1):
            kind = go.Bar if key == "preemptions" else go.Scatter
            kwargs: dict[str, Any] = dict(x=b["t"], y=b[key], name=name, legendgroup=name, showlegend=r == 1)
            if kind is go.Scatter:
                kwargs.update(mode="lines", line=dict(color=_color(i), width=1.5), connectgaps=False)
            else:
                kwargs.update(marker_color=_color(i), opacity=0.8)
            fig.add_trace(kind(**kwargs), row=r, col=1)
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(tickformat=".0%", range=[0, 1.05], row=3, col=1)
    fig.update_xaxes(title_text="simulated time (s)", row=len(rows), col=1)
    fig.update_layout(barmode="group")
    return _layout(fig, title, 620)


def batch_composition(result: SimResult, max_num_batched_tokens: int | None = None, title: str | None = None,
                      num_steps: int = 200, at: float = 0.5) -> go.Figure:
    """Step-level batch composition: a slice of consecutive engine steps (replica 0, centred at fraction ``at``
    of the run), one bar per step from its start, as wide as the step took, stacked decode and prefill tokens;
    the token budget as a dashed line when the steps come near it."""
    c = step_slice(result, num_steps, at)
    fig = go.Figure()
    ms = c["duration"] * 1000.0
    custom = np.stack([c["index"], ms, c["decode_seqs"], c["prefill_seqs"], c["waiting"]], axis=-1) if ms.size else None
    hover = ("step %{customdata[0]:.0f}: %{customdata[1]:.1f} ms, %{customdata[2]:.0f} decoding + "
             "%{customdata[3]:.0f} prefilling, %{customdata[4]:.0f} waiting<br>")
    for key, name, color in (("decode", "decode tokens", DECODE_COLOR), ("prefill", "prefill tokens", PREFILL_COLOR)):
        fig.add_trace(go.Bar(x=c["start"] + c["duration"] / 2, y=c[key], width=c["duration"], name=name,
                             marker_color=color, marker_line_width=0, customdata=custom,
                             hovertemplate=hover + f"{name} %{{y:,.0f}}<extra></extra>"))
    peak = float(np.max(c["prefill"] + c["decode"])) if ms.size else 0.0
    if max_num_batched_tokens:
        if peak >= 0.25 * max_num_batched_tokens:
            fig.add_hline(y=max_num_batched_tokens, line=dict(color="#444", dash="dash", width=1),
                          annotation_text=f"max_num_batched_tokens = {max_num_batched_tokens:,}",
                          annotation_position="top left")
        else:
            fig.add_annotation(text=f"max_num_batched_tokens = {max_num_batched_tokens:,} (off the scale)",
                               xref="paper", yref="paper", x=1.0, y=1.0, xanchor="right", yanchor="bottom",
                               showarrow=False, font=dict(size=11, color="#666"))
    fig.update_layout(barmode="stack", bargap=0)
    fig.update_xaxes(title_text="simulated time (s); one bar per engine step, as wide as the step took")
    fig.update_yaxes(title_text="tokens in the step", rangemode="tozero")
    _layout(fig, title, 340)
    fig.update_layout(hovermode="closest")
    return fig


def prefix_hit_rate(runs: Mapping[str, SimResult], overall: Mapping[str, float | None] | None = None,
                    title: str | None = "Prefix-cache hit rate") -> go.Figure:
    """Hit rate (cached / prompt tokens) of requests by arrival time, one line per run; ``overall`` (the
    run's metric) goes into the legend."""
    fig = go.Figure()
    for i, (name, result) in enumerate(runs.items()):
        h = prefix_hits_over_time(result)
        rate = (overall or {}).get(name)
        label = name if rate is None else f"{name} (overall {rate:.0%})"
        fig.add_trace(go.Scatter(x=h["t"], y=h["hit_rate"], mode="lines+markers", name=label,
                                 line=dict(color=_color(i), width=2), marker=dict(size=4)))
    fig.update_yaxes(title_text="cached / prompt tokens", tickformat=".0%", range=[0, 1.05])
    fig.update_xaxes(title_text="arrival time (s)")
    return _layout(fig, title, 320)


def throughput_latency(sweeps: Mapping[str, Sequence[Mapping[str, Any]]],
                       title: str | None = "Throughput against latency across load") -> go.Figure:
    """One curve per configuration through its sweep points: output throughput against TTFT and TPOT
    (median solid, p99 dotted). Each point is a dict of metrics with a ``load`` label."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT", "TPOT"), horizontal_spacing=0.09)
    for i, (name, points) in enumerate(sweeps.items()):
        pts = sorted(points, key=lambda p: p.get("output_throughput") or 0.0)
        x = [p.get("output_throughput") for p in pts]
        labels = [str(p.get("load", "")) for p in pts]
        for col, metric in enumerate(("ttft", "tpot"), start=1):
            for stat, dash in (("median", "solid"), ("p99", "dot")):
                y = [p.get(f"{stat}_{metric}_ms") for p in pts]
                fig.add_trace(go.Scatter(
                    x=x, y=y, mode="lines+markers", name=f"{name} {stat}", legendgroup=f"{name} {stat}",
                    showlegend=col == 1, line=dict(color=_color(i), dash=dash, width=2), text=labels,
                    hovertemplate=(f"{name}: %{{text}}<br>%{{x:,.0f}} tok/s, {metric.upper()} {stat} "
                                   f"%{{y:,.1f}} ms<extra></extra>")), row=1, col=col)
            fig.update_xaxes(title_text="output throughput (tok/s)", row=1, col=col)
            fig.update_yaxes(title_text=f"{metric.upper()} (ms)", type="log", dtick=1,
                             minor=dict(ticks="outside", showgrid=True), row=1, col=col)
    _layout(fig, title, 360)
    fig.update_layout(hovermode="closest")
    return fig


def step_time_split(splits: Mapping[str, Any], title: str | None = "Where a typical step's time goes") -> go.Figure:
    """Stacked horizontal bars of a `twin.analysis.causes.StepSplit` per run (runs without one are left out)."""
    parts = (("compute", "compute", "#2ca02c"), ("memory", "memory (weights + KV)", "#1f77b4"),
             ("communication", "all-reduce", "#9467bd"), ("overhead", "overhead", "#7f7f7f"))
    names = [n for n, s in splits.items() if s is not None][::-1]  # the first run on top
    fig = go.Figure()
    for attr, label, color in parts:
        fig.add_trace(go.Bar(y=names, x=[getattr(splits[n], attr) for n in names], name=label, orientation="h",
                             marker_color=color, hovertemplate=f"{label}: %{{x:.0%}}<extra></extra>"))
    fig.update_layout(barmode="stack", legend_traceorder="normal")
    fig.update_xaxes(tickformat=".0%", range=[0, 1])
    _layout(fig, title, 120 + 40 * max(1, len(names)))
    fig.update_layout(hovermode="closest")
    return fig


__all__ = [
    "batch_composition", "binned_steps", "latency_cdfs", "prefix_hit_rate",
    "prefix_hits_over_time", "quantile_curve", "server_timeseries", "step_slice", "step_time_split",
    "throughput_latency",
]
