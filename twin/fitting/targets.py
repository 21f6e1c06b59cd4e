"""The issue's targets on held-out errors (issue 33, "Must show"), and the held-out report as markdown.

Targets per column: median |error| <= 10 % (TTFT mean and p50), <= 8 % (TPOT, E2E mean), <= 3 % (throughput);
median signed error within +/- 5 % (no systematic bias); MoE models' median |error| no worse than dense models'.
A summary (``twin.fitting.joint.summarize``) is {metric: {"n", "abs", "signed"}} with fractions."""

from __future__ import annotations

from collections.abc import Sequence

METRICS = (("mean_ttft_ms", "TTFT mean"), ("median_ttft_ms", "TTFT p50"), ("mean_tpot_ms", "TPOT"),
           ("mean_e2el_ms", "E2E mean"), ("request_throughput", "throughput"))
ABS_TARGETS = {"mean_ttft_ms": 0.10, "median_ttft_ms": 0.10, "mean_tpot_ms": 0.08, "mean_e2el_ms": 0.08,
               "request_throughput": 0.03}
SIGNED_TARGET = 0.05
MET, NOT_MET, NO_DATA = "met", "NOT met", "no data"


def judge(summary: dict, key: str) -> tuple[str, str]:
    """(|error| verdict, signed verdict) of one column of a summary."""
    s = summary.get(key) or {}
    if s.get("abs") is None:
        return NO_DATA, NO_DATA
    return (MET if s["abs"] <= ABS_TARGETS[key] else NOT_MET,
            MET if abs(s["signed"]) <= SIGNED_TARGET else NOT_MET)


def moe_vs_dense(dense: dict, moe: dict, key: str) -> str:
    """MoE's median |error| no worse than dense's on this column."""
    d, m = (dense.get(key) or {}).get("abs"), (moe.get(key) or {}).get("abs")
    if d is None or m is None:
        return NO_DATA
    return MET if m <= d else NOT_MET


def groups_meeting(groups: Sequence[dict], key: str) -> tuple[int, int]:
    """(groups meeting both targets on this column, groups with data on it)."""
    verdicts = [judge(g, key) for g in groups]
    with_data = [v for v in verdicts if v[0] != NO_DATA]
    return sum(v == (MET, MET) for v in with_data), len(with_data)


def target_lines(pooled: dict, groups: Sequence[dict], dense: dict, moe: dict) -> list[str]:
    """One line per column: pooled |error| and signed median against the targets, groups meeting both, MoE vs
    dense."""
    out = []
    for key, title in METRICS:
        a, s = judge(pooled, key)
        ok, n = groups_meeting(groups, key)
        out.append(f"{title:<10} pooled {cell(pooled, key):<16} |error| <= {100 * ABS_TARGETS[key]:.0f}%: {a}; signed within "
                   f"+/-{100 * SIGNED_TARGET:.0f}%: {s}; groups meeting both: {ok} of {n}; MoE no worse than "
                   f"dense: {moe_vs_dense(dense, moe, key)}")
    return out


def cell(summary: dict, key: str) -> str:
    s = summary.get(key) or {}
    if s.get("abs") is None:
        return "-"
    return f"{100 * s['abs']:.1f}% ({100 * s['signed']:+.1f}%)"


def markdown(rows: Sequence[tuple[str, str, int, dict]]) -> str:
    """A markdown table: one row per (fold kind, label, n, summary), then the targets."""
    head = "| fold | held out | n | " + " | ".join(t for _, t in METRICS) + " |"
    lines = [head, "|" + "---|" * (3 + len(METRICS))]
    for kind, label, n, summary in rows:
        lines.append(f"| {kind} | {label} | {n} | " + " | ".join(cell(summary, k) for k, _ in METRICS) + " |")
    lines.append("| target | median abs error (signed) | | " + " | ".join(
        f"<= {100 * ABS_TARGETS[k]:.0f}% (+/-{100 * SIGNED_TARGET:.0f}%)" for k, _ in METRICS) + " |")
    return "\n".join(lines)


def verdict_markdown(kinds: Sequence[tuple[str, dict, Sequence[dict], dict, dict]]) -> str:
    """Per fold kind and column: pooled |error| / signed / MoE-vs-dense verdicts and groups meeting both."""
    lines = ["| fold | " + " | ".join(t for _, t in METRICS) + " |", "|" + "---|" * (1 + len(METRICS))]
    for kind, pooled, groups, dense, moe in kinds:
        cells = []
        for key, _ in METRICS:
            a, s = judge(pooled, key)
            ok, n = groups_meeting(groups, key)
            cells.append(f"abs {a}, signed {s}, MoE<=dense {moe_vs_dense(dense, moe, key)}, groups {ok}/{n}")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
