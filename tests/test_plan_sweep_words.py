"""The what-if hour's leftovers (issue 33, round 23): the words `twin plan` and `twin sweep` print. Exact strings."""

from __future__ import annotations

import pytest

from twin.results import numbers as n


@pytest.mark.parametrize("sign, exponent, text", [(1, 400, "inf"), (-1, 400, "-inf"), (1, 5000, "inf")])
def test_an_integer_too_large_for_a_float_is_shown_not_finite(sign, exponent, text):
    value = sign * 10**exponent          # 5000 digits: more than str() of an int may write (Python 3.11+)
    assert n.finite_number(value) is None
    for show in (n.number, n.duration_ms, n.duration_s, n.given, n.count, n.percent):
        assert show(value) == text
    assert n.with_unit(value, "req/s") == text
    for show in (n.delta, n.delta_ms, n.percent_change):
        assert show(value) == text


def test_finite_numbers_are_unchanged():
    assert n.finite_number(10**300) == 1e300
    assert n.number(10**6) == "1.00M"
    assert n.number(None) == "-" and n.number(float("nan")) == "nan" and n.number("x") == "x"
