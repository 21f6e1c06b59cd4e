"""Baseline against what-if: the metric cards, the full table, the downloads."""

from __future__ import annotations

import math
from typing import Any

from twin.analysis.causes import diagnosis_to_dict
from twin.dashboard.form import BASELINE_LABEL, WHATIF_LABEL
from twin.dashboard.meaning import exact, fit
from twin.results import numbers
from twin.dashboard.runs import RunOutput
from twin.results.report import COMPARISON_KEYS, compare_metrics, direction, format_delta, format_value, label


HEADLINE_KEYS = ("request_throughput", "output_throughput", "p99_ttft_ms", "p99_tpot_ms", "p99_e2el_ms",
                 "request_goodput", "prefix_cache_hit_rate", "num_preemptions", "spec_decode_acceptance_length")
CARD_ABSOLUTE_DELTA = {"prefix_cache_hit_rate", "num_preemptions", "spec_decode_acceptance_length"}
HEADLINE_LABELS = {
    "request_throughput": "Throughput (req/s)", "output_throughput": "Output (tok/s)",
    "p99_ttft_ms": "TTFT p99", "p99_tpot_ms": "TPOT p99", "p99_e2el_ms": "E2E p99",
    "request_goodput": "Goodput (req/s)", "prefix_cache_hit_rate": "Prefix hit rate",
    "num_preemptions": "Preemptions", "spec_decode_acceptance_length": "Tokens per verify",
}


def headline_cards(base: dict[str, Any], whatif: dict[str, Any]) -> list[dict[str, Any]]:
    """Metric cards: ``label``, ``baseline`` and ``whatif`` text (short: ``twin.results.numbers``) and their
    exact values for a tooltip (``baseline_exact``, ``whatif_exact``), ``delta`` text (None when equal or
    undefined) and ``delta_color`` for ``st.metric`` ("normal": up is good, "inverse": down is good)."""
    cards = []
    for key in HEADLINE_KEYS:
        b, w = base.get(key), whatif.get(key)
        if b is None and w is None:
            continue
        delta = None
        if (isinstance(b, (int, float)) and isinstance(w, (int, float))
                and not math.isclose(w, b, rel_tol=1e-9, abs_tol=1e-12)):
            pct = (w - b) / abs(b) * 100 if b else None
            # a card has room for one number: percent for rates and latencies, points for shares, counts as is
            if pct is None or key in CARD_ABSOLUTE_DELTA:
                delta = format_delta(key, w - b, None)
            else:
                delta = numbers.percent_change(pct)
        sign = direction(key)
        cards.append({"key": key, "label": HEADLINE_LABELS.get(key, label(key)),
                      "baseline": fit(key, b), "whatif": fit(key, w), "delta": delta,
                      "baseline_exact": exact(key, b), "whatif_exact": exact(key, w),
                      "delta_color": "normal" if sign >= 0 else "inverse"})
    return cards


def comparison_rows(base: dict[str, Any], whatif: dict[str, Any]) -> list[dict[str, str]]:
    """The full comparison as table rows: metric, baseline, what-if, change, better/worse."""
    rows = []
    for row in compare_metrics({BASELINE_LABEL: base, WHATIF_LABEL: whatif}, BASELINE_LABEL, list(COMPARISON_KEYS)):
        key = row["key"]
        d = row["deltas"][WHATIF_LABEL]
        change = "" if d["delta"] is None else format_delta(key, d["delta"], d["pct"])
        rows.append({"metric": row["label"], BASELINE_LABEL: format_value(key, row["values"][BASELINE_LABEL]),
                     WHATIF_LABEL: format_value(key, row["values"][WHATIF_LABEL]), "change": change,
                     "verdict": d["verdict"] or ""})
    return rows


def result_json(run: RunOutput) -> bytes:
    """The run as `vllm bench serve` result JSON (plus the twin's keys and the diagnosis under ``twin``)."""
    from twin.results.export import dumps, to_bench_serve_json

    data = to_bench_serve_json(run.result, run.slo)
    data["twin"]["diagnosis"] = diagnosis_to_dict(run.diagnosis)
    data["twin"]["limits"] = run.limits           # as `twin run --json` writes it
    if run.info.get("heldout_bands"):         # round 19 (issue 33): the held-out error bands, as `twin run --json`
        data["twin"]["heldout_bands"] = run.info["heldout_bands"]
    return (dumps(data) + "\n").encode("utf-8")


def requests_csv(run: RunOutput) -> bytes:
    return run.result.requests_frame().to_csv(index=False, lineterminator="\n").encode("utf-8")

