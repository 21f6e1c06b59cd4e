"""The protocol's verdict vocabulary, and how a change's per-replication deltas become a verdict.

A step compares a candidate with the baseline run by run (same seed: common random numbers): ``compare`` gives
``cand - base`` and ``cand / base - 1`` per metric, summarised as a mean and a 95 % Student-t interval
(``twin.results.replications.replicate_summary``); ``ratio_summary`` does the same for a ratio. ``effect`` calls a
metric clearly better (+1), clearly worse (-1) or neither (0): the relative change must reach ``MIN_EFFECT`` and,
with replications, its interval must exclude 0, with the metric's direction (higher or lower is better) taken
from ``twin.results.report``. ``delta_text`` words a change for the findings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from twin.analysis.protocol_evaluation import Evaluation
from twin.results.replications import replicate_summary
from twin.results.report import direction, finite_number, label
from twin.results import numbers

DELTA_KEYS: tuple[str, ...] = (
    "request_throughput", "output_throughput", "request_goodput", "mean_ttft_ms", "p99_ttft_ms",
    "median_tpot_ms", "p99_tpot_ms", "p99_e2el_ms", "prefix_cache_hit_rate",
)
HEADLINE_KEYS: tuple[str, ...] = ("output_throughput", "p99_ttft_ms", "median_tpot_ms", "p99_e2el_ms")
MIN_EFFECT = 0.03          # a relative change smaller than this is "no change", significant or not

RECOMMEND = "recommend"
ADVISE_AGAINST = "advise_against"
NO_CHANGE = "no_change"
FLAG = "flag"
INFO = "info"
VERDICT_WORDS = {RECOMMEND: "recommend", ADVISE_AGAINST: "advise against", NO_CHANGE: "no change",
                 FLAG: "flagged", INFO: "predicted"}      # the baseline step: the twin's prediction of today's server


def compare(base: Evaluation, cand: Evaluation, keys: tuple[str, ...] = DELTA_KEYS) -> dict[str, dict]:
    """Per replication ``cand - base`` (same seed) and ``cand / base - 1`` (as ``<key>_rel``), summarised
    with confidence intervals."""
    rows = []
    for (_, bm), (_, cm) in zip(base.runs, cand.runs, strict=True):
        row: dict[str, float] = {}
        for k in keys:
            b, c = finite_number(bm.get(k)), finite_number(cm.get(k))
            if b is None or c is None:
                continue
            row[k] = c - b
            if b != 0:
                row[f"{k}_rel"] = c / b - 1.0
        rows.append(row)
    return replicate_summary(rows)


def ratio_summary(num: Evaluation, den: Evaluation, key: str) -> dict[str, Any]:
    vals = []
    for (_, a), (_, b) in zip(num.runs, den.runs, strict=True):
        x, y = finite_number(a.get(key)), finite_number(b.get(key))
        if x is not None and y:
            vals.append({"ratio": x / y})
    return replicate_summary(vals).get("ratio", {"mean": None, "half_width": None, "low": None, "high": None,
                                                 "n": 0})


def effect(deltas: Mapping[str, dict], key: str) -> int:
    """+1: ``key`` clearly improved (beyond ``MIN_EFFECT`` and, with replications, its interval excludes 0);
    -1: clearly worse; 0: neither."""
    d = deltas.get(key)
    rel = deltas.get(f"{key}_rel")
    if not d or d.get("mean") is None:
        return 0
    sign = direction(key) or 1
    r = rel.get("mean") if rel else None
    if key == "prefix_cache_hit_rate":
        size = abs(d["mean"])
        big = size >= MIN_EFFECT
    else:
        big = r is not None and abs(r) >= MIN_EFFECT
    if not big:
        return 0
    # relative changes vary less across seeds than absolute ones (the baseline itself moves with the seed)
    ci = rel if key != "prefix_cache_hit_rate" and rel and rel.get("mean") is not None else d
    if ci.get("half_width") is not None and ci["low"] <= 0 <= ci["high"]:
        return 0
    return sign if d["mean"] > 0 else -sign


def delta_text(key: str, deltas: Mapping[str, dict]) -> str:
    """``TTFT p99 -5.18 s (-96.4% ± 0.3%)``: mean change (a latency with its unit, ``numbers.delta_ms``; a rate
    in the unit its label names), relative change and its 95% half-width."""
    d = deltas.get(key)
    if not d or d.get("mean") is None:
        return f"{label(key)}: -"
    rel = deltas.get(f"{key}_rel") or {}
    mean = d["mean"]
    if key == "prefix_cache_hit_rate":
        text = f"{mean * 100:+.1f} pp"
        if d.get("half_width") is not None:
            text += f" ± {d['half_width'] * 100:.1f}"
        return f"{label(key)} {text}"
    if key.endswith("_ms"):
        text = numbers.delta_ms(mean)
    else:
        text = f"{mean:+.3g}" if abs(mean) < 100 else f"{mean:+,.0f}"
    if rel.get("mean") is not None:
        text += f" ({rel['mean'] * 100:+.1f}%"
        if rel.get("half_width") is not None:
            text += f" ± {rel['half_width'] * 100:.1f}%"
        text += ")"
    return f"{label(key)} {text}"


__all__ = ["ADVISE_AGAINST", "DELTA_KEYS", "FLAG", "HEADLINE_KEYS", "INFO", "MIN_EFFECT", "NO_CHANGE", "RECOMMEND",
           "VERDICT_WORDS", "compare", "delta_text", "effect", "ratio_summary"]
