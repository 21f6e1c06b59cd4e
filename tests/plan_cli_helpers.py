"""What the tests of ``twin plan``'s and ``twin sweep``'s printed output and of the SLO readers share: one tiny
scenario (with another SLO where asked) and the reading of a table's header cells (their wide console is the
``wide_console`` fixture of ``conftest.py``)."""

from __future__ import annotations

TINY_SCENARIO = {"name": "t", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
                 "workload": {"arrivals": {"process": "poisson", "rate_per_s": 20}, "duration_s": 2,
                              "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 100},
                                           "output_tokens": 8}]},
                 "slo": {"ttft_ms": {"p99": 2000}}}


def tiny_with_slo(slo) -> dict:
    """``TINY_SCENARIO`` with ``slo`` as its ``slo:`` section (``None``: the key kept, empty)."""
    return {**TINY_SCENARIO, "slo": slo}


def header_cells(stdout: str, first: str) -> list[str]:
    """The cells of the printed table header whose first cell is ``first``."""
    line = next(x for x in stdout.splitlines() if x.startswith("┃ " + first))
    return [c.strip() for c in line.strip("┃").split("┃")]
