"""The terminal summary and the side-by-side comparison render, with deltas, to a terminal or plain text."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tests.test_metrics import tiny_case
from twin.errors import TwinInputError
from twin.results.metrics import compute_metrics
from twin.results.report import compare_metrics, direction, render_comparison, render_summary


def _plain_console(width: int = 120) -> Console:
    return Console(file=io.StringIO(), width=width)


def _variant():
    base = tiny_case().metrics(slo={"ttft_ms": {"p99": 1000}})
    new = dict(base, mean_ttft_ms=700.0, request_throughput=1.0, num_preemptions=0, mean_kv_usage=0.5)
    return base, new


def test_summary_renders_to_plain_text():
    console = _plain_console()
    render_summary(tiny_case().metrics(slo={"ttft_ms": {"p99": 1000}}), "tiny", console)
    text = console.file.getvalue()
    assert "\x1b[" not in text  # no escape codes when not a terminal
    for needle in ("TTFT", "TPOT", "ITL", "E2EL", "833 ms", "1.20", "prefix cache hit rate", "26.7%", "preemptions",
                   "KV usage", "busy fraction", "90.0%", "goodput", "SLO TTFT p99", "met"):
        assert needle in text, needle


def test_summary_of_empty_run_does_not_crash():
    console = _plain_console()
    render_summary(compute_metrics([]), "empty", console)
    assert "TTFT" in console.file.getvalue()


def test_comparison_shows_absolute_and_percent_deltas():
    base, new = _variant()
    console = _plain_console(160)
    render_comparison({"baseline-run": base, "what-if": new}, baseline="baseline-run", console=console)
    text = console.file.getvalue()
    assert "baseline-run (reference)" in text and "what-if" in text
    assert "700 ms (-133 ms, -16.0%)" in text  # TTFT mean 833.3 -> 700
    assert "1.00 (-0.200, -16.7%)" in text  # request throughput 1.2 -> 1.0
    assert "0 (-1, -100%)" in text  # preemptions 1 -> 0
    assert "\x1b[" not in text


def test_comparison_colours_by_direction_on_a_terminal():
    base, new = _variant()
    console = Console(file=io.StringIO(), width=160, force_terminal=True, color_system="standard")
    render_comparison({"a": base, "b": new}, console=console)
    text = console.file.getvalue()
    assert "\x1b[32m (-133 ms, -16.0%)" in text  # lower TTFT: better, green
    assert "\x1b[31m (-0.200, -16.7%)" in text  # lower throughput: worse, red


def test_compare_metrics_rows():
    base, new = _variant()
    rows = {r["key"]: r for r in compare_metrics({"a": base, "b": new})}
    assert rows["mean_ttft_ms"]["deltas"]["b"]["verdict"] == "better"
    assert rows["request_throughput"]["deltas"]["b"]["verdict"] == "worse"
    assert rows["request_throughput"]["deltas"]["b"]["pct"] == pytest.approx(-100 / 6)
    assert rows["mean_kv_usage"]["deltas"]["b"]["verdict"] is None  # no better direction
    assert rows["p99_ttft_ms"]["deltas"]["b"]["verdict"] == "same"
    assert "spec_decode_acceptance_rate" not in rows  # no run has it
    assert direction("p99_itl_ms") == -1 and direction("output_throughput") == 1 and direction("std_ttft_ms") == 0
    with pytest.raises(TwinInputError, match="baseline"):
        compare_metrics({"a": base}, baseline="zzz")
    with pytest.raises(TwinInputError):
        compare_metrics({})


def test_comparison_with_missing_values():
    base, _ = _variant()
    empty = compute_metrics([])
    console = _plain_console(160)
    render_comparison({"real": base, "broken": empty}, console=console)
    assert "TTFT mean" in console.file.getvalue()
