"""The ``twin diagnose`` report: the verdict, each cause's evidence and fix, the profile, the fit; and its figures.

Blocks (rendered through ``report_render``): the measured requests in a line, the verdict and the causes, what
the measurements say on their own (``measured_profile``), the fit table with its confidence (``cap_fit``), the
prefix-cache rates and the notes. Figures: TTFT against arrival time (with the fitted twin's and the staircase's
levels), requests in flight and decoding over time (with the cap), the fit score per candidate, and the measured
against the fitted TTFT distributions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go

from twin.analysis.report_render import Block, write_reports
from twin.results import numbers
from twin.results.figures import PALETTE, quantile_curve


def diagnose_blocks(rep: Any) -> list[Block]:
    p = rep.profile
    b: list[Block] = [("h1", f"Diagnosis: {Path(rep.source).name}")]
    m = rep.measured
    b.append(("p", f"**{numbers.counted(rep.num_requests, 'completed request')}**"
                   + (f" ({m.num_failed} failed, left out)" if m.num_failed else "")
                   + f" over {numbers.duration_s(p.span_s)}; "
                   + (f"closed loop at max_concurrency {m.max_concurrency}; " if m.max_concurrency else "")
                   + f"TTFT p50 {numbers.duration_s(np.median(m.ttft_s))}, "
                   f"p99 {numbers.duration_s(np.percentile(m.ttft_s, 99))}; "
                   + (f"TPOT p50 {numbers.duration_s(p.median_tpot_s)}. " if p.median_tpot_s else "")
                   + (f"Twin fitted on **{rep.scenario}**." if rep.scenario else
                      "No scenario given: measurements only, no fit.")))
    b.append(("h2", f"Verdict: {rep.summary}"))
    for i, c in enumerate(rep.causes, 1):
        b.append(("h3", f"{i}. {c.title} ({c.likelihood})"))
        b.append(("list", c.evidence))
        b.append(("p", f"**What to change:** {c.fix}"))
    b.append(("figure", "ttft", "TTFT against arrival time"))
    b.append(("figure", "concurrency", "requests in flight and decoding over time"))
    b.append(("h2", "What the measurements say"))
    rows = [["TTFT floor (fastest, no queue)", f"{p.ttft_floor_s * 1e3:,.1f} ms"],
            ["service time (floor + median decode)", numbers.duration_s(p.service_s)],
            ["max in flight / max decoding at once", f"{p.max_in_flight} / {p.max_decoding}"],
            ["share of time with requests queued", f"{p.queued_share:.0%}"],
            ["... with the decoding count at its ceiling", f"{p.pinned_share:.0%}"],
            ["TTFT levels (multiples of the service time: requests)",
             ", ".join(f"{k}: {v}" for k, v in p.waves.items()) or "-"],
            ["opening burst: requests / served at once", f"{p.burst_size} / {p.burst_fast}"],
            ["mid-stream stalls (ITL > 10x median)", str(p.stall_requests)]]
    b.append(("table", ["measure", "value"], rows))
    if rep.fit is not None:
        f = rep.fit
        b.append(("h2", "Fit: which max_num_seqs reproduces the measurements"))
        b.append(("p", f"The measured requests replayed through the twin "
                       f"({_replay_words(f)}"
                       f"), step times scaled until the simulated median TPOT is within 1% of the measured one. Score: "
                       f"mean absolute difference of the TTFT percentiles, relative to the mean measured latency, "
                       f"plus any TPOT miss beyond 1% times the share of the latency after the first token. "
                       f"Confidence **{f.confidence}** (margin to the runner-up {f.margin:.0%}, log-likelihood "
                       f"ratio {f.log_likelihood_ratio:.1f})."))
        rows = []
        for c in sorted(f.candidates, key=lambda c: c.score):
            rows.append([c.label + (" **(best)**" if c is f.best else ""), f"{c.score:.1%}", f"{c.speed_factor:.2f}",
                         "yes" if c.binds else "no",
                         "-" if c.sim_median_tpot_s is None else f"{c.sim_median_tpot_s * 1e3:.2f} ms",
                         str(c.num_preemptions)])
        b.append(("table", ["max_num_seqs", "distance", "speed factor", "cap binds", "TPOT p50", "preemptions"], rows))
        b.append(("figure", "fit", "fit score per candidate"))
        b.append(("figure", "cdf", "TTFT distribution: measured and fitted"))
    if rep.prefix:
        pr = rep.prefix
        items = [f"attainable hit rate of the scenario's traffic: {pr['attainable_hit_rate']:.1%}"]
        if pr.get("measured_hit_rate") is not None:
            items.append(f"measured: {pr['measured_hit_rate']:.1%}")
        if pr.get("attainable_without_head_rate") is not None:
            items.append(f"with the unique prompt head moved: {pr['attainable_without_head_rate']:.1%}")
        b += [("h2", "Prefix cache"), ("list", items)]
    if rep.notes:
        b += [("h2", "Notes"), ("list", rep.notes)]
    return b


def _replay_words(f: Any) -> str:
    if f.closed_loop:
        return f"closed loop at {f.concurrency} streams"
    if f.concurrency:
        return f"at their measured send times, at most {f.concurrency} in flight"
    return "at their measured arrival times"


def diagnose_figures(rep: Any) -> dict[str, go.Figure]:
    m, p = rep.measured, rep.profile
    figs: dict[str, go.Figure] = {}
    f = go.Figure()
    f.add_trace(go.Scatter(x=m.arrival_s, y=m.ttft_s * 1e3, mode="markers", name="measured",
                           marker=dict(color=PALETTE[0], size=6),
                           hovertemplate="arrived %{x:.2f} s: TTFT %{y:,.0f} ms<extra></extra>"))
    if rep.fit is not None and rep.fit.best.result is not None:
        from twin.results.records import FINISHED

        fin = [r for r in rep.fit.best.result.requests if r.status == FINISHED]
        f.add_trace(go.Scatter(x=[r.arrival_s for r in fin], y=[r.ttft_s * 1e3 for r in fin], mode="markers",
                               name=f"twin, max_num_seqs = {rep.fit.best.label}",
                               marker=dict(color=PALETTE[1], size=5, symbol="x")))
    if p.staircase:
        for k in p.waves:
            f.add_hline(y=(p.ttft_floor_s + k * p.service_s) * 1e3, line=dict(color="#999", dash="dot", width=1),
                        annotation_text=f"{k} x service time" if k else "no wait", annotation_position="right")
    f.update_layout(template="plotly_white", height=360, title="TTFT against arrival time",
                    xaxis_title="arrival (s)", yaxis_title="TTFT (ms)", legend=dict(orientation="h", y=-0.2),
                    margin=dict(r=140))
    figs["ttft"] = f
    g = go.Figure()
    if p.grid.size:
        g.add_trace(go.Scatter(x=p.grid, y=p.in_flight, mode="lines", line_shape="hv", name="in flight",
                               line=dict(color=PALETTE[0])))
        g.add_trace(go.Scatter(x=p.grid, y=p.decoding, mode="lines", line_shape="hv", name="decoding",
                               line=dict(color=PALETTE[2])))
    if rep.cap:
        g.add_hline(y=rep.cap, line=dict(color=PALETTE[1], dash="dash"), annotation_text=f"cap {rep.cap}")
    g.update_layout(template="plotly_white", height=320, title="Requests in flight and decoding",
                    xaxis_title="time (s)", yaxis_title="requests", legend=dict(orientation="h", y=-0.25))
    figs["concurrency"] = g
    if rep.fit is not None:
        cands = rep.fit.candidates
        h = go.Figure(go.Bar(x=[c.label for c in cands], y=[max(c.score, 1e-4) for c in cands],
                             marker_color=[PALETTE[1] if c is rep.fit.best else PALETTE[0] for c in cands],
                             hovertemplate="%{x}: %{y:.2%}<extra></extra>"))
        h.update_layout(template="plotly_white", height=320, title="Fit: TTFT distance per candidate (lower is better)",
                        yaxis=dict(type="log", title="distance / mean latency"))
        figs["fit"] = h
        c = go.Figure()
        x, y = quantile_curve(m.ttft_s * 1e3)
        c.add_trace(go.Scatter(x=x, y=y, mode="lines", name="measured", line=dict(color=PALETTE[0], width=3)))
        for i, cand in enumerate([rep.fit.best, rep.fit.runner_up]):
            if cand is None:
                continue
            x, y = quantile_curve(cand.sim_ttft_s * 1e3)
            c.add_trace(go.Scatter(x=x, y=y, mode="lines", name=f"twin, max_num_seqs = {cand.label}",
                                   line=dict(color=PALETTE[1 + i], dash="solid" if i == 0 else "dot")))
        c.update_layout(template="plotly_white", height=320, title="TTFT distribution", xaxis_title="TTFT (ms)",
                        yaxis=dict(tickformat=".0%", title="share of requests"), legend=dict(orientation="h", y=-0.3))
        figs["cdf"] = c
    return figs


def write_diagnose_report(rep: Any, out_dir: str | Path) -> dict[str, Path]:
    blocks = diagnose_blocks(rep)
    return write_reports(out_dir, "diagnosis", blocks, diagnose_figures(rep), blocks[0][1], rep.as_dict())


__all__ = ["diagnose_blocks", "diagnose_figures", "write_diagnose_report"]
