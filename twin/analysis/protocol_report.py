"""The ``twin protocol`` report: a summary table of the steps, then each step's finding, deltas and commands.

The report opens with the deployment, the traffic and how the predictions were made (replications, seeds), then
one row per step (verdict, change, the headline metrics' relative change with its 95 % half-width), the
assumptions, and a section per step: question, finding, a baseline / candidate / change table (with the measured
columns in engine mode), the prefix-cache hit rates, the speculative-decoding grid, the commands that measure it
on the real server and the notes. The blocks render through ``report_render``; the figures they name come from
``protocol_figures``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from twin.analysis.protocol_engine import ENGINE_KEYS
from twin.analysis.protocol_figures import protocol_figures
from twin.analysis.protocol_verdicts import DELTA_KEYS, VERDICT_WORDS
from twin.analysis.report_render import Block, write_reports
from twin.results.numbers import counted
from twin.results.report import format_value, label


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
    reps = rep.replications
    seeds = f"seed {rep.seed}" if reps == 1 else f"seeds {rep.seed}-{rep.seed + reps - 1}"
    title = f"Protocol: {rep.scenario}" + ("" if rep.variant == "baseline" else f" [{rep.variant}]")
    b: list[Block] = [("h1", title),
                      ("p", f"**Deployment:** {rep.headline}. **Traffic:** {rep.offered_load}. "
                            f"**Predictions:** {counted(reps, 'replication')} ({seeds}); changes are "
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


def write_protocol_report(rep: Any, out_dir: str | Path) -> dict[str, Path]:
    blocks = protocol_blocks(rep)
    return write_reports(out_dir, "protocol", blocks, protocol_figures(rep), blocks[0][1], rep.as_dict())


__all__ = ["SUMMARY_KEYS", "protocol_blocks", "write_protocol_report"]
