"""Fields of a ``vllm bench serve`` result JSON that more than one reader parses (the twin's measured-run readers
and the calibration engine's validation): finite numbers and the ``request_rate``."""

from __future__ import annotations

import math
from typing import Any


def json_number(v: Any) -> float | None:
    """``v`` as a float when it is a finite JSON number (not a bool); otherwise None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def parse_request_rate(v: Any) -> float | None:
    """A bench result's ``request_rate``: a number > 0, or inf (``"inf"``, as vLLM writes an unbounded rate,
    or JSON's ``Infinity``); None when absent or not a rate."""
    if isinstance(v, float) and v == math.inf:
        return math.inf
    if isinstance(v, str) and v.strip().lower() in ("inf", "infinity"):
        return math.inf
    f = json_number(v)
    return f if f is not None and f > 0 else None
