"""How every surface writes a number for a person to read: CLI tables, the dashboard's cards and verdicts,
plan and sweep tables. (CSV, JSON and the per-request tables keep raw values.)

Rules, the same everywhere:

* 3 significant figures (4 for 1,000-9,999, written whole with a thousands separator), never an exponent
  (no ``2.398e+05``): from 10,000 up a suffix takes over, ``12.3k``, ``240k``, ``4.57M``, ``1.2G``;
* units that scale: a latency in ms reads ``812 ms``, ``4.51 s``, ``4.00 min``, ``1.50 h``; a rate reads
  ``950 tok/s``, ``12.3k tok/s``;
* counts stay exact (``239,832``) unless asked to be short (``240k``) for a card;
* a signed change keeps its sign (``+3.75 ms``, ``-1.02 s``, ``+92%``).

Values that are not finite numbers come back as given (``-`` for None) so a table never breaks on them.
"""

from __future__ import annotations

import math
from typing import Any

from twin.errors import counted     # a count with its noun (``1 request``, ``11 requests``): printed text uses it

SIG_FIGS = 3
SUFFIXES = ((1e3, "k"), (1e6, "M"), (1e9, "G"), (1e12, "T"))
# a latency in milliseconds, scaled: each unit in turn until the next one reads at least 1 of it
MS_UNITS = ((0.001, "µs"), (1.0, "ms"), (1_000.0, "s"), (60_000.0, "min"), (3_600_000.0, "h"))
SMALLEST = 1e-9          # below this (in absolute value) a number reads 0


def finite_number(value: Any) -> float | None:
    """A value as a finite float, or None (missing, NaN, infinite, a flag, not a number, an integer too large
    for a float such as ``10**400``)."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return v if math.isfinite(v) else None


def not_finite(value: Any) -> str:
    """How a display helper shows a value ``finite_number`` refuses: ``-`` for None, ``inf`` / ``-inf`` for an
    integer too large for a float (``10**400``: as the float it stands for, never thousands of digits), else the
    value as text (``nan``, ``inf``, a word)."""
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool) and finite_number(value) is None:
        return "inf" if value > 0 else "-inf"
    return str(value)


def _plain(v: float, digits: int) -> str:
    """``v`` with ``digits`` significant figures in fixed point (every integer digit kept), a thousands
    separator from 1,000."""
    if v == 0 or abs(v) < SMALLEST:
        return "0"
    exponent = math.floor(math.log10(abs(v)))
    decimals = max(0, digits - 1 - exponent)
    text = f"{v:,.{decimals}f}"
    # rounding may carry into the next power of ten (9.996 -> "10.00"): one decimal fewer then
    if decimals > 0 and abs(_value(text)) >= 10 ** (exponent + 1):
        text = f"{v:,.{decimals - 1}f}"
    return text


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _rounded(v: float, digits: int) -> float:
    """``v`` as ``number`` would round it (without a suffix)."""
    return _value(_plain(v, digits))


def number(value: Any, digits: int = SIG_FIGS) -> str:
    """``0.0123``, ``1.23``, ``123``, ``1,234``, ``12.3k``, ``4.57M``; never an exponent."""
    v = finite_number(value)
    if v is None:
        return not_finite(value)
    text = _plain(v, digits)
    if abs(_value(text)) < 10_000:
        return text
    for div, suffix in SUFFIXES:
        scaled = _plain(v / div, digits)
        if abs(_value(scaled)) < 1000 or suffix == SUFFIXES[-1][1]:
            return scaled + suffix
    return text  # pragma: no cover


def count(value: Any, short: bool = False) -> str:
    """An exact count: ``239,832``; ``short``: ``240k`` from 10,000 up (a card's width)."""
    v = finite_number(value)
    if v is None:
        return not_finite(value)
    if short and abs(v) >= 9_999.5:
        return number(v)
    return f"{v:,.0f}"


def with_unit(value: Any, unit: str, digits: int = SIG_FIGS) -> str:
    """``number(value)`` and its unit: ``950 tok/s``, ``12.3k tok/s``, ``2.35 req/s``."""
    v = finite_number(value)
    if v is None:
        return not_finite(value)
    return f"{number(v, digits)} {unit}"


def duration_ms(value: Any, digits: int = SIG_FIGS) -> str:
    """A time given in milliseconds, in the unit it reads best in: ``30.0 µs``, ``812 ms``, ``4.51 s``,
    ``4.00 min``, ``1.50 h`` (the rounded value decides: 999.7 ms reads ``1.00 s``)."""
    v = finite_number(value)
    if v is None:
        return not_finite(value)
    if v == 0:
        return "0 ms"
    i = 0
    while i + 1 < len(MS_UNITS) and \
            _rounded(abs(v) / MS_UNITS[i][0], digits) >= MS_UNITS[i + 1][0] / MS_UNITS[i][0]:
        i += 1
    factor, unit = MS_UNITS[i]
    return f"{number(v / factor, digits)} {unit}"


def given(value: Any) -> str:
    """A value as a person gave it (a setting, a bound): ``8``, ``0.5``, ``12.75``, ``1,000,000`` rather than
    ``1e+06``; a float that ``:g`` would write with an exponent is written whole (an integer) or to 4
    significant figures."""
    v = finite_number(value)
    if v is None:
        return not_finite(value)
    text = f"{v:g}"
    if "e" not in text:
        return text
    return f"{v:,.0f}" if v.is_integer() else number(v, 4)


def duration_s(value: Any, digits: int = SIG_FIGS) -> str:
    """A time given in seconds: ``duration_ms(value * 1000)``."""
    v = finite_number(value)
    if v is None:
        return not_finite(value)
    return duration_ms(v * 1000.0, digits)


def signed(text: str, value: float) -> str:
    """``text`` (the magnitude's formatting) with the sign of ``value``: ``+3.75 ms``, ``-1.02 s``."""
    return ("+" if value > 0 else "-" if value < 0 else "") + text


def delta_ms(value: Any) -> str:
    """A signed change of a latency in ms: ``+3.75 ms``, ``-1.02 s``."""
    v = finite_number(value)
    if v is None:
        return not_finite(value)
    return signed(duration_ms(abs(v)), v)


def delta(value: Any, digits: int = SIG_FIGS) -> str:
    """A signed change without a unit: ``+0.43``, ``-1,022``, ``+12.3k``."""
    v = finite_number(value)
    if v is None:
        return not_finite(value)
    return signed(number(abs(v), digits), v)


def small_change(value: float, unit: str) -> str:
    """A signed change in percent or percentage points with one decimal (``+22.6%``, ``-4.2 pp``); a change that
    would read 0.0 takes the decimals it needs, up to 3 (``-0.05 pp``, ``+0.004%``), and reads ``-<0.001 pp``
    below that: never ``-0.0`` for a change (issue 33: busy fraction 100.0% -> 99.9% read ``-0.0 pp, -0.0%``).
    Exactly 0 stays ``+0.0``."""
    for decimals in (1, 2, 3):
        text = f"{value:+.{decimals}f}"
        if value == 0 or float(text) != 0:
            return text + unit
    return signed("<0.001", value) + unit


def percent_change(value: Any) -> str:
    """A signed relative change in percent: ``-0.8%``, ``+22.6%``, ``-48.8%`` (one decimal below 100 %, more
    for a change under 0.05 %: ``small_change``), ``+106%``, ``+1,234%``, ``+12.3k%``."""
    v = finite_number(value)
    if v is None:
        return not_finite(value)
    if abs(v) < 99.95:
        return small_change(v, "%")
    return signed(number(abs(v)), v) + "%"


def percent(fraction: Any, decimals: int = 1) -> str:
    """A share given as a fraction: ``23.2%``, ``100.0%``."""
    v = finite_number(fraction)
    if v is None:
        return not_finite(fraction)
    return f"{v * 100:.{decimals}f}%"


__all__ = ["count", "counted", "given", "delta", "delta_ms", "duration_ms", "duration_s", "number", "percent", "percent_change",
           "signed", "small_change", "with_unit"]
