"""Issue 33 (round 21): the compact ``heldout_bands`` column of ``twin sweep`` / ``twin plan`` tables (CSV) and a
plan's ``--json`` keep each metric's order-statistic coverage beside n / median / p10..p90, the share of unseen
servers the printed note's range holds (``-28.0% (-74..+14%, ~78%)``)."""

from __future__ import annotations

import json

from twin.plan import heldout_rows as hr
from twin.results import heldout_bands as hb
from twin.results import heldout_note as hn


def _band(signed: float, n: int, lo: float | None = None, hi: float | None = None) -> dict:
    out = {"n": n, "abs_median": abs(signed) + 0.01, "signed_median": signed, "p10": lo, "p90": hi}
    if lo is not None:
        out["coverage"] = hb.order_coverage(n)
    return out


def _doc() -> dict:
    """Hopper dense by order statistics: 9 cases (coverage 0.8), 7 cases (min..max, 0.75), 3 cases (no range)."""
    metrics = {"mean_ttft_ms": _band(-0.28, 7, -0.74, 0.14), "mean_tpot_ms": _band(0.02, 9, -0.04, 0.08),
               "request_throughput": _band(0.0, 3)}
    return hb.check_bands({
        "schema": hb.SCHEMA, "report": {"commit": "abc1234", "date": "2026-12-06", "command": "x"},
        "errors": "predicted / measured - 1", "interval_percentiles": [10, 90], "min_cases_for_interval": 5,
        "construction": "order",
        "kinds": {"GPU": [{"generation": "hopper", "moe": False, "held_out": ["H100-SXM"], "metrics": metrics}]}})


def test_the_csv_column_keeps_each_ranges_coverage():
    bands = json.loads(hr.band_columns([("hopper", False)], _doc())["heldout_bands"])["servers"][0]["bands"]
    assert bands == {"GPU": {
        "mean_ttft_ms": {"n": 7, "signed_median": -0.28, "p10": -0.74, "p90": 0.14, "coverage": 0.75},
        "mean_tpot_ms": {"n": 9, "signed_median": 0.02, "p10": -0.04, "p90": 0.08, "coverage": 0.8},
        "request_throughput": {"n": 3, "signed_median": 0.0, "p10": None, "p90": None, "coverage": None}}}


def test_the_coverage_is_the_one_the_printed_note_shows():
    doc = _doc()
    cell = json.loads(hr.band_columns([("hopper", False)], doc)["heldout_bands"])["servers"][0]["bands"]["GPU"]
    ttft = doc["kinds"]["GPU"][0]["metrics"]["mean_ttft_ms"]
    assert hn.metric_text(ttft) == "-28.0% (-74..+14%, ~75%)"
    assert round(100 * cell["mean_ttft_ms"]["coverage"]) == 75


def test_a_plans_json_keeps_it_too():
    doc = _doc()
    out = hr.band_document({"#0 (H100-SXM TP1)": [("hopper", False)]}, doc, recommended="#0 (H100-SXM TP1)")
    assert out["servers"][0]["bands"]["GPU"]["mean_tpot_ms"]["coverage"] == 0.8
