"""The one number formatter every surface uses (twin.results.numbers): exact outputs."""

from __future__ import annotations

import math

import pytest

from twin.results import numbers as n


@pytest.mark.parametrize("value, text", [
    (0, "0"), (0.000123, "0.000123"), (0.0123, "0.0123"), (0.5, "0.500"), (1.234, "1.23"), (9.996, "10.0"),
    (12.34, "12.3"), (99.96, "100"), (123.4, "123"), (999.6, "1,000"), (1234.4, "1,234"), (9999.4, "9,999"),
    (9999.6, "10.0k"), (12345, "12.3k"), (239832, "240k"), (999_950, "1.00M"), (4_567_890, "4.57M"),
    (1.23e9, "1.23G"), (1.5e13, "15.0T"), (-239832, "-240k"), (-0.5, "-0.500"), (1e-12, "0"),
])
def test_number_three_significant_figures_never_an_exponent(value, text):
    assert n.number(value) == text


@pytest.mark.parametrize("value, text", [
    (0, "0 ms"), (0.0123, "12.3 µs"), (0.512, "512 µs"), (0.9996, "1.00 ms"), (6.55, "6.55 ms"), (812.4, "812 ms"), (999.6, "1.00 s"),
    (4508, "4.51 s"), (59_990, "1.00 min"), (239_832, "4.00 min"), (5.4e6, "1.50 h"), (-1022, "-1.02 s"),
])
def test_duration_ms_scales_its_unit(value, text):
    assert n.duration_ms(value) == text


def test_duration_s_is_duration_ms_of_the_seconds():
    assert n.duration_s(27.27) == "27.3 s"
    assert n.duration_s(0.00655) == "6.55 ms"
    assert n.duration_s(65) == "1.08 min"


def test_counts_stay_exact_unless_short():
    assert n.count(239832) == "239,832"
    assert n.count(239832, short=True) == "240k"
    assert n.count(9999, short=True) == "9,999"
    assert n.count(16) == "16"


def test_units_and_signed_changes():
    assert n.with_unit(600.9, "tok/s") == "601 tok/s"
    assert n.with_unit(12345, "tok/s") == "12.3k tok/s"
    assert n.with_unit(2.354, "req/s") == "2.35 req/s"
    assert n.delta_ms(3.75) == "+3.75 ms" and n.delta_ms(-1022) == "-1.02 s" and n.delta_ms(0) == "0 ms"
    assert n.delta(0.43) == "+0.430" and n.delta(-144.2) == "-144" and n.delta(12345) == "+12.3k"
    assert n.percent_change(22.61) == "+22.6%" and n.percent_change(-48.8) == "-48.8%"
    assert n.percent_change(-0.802) == "-0.8%" and n.percent_change(99.96) == "+100%"
    assert n.percent_change(105.7) == "+106%" and n.percent_change(1234.5) == "+1,234%"
    assert n.percent_change(272_610) == "+273k%"
    assert n.percent(0.232) == "23.2%" and n.percent(1.0) == "100.0%"


def test_given_values_read_as_typed():
    assert n.given(8.0) == "8" and n.given(0.5) == "0.5" and n.given(12.75) == "12.75"
    assert n.given(1e6) == "1,000,000" and n.given(2.5e-7) == "0.0000002500" and n.given(1234567.5) == "1.235M"


def test_not_a_number_passes_through():
    assert n.number(None) == "-" and n.duration_ms(None) == "-" and n.count(None) == "-"
    assert n.number("n/a") == "n/a" and n.number(True) == "True"
    assert n.number(math.inf) == "inf"


@pytest.mark.parametrize("value", [1e-7, 3.3e-5, 0.1, 1.0, 7.77, 42.0, 512.0, 2048.0, 65536.0, 2.398e5, 7.7e7,
                                   3.1e10, 8.8e14])
def test_never_an_exponent_and_short(value):
    for text in (n.number(value), n.duration_ms(value), n.with_unit(value, "tok/s"), n.percent_change(value)):
        assert "e+" not in text and "e-" not in text
        assert len(text.split()[0]) <= 9 or value < 1e-4, text
