"""Tables and plots of a sweep's rows: the rows as a DataFrame, the per-(configuration, rate) summary, a
Plotly figure of it, and writing a figure as HTML."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from twin.errors import TwinInputError

TABLE_METRICS = ("request_throughput", "output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p99_tpot_ms",
                 "p99_e2el_ms")


def rows_frame(rows: Sequence[Mapping[str, Any]]):
    import pandas as pd

    frame = pd.DataFrame(list(rows))
    return frame


def summarize(rows: Sequence[Mapping[str, Any]], knob_keys: Sequence[str]):
    """One row per (configuration, rate): means over replications, ``passed`` when all passed."""
    import pandas as pd

    from twin.analysis.run_limits import agreed

    frame = rows_frame(rows)
    if frame.empty:
        return frame
    keys = ["config", *knob_keys, "rate_scale"]
    out = []
    for _, group in frame.groupby(["config", "rate_scale"], dropna=False, sort=False):
        first = group.iloc[0]
        row = {k: first.get(k) for k in keys if k in group}
        for k in ("offered_rate_per_s", "gpu", "tensor_parallel_size", "replicas", "cost_per_hour"):
            if k in group:
                row[k] = first.get(k)
        statuses = set(group["status"])
        row["status"] = statuses.pop() if len(statuses) == 1 else "mixed"
        flags = list(group["passed"])
        row["passed"] = None if any(f is None for f in flags) else bool(all(flags))
        row["replications"] = int((group["status"] == "ok").sum())
        for k in (*TABLE_METRICS, "request_goodput", "prefix_cache_hit_rate", "usd_per_million_output_tokens"):
            if k in group:
                vals = pd.to_numeric(group[k], errors="coerce").dropna()
                row[k] = float(vals.mean()) if len(vals) else None
        row["reasons"] = next((r for r in group["reasons"] if r), "")
        for k in ("limit", "limit_knob"):                   # what limits it (twin.analysis.run_limits)
            if k in group:
                row[k] = agreed([v if isinstance(v, str) else None for v in group[k]])
        for k in ("heldout_server", "heldout_bands"):       # the held-out error band (issue 33), last
            if k in group:
                row[k] = first.get(k)
        out.append(row)
    return pd.DataFrame(out)


def sweep_figure(summary, x: str | None = None, y: str = "p99_ttft_ms", color: str | None = None,
                 title: str = "twin sweep"):
    """A Plotly scatter of the summary: one line per configuration across rates, failures hollow."""
    import plotly.graph_objects as go

    fig = go.Figure()
    if summary.empty:
        return fig
    x = x or ("offered_rate_per_s" if summary["offered_rate_per_s"].notna().any() else "config")
    for k in (x, y, *([color] if color else [])):
        if k not in summary.columns:
            raise TwinInputError(f"plot axis {k!r}: not a column; columns: {', '.join(summary.columns)}")
    groups = summary.groupby("config", sort=False)
    for cfg, g in groups:
        g = g[g["status"] == "ok"] if (g["status"] == "ok").any() else g
        name = g.iloc[0][color] if color and color in g else cfg
        passed = [bool(p) if p is not None else True for p in g["passed"]]
        fig.add_trace(go.Scatter(
            x=g[x], y=g[y], mode="lines+markers", name=f"{name} (#{cfg})" if color else f"config {cfg}",
            marker={"symbol": ["circle" if p else "circle-open" for p in passed], "size": 9},
            text=[f"passed={p}" for p in g["passed"]], hovertemplate=f"{x}=%{{x}}<br>{y}=%{{y}}<br>%{{text}}",
        ))
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, template="plotly_white",
                      legend_title=color or "configuration")
    return fig


def write_html(fig, path: str) -> None:
    from pathlib import Path

    p = Path(path)
    if not p.parent.exists():
        raise TwinInputError(f"--plot {path}: folder {p.parent} does not exist")
    fig.write_html(str(p), include_plotlyjs=True, full_html=True)
