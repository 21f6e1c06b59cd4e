"""Reports of ``twin protocol`` and ``twin diagnose``: Markdown, and an HTML page with Plotly figures.

Both reports are built once as a list of blocks (headings, paragraphs, tables, code, figures) and rendered to
either format, so the two never disagree. The HTML page embeds plotly.js once and works offline.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from twin.errors import TwinInputError
from twin.results.figures import PALETTE, latency_cdfs, quantile_curve
from twin.results.report import format_value, label

Block = tuple


# --------------------------------------------------------------------------------------------------------
# rendering blocks
# --------------------------------------------------------------------------------------------------------
def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + b[1])
        elif kind == "p":
            out.append(b[1])
        elif kind == "list":
            out.append("\n".join(f"- {item}" for item in b[1]))
        elif kind == "table":
            headers, rows = b[1], b[2]
            lines = ["| " + " | ".join(_md_cell(h) for h in headers) + " |",
                     "|" + "|".join("---" for _ in headers) + "|"]
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            out.append("\n".join(lines))
        elif kind == "code":
            out.append("```bash\n" + b[1] + "\n```")
        elif kind == "figure":
            out.append(f"*Figure: {b[2]} (in the HTML report).*")
    return "\n\n".join(out) + "\n"


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1180px;margin:24px auto;padding:0 16px;
color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}th,td{border:1px solid #ddd;padding:4px 8px;
text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
pre{background:#f6f8fa;padding:10px;overflow-x:auto;font-size:.85em;white-space:pre-wrap;word-break:break-all}
.recommend{color:#1a7f37;font-weight:600}.advise_against{color:#cf222e;font-weight:600}.flag{color:#9a6700;
font-weight:600}.no_change{color:#57606a}.info{color:#0969da}
"""


def _inline(text: str) -> str:
    """Markdown-ish emphasis (**bold**, `code`) to HTML, the rest escaped."""
    esc = html.escape(str(text))
    parts = esc.split("**")
    esc = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    parts = esc.split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(blocks: Sequence[Block], figures: Mapping[str, go.Figure], title: str) -> str:
    out = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
           f"<style>{_CSS}</style></head><body>"]
    first = True
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{_inline(b[1])}</{kind}>")
        elif kind == "p":
            text = b[1]
            if len(text) > 2 and text.startswith("*") and text.endswith("*") and not text.startswith("**"):
                out.append(f"<p><em>{_inline(text[1:-1])}</em></p>")
            else:
                out.append(f"<p>{_inline(text)}</p>")
        elif kind == "list":
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b[1]) + "</ul>")
        elif kind == "table":
            head = "".join(f"<th>{_inline(h)}</th>" for h in b[1])
            rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in b[2])
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif kind == "code":
            out.append(f"<pre>{html.escape(b[1])}</pre>")
        elif kind == "figure":
            fig = figures.get(b[1])
            if fig is not None:
                out.append(fig.to_html(full_html=False, include_plotlyjs=first,
                                       config={"displaylogo": False}))
                first = False
    out.append("</body></html>")
    return "\n".join(out)


def write_reports(out_dir: str | Path, stem: str, blocks: Sequence[Block], figures: Mapping[str, go.Figure],
                  title: str, data: Mapping[str, Any]) -> dict[str, Path]:
    """``<stem>.md``, ``<stem>.html`` and ``<stem>.json`` in ``out_dir`` (created)."""
    d = Path(out_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TwinInputError(f"--out {out_dir}: cannot create the folder ({exc.strerror})") from None
    paths = {"markdown": d / f"{stem}.md", "html": d / f"{stem}.html", "json": d / f"{stem}.json"}
    paths["markdown"].write_text(to_markdown(blocks), encoding="utf-8")
    paths["html"].write_text(to_html(blocks, figures, title), encoding="utf-8")
    paths["json"].write_text(json.dumps(_jsonable(data), indent=1, sort_keys=True, allow_nan=False) + "\n",
                             encoding="utf-8")
    return paths


def _jsonable(v: Any) -> Any:
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if math.isfinite(f) else None
    if v is None or isinstance(v, str):
        return v
    return str(v)


# --------------------------------------------------------------------------------------------------------
# protocol
# --------------------------------------------------------------------------------------------------------
def _rel_text(deltas: Mapping[str, dict], key: str) -> str:
    rel = deltas.get(f"{key}_rel")
    d = deltas.get(key)
    if key == "prefix_cache_hit_rate":
        if not d or d.get("mean") is None:
            return "-"
        return f"{d['mean'] * 100:+.1f} pp"
    if not rel or rel.get("mean") is None:
        return "-"
    text = f"{rel['mean'] * 100:+.1f}%"
    if rel.get("half_width") is not None:
        text += f" ± {rel['half_width'] * 100:.1f}"
    return text


def _ci_text(entry: Mapping[str, Any] | None, key: str) -> str:
    if not entry or entry.get("mean") is None:
        return "-"
    text = format_value(key, entry["mean"])
    if entry.get("half_width") is not None:
        hw = entry["half_width"]
        text += f" ± {hw * 100:.1f} pp" if key == "prefix_cache_hit_rate" else f" ± {format_value(key, hw)}"
    return text


SUMMARY_KEYS = ("output_throughput", "p99_ttft_ms", "median_tpot_ms", "p99_e2el_ms")


def protocol_blocks(rep: Any) -> list[Block]:
    from twin.analysis.protocol import DELTA_KEYS, ENGINE_KEYS, VERDICT_WORDS

    reps = rep.replications
    seeds = f"seed {rep.seed}" if reps == 1 else f"seeds {rep.seed}-{rep.seed + reps - 1}"
    title = f"Protocol: {rep.scenario}" + ("" if rep.variant == "baseline" else f" [{rep.variant}]")
    b: list[Block] = [("h1", title),
                      ("p", f"**Deployment:** {rep.headline}. **Traffic:** {rep.offered_load}. "
                            f"**Predictions:** {reps} replication{'s' if reps > 1 else ''} ({seeds}); changes are "
                            f"per-replication differences from the baseline, mean ± 95% half-width."
                            + (f" **Measured:** on the calibration engine ({rep.engine})." if rep.engine else ""))]
    base = rep.evaluations["baseline"]
    rows = []
    for i, s in enumerate(rep.steps, 1):
        verdict = VERDICT_WORDS.get(s.verdict, s.verdict)
        if s.key == "baseline":
            cells = [_ci_text(base.summary.get(k), k) for k in SUMMARY_KEYS]
        else:
            cells = [_rel_text(s.deltas, k) if s.deltas else "-" for k in SUMMARY_KEYS]
        rows.append([f"{i}. {s.title}", f"**{verdict}**" if s.verdict in ("recommend", "advise_against") else verdict,
                     s.change_label or "-", *cells])
    b.append(("table", ["step", "verdict", "change", *[label(k) for k in SUMMARY_KEYS]], rows))
    b.append(("figure", "steps", "predicted change per step, with 95% intervals"))
    if rep.assumptions:
        b += [("h3", "Assumptions"), ("list", rep.assumptions)]
    for i, s in enumerate(rep.steps, 1):
        b.append(("h2", f"{i}. {s.title}: {VERDICT_WORDS.get(s.verdict, s.verdict)}"))
        b.append(("p", f"*{s.question}*"))
        b.append(("p", s.finding))
        if s.key == "baseline":
            b.append(("table", ["metric", "baseline (mean ± 95%)"],
                      [[label(k), _ci_text(base.summary.get(k), k)] for k in DELTA_KEYS
                       if base.summary.get(k)]))
        elif s.candidate and s.deltas:
            cand = rep.evaluations[s.candidate]
            headers = ["metric", "baseline", s.candidate, "change (95% CI)"]
            m = s.measured or {}
            if m.get("deltas") is not None:
                headers += ["measured baseline", "measured", "measured change"]
            trows = []
            for k in DELTA_KEYS:
                if not s.deltas.get(k):
                    continue
                row = [label(k), format_value(k, base.mean(k)), format_value(k, cand.mean(k)), _rel_text(s.deltas, k)]
                if m.get("deltas") is not None:
                    md = m["deltas"].get(k)
                    row += [format_value(k, m["baseline"].get(k)) if k in ENGINE_KEYS else "-",
                            format_value(k, m["candidate"].get(k)) if k in ENGINE_KEYS else "-",
                            "-" if not md else (f"{md['delta'] * 100:+.1f} pp" if k == "prefix_cache_hit_rate" else
                                                f"{md['rel'] * 100:+.1f}%" if md.get("rel") is not None else "-")]
                trows.append(row)
            b.append(("table", headers, trows))
        if s.key == "baseline" and s.measured:
            mb = s.measured["baseline"]
            b.append(("table", ["metric", "predicted (mean)", "measured on the engine"],
                      [[label(k), format_value(k, base.mean(k)), format_value(k, mb.get(k))] for k in ENGINE_KEYS]))
        if s.key == "prefix_caching":
            d = s.details
            items = [f"attainable hit rate (unbounded-cache oracle over {d['num_requests']} requests): "
                     f"{d['attainable_hit_rate']:.1%}",
                     f"achieved now: {d['achieved_hit_rate']:.1%} (prefix caching {'on' if d['enabled'] else 'off'})"]
            if d.get("attainable_without_head_rate") is not None:
                items.append(f"with the unique first segment moved behind the shared part: "
                             f"{d['attainable_without_head_rate']:.1%}")
            if d.get("hit_rate_after") is not None:
                items.append(f"predicted after the change: {d['hit_rate_after']:.1%}")
            b.append(("list", items))
            b.append(("figure", "prefix", "prefix-cache hit rates"))
        if s.key == "speculative_decoding" and s.details.get("grid"):
            grows = []
            for g in s.details["grid"]:
                tp, tpot = g["throughput_ratio"], g["tpot_ratio"]
                grows.append([g["task_class"], f"{g['concurrency']}{' (operating)' if g['operating'] else ''}",
                              _ratio(tp), _ratio(tpot),
                              "-" if g["acceptance_length"] is None else f"{g['acceptance_length']:.2f}",
                              g["verdict"]])
            b.append(("table", ["task class", "streams", "output throughput (spec / none)", "TPOT p50 (spec / none)",
                                "acceptance length", "verdict"], grows))
            b.append(("figure", "spec", "speculative decoding gain by task class and concurrency"))
        if s.commands:
            b.append(("p", "Measure it on the real server:"))
            b.append(("code", "\n".join(s.commands)))
        if s.notes:
            b.append(("list", s.notes))
    if rep.command_notes:
        b += [("h2", "About the commands"), ("list", rep.command_notes)]
    b.append(("h2", "Latency distributions"))
    b.append(("figure", "latency", "TTFT, TPOT and E2E latency CDFs of the baseline and each step's change"))
    if any(s.measured and s.measured.get("deltas") for s in rep.steps):
        b.append(("figure", "measured", "predicted against measured change"))
    return b


def _ratio(entry: Mapping[str, Any]) -> str:
    if not entry or entry.get("mean") is None:
        return "-"
    text = f"{entry['mean']:.2f}x"
    if entry.get("half_width") is not None:
        text += f" ± {entry['half_width']:.2f}"
    return text


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
            f.add_trace(go.Bar(x=[f"{g['concurrency']} stream(s)" for g in cells],
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


def write_protocol_report(rep: Any, out_dir: str | Path) -> dict[str, Path]:
    blocks = protocol_blocks(rep)
    return write_reports(out_dir, "protocol", blocks, protocol_figures(rep), blocks[0][1], rep.as_dict())


# --------------------------------------------------------------------------------------------------------
# diagnose
# --------------------------------------------------------------------------------------------------------
def diagnose_blocks(rep: Any) -> list[Block]:
    p = rep.profile
    b: list[Block] = [("h1", f"Diagnosis: {Path(rep.source).name}")]
    m = rep.measured
    b.append(("p", f"**{rep.num_requests} completed requests**"
                   + (f" ({m.num_failed} failed, left out)" if m.num_failed else "")
                   + f" over {p.span_s:.1f} s; "
                   + (f"closed loop at max_concurrency {m.max_concurrency}; " if m.max_concurrency else "")
                   + f"TTFT p50 {np.median(m.ttft_s) * 1e3:,.0f} ms, p99 {np.percentile(m.ttft_s, 99) * 1e3:,.0f} ms; "
                   + (f"TPOT p50 {p.median_tpot_s * 1e3:.2f} ms. " if p.median_tpot_s else "")
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
            ["service time (floor + median decode)", f"{p.service_s:.3g} s"],
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
                       f"({'closed loop at ' + str(f.concurrency) + ' streams' if f.closed_loop else 'at their measured arrival times'}"
                       f"), one run per candidate, step times scaled to match the measured median TPOT. Score: mean "
                       f"absolute difference of the TTFT percentiles, relative to the mean measured latency. "
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


__all__ = ["diagnose_blocks", "diagnose_figures", "protocol_blocks", "protocol_figures", "to_html", "to_markdown",
           "write_diagnose_report", "write_protocol_report", "write_reports"]
