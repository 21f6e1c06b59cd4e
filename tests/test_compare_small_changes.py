"""Issue 33 (round 21): a change too small for one decimal printed in ``twin compare`` as ``-0.0 pp, -0.0%``
(busy fraction 100.0% -> 99.9%); it now takes the decimals it needs (``numbers.small_change``)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from twin.cli.main import main
from twin.results import numbers as n
from twin.results.report import format_delta


@pytest.mark.parametrize("value, text", [
    (-0.04, "-0.04 pp"), (0.0496, "+0.05 pp"), (0.004, "+0.004 pp"), (-0.0004, "-<0.001 pp"), (1e-12, "+<0.001 pp"),
    (0.0, "+0.0 pp"), (0.05, "+0.1 pp"), (-4.2, "-4.2 pp"), (22.61, "+22.6 pp")])
def test_a_small_change_takes_the_decimals_it_needs(value, text):
    assert n.small_change(value, " pp") == text


def test_percent_changes_never_read_minus_zero():
    assert n.percent_change(-0.04) == "-0.04%" and n.percent_change(0.004) == "+0.004%"
    assert n.percent_change(-3e-5) == "-<0.001%" and n.percent_change(0.0) == "+0.0%"
    assert n.percent_change(-0.802) == "-0.8%" and n.percent_change(99.96) == "+100%"   # unchanged


def test_a_shares_change_in_points():
    assert format_delta("busy_fraction", -0.0004, -0.04) == "-0.04 pp, -0.04%"
    assert format_delta("busy_fraction", 0.017, 299.0) == "+1.7 pp, +299%"
    assert format_delta("busy_fraction", 0.0, 0.0) == "="


def test_twin_compare_prints_the_busy_fractions_small_change():
    res = CliRunner().invoke(main, ["compare", "concurrency_cap_trap"])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if "busy fraction" in x)
    assert "(-0.04 pp, -0.04%)" in line and "-0.0 pp" not in res.output and "-0.0%" not in res.output
