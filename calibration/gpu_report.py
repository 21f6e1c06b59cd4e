"""The GPU run's report as markdown: the headline figures first (batch-1 decode against the weight-read bound,
held-out step-time MAPE, twin-vs-engine errors per load), then the details (decode rows, prefill FLOP/s, the
fit by kind, the phases and their times, notes)."""

from __future__ import annotations

from typing import Any


def si(value: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def pct(x: float | None, signed: bool = True) -> str:
    if x is None:
        return "-"
    return f"{x * 100:+.1f}%" if signed else f"{x * 100:.1f}%"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.3f}"


def render_markdown(report: dict[str, Any]) -> str:
    env = report.get("environment") or {}
    h = report["headline"]
    lines = [f"# Calibration report: {report['model']} on {report['device']}", "",
             f"- catalog GPU: {report['catalog_gpu'] or 'unknown'}; dtype {report['dtype']}; CUDA graphs for "
             f"decode: {'on' if report['cuda_graphs'] else 'off'}; torch {env.get('torch')}, CUDA {env.get('cuda')}",
             f"- wall time {report['wall_s']:.0f} s of a {report['time_limit_s']:.0f} s limit; "
             f"{'complete' if report['complete'] else 'STOPPED EARLY: ' + '; '.join(report['stopped'])}", "",
             "## Headline", "",
             "| figure | value | target |", "|---|---:|---:|",
             f"| batch-1 decode / weight-read bound | "
             f"{'-' if h['decode_ratio'] is None else format(h['decode_ratio'], '.2f') + 'x'} | "
             f"<= {h['decode_target_ratio']}x |",
             f"| held-out step-time MAPE (fit's test split) | {pct(h['fit_test_mape'], signed=False)} | |",
             f"| held-out workload step-time MAPE (all loads) | {pct(h['heldout_step_mape'], signed=False)} | |"]
    lines.append("")
    d = report.get("decode_check")
    if d:
        lines += ["## Decode, batch 1, against the weight-read bound", ""]
        if d["weight_bound_s"]:
            lines += [f"Weights read per step: {si(d['weight_read_bytes'], 'B')}; bandwidth "
                      f"{si(d['memory_bandwidth_bytes_per_s'], 'B/s')}; bound {_ms(d['weight_bound_s'])} ms; "
                      f"target within {d['target_ratio']}x.", ""]
        lines += ["| context | wall median ms | device median ms | bound ms | wall / bound |",
                  "|---:|---:|---:|---:|---:|"]
        for r in d["rows"]:
            ratio = f"{r['ratio_wall']:.2f}x" if r.get("ratio_wall") else "-"
            lines.append(f"| {r['context']} | {_ms(r['wall_median_s'])} | {_ms(r['device_median_s'])} | "
                         f"{_ms(r.get('weight_bound_s'))} | {ratio} |")
        verdict = {True: "within target", False: "OUTSIDE target", None: "no bound (unknown GPU)"}[
            d["within_target"]]
        lines += ["", f"Verdict (the engine's wall time at the first context, CUDA graphs "
                  f"{'on' if d['cuda_graphs'] else 'off'}): {verdict}.", ""]
        if d.get("ratio_eager"):
            lines.append(f"- the same step eager (graphs off): {_ms(d['eager_wall_median_s'])} ms = "
                         f"{d['ratio_eager']:.2f}x the bound")
        if d.get("ratio_weight_stream_floor"):
            lines.append(f"- weights streamed alone through the GEMMs (the hardware's floor): "
                         f"{_ms(d['weight_stream_floor_s'])} ms = {d['ratio_weight_stream_floor']:.2f}x the bound")
        if d.get("eager_kernels_per_step"):
            lines.append(f"- kernels one eager step launches (profiled; a graph replays as many): "
                         f"{d['eager_kernels_per_step']}")
        lines.append("")
    p = report.get("prefill_check")
    if p:
        mfu = f", {p['mfu'] * 100:.0f}% of peak" if p.get("mfu") is not None else ""
        lines += ["## Prefill", "", f"{p['tokens']} tokens in {p['median_s'] * 1e3:.1f} ms: "
                  f"{si(p['achieved_flops_per_s'], 'FLOP/s')}{mfu}.", ""]
    u = report.get("first_use_check")
    if u and u["rows"]:
        lines += ["## New shapes: first run against repeats", "",
                  "| cuDNN attention | tokens | context | first run ms | repeats ms | extra ms |",
                  "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {'on' if r['cudnn_attention'] else 'off'} | {r['tokens']} | {r['context']} | "
                  f"{_ms(r['first_s'])} | {_ms(r['repeat_median_s'])} | {_ms(r['first_extra_s'])} |"
                  for r in u["rows"]]
        lines.append("")
    f = report.get("fit")
    if f:
        t = f["test"]
        lines += ["## Fit", "", f"Held-out MAPE {t.get('mape_pct', float('nan')):.1f}%, p90 |error| "
                  f"{t.get('p90_abs_error_s', float('nan')) * 1e3:.3g} ms ({t.get('n', 0)} held-out steps).", "",
                  "| kind | steps | MAPE % | p90 APE % |", "|---|---:|---:|---:|"]
        for kind, m in f["by_kind"].items():
            lines.append(f"| {kind} | {m['n']} | {m['mape_pct']:.1f} | {m['p90_ape_pct']:.1f} |")
        lines += ["", "Coefficients: " + ", ".join(f"{k} {v:.4g}" for k, v in f["coefficients"].items())
                  + f"; knee {f['knee_tokens']:g} tokens.", ""]
    v = report.get("validation")
    if v:
        lines += ["## Twin against engine on held-out workloads", "",
                  f"Saturation estimate {v['saturation_rate_per_s']:.2f} req/s; error = (twin - engine) / engine.",
                  "", "| load | req/s | requests | throughput err | mean TTFT err | p90 TTFT err | mean TPOT err | "
                  "p90 TPOT err | step MAPE |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in v["loads"]:
            e = r["errors"]
            cut = " (cut)" if r["stopped_early"] else ""
            lines.append(f"| {r['load']:.0%}{cut} | {r['offered_rate_per_s']:.2f} | {r['num_requests']} | "
                         f"{pct(e['request_throughput'])} | {pct(e['mean_ttft_ms'])} | {pct(e['p90_ttft_ms'])} | "
                         f"{pct(e['mean_tpot_ms'])} | {pct(e['p90_tpot_ms'])} | "
                         f"{pct(r['step_time'].get('mape'), signed=False)} |")
        lines.append("")
    lines += ["## Phases", "", "| phase | seconds |", "|---|---:|"]
    lines += [f"| {name} | {sec:.1f} |" for name, sec in report["phases_s"].items()]
    lines.append("")
    if report["notes"]:
        lines += ["## Notes", ""] + [f"- {n}" for n in report["notes"]] + [""]
    lines += [f"Profile: `{report['profile']}`; samples: `{report['samples']}`.", ""]
    return "\n".join(lines)
