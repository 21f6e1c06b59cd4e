"""The reading scripts' shared error summary (benchmarks/error_medians.py): exact medians, None where no case has
the metric, and the scripts that use it give the same values."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchmarks.error_medians import error_medians, metric_medians  # noqa: E402

ERRS = [{"a": 0.1, "b": -0.4}, {"a": -0.3}, {"a": 0.2}, {}]


def test_error_medians_exact():
    assert error_medians(ERRS, "a") == (pytest.approx(0.2), pytest.approx(0.1), 3)
    assert error_medians(ERRS, "b") == (pytest.approx(0.4), pytest.approx(-0.4), 1)
    assert error_medians(ERRS, "c") is None
    assert error_medians([], "a") is None


def test_metric_medians_keeps_order():
    out = metric_medians(ERRS, ("c", "b", "a"))
    assert list(out) == ["c", "b", "a"] and out["c"] is None and out["a"][2] == 3


def test_scripts_share_it():
    import fold_compare
    import kimi_family_mla
    import kimi_fold_terms
    import silicon_decode_rank
    assert fold_compare._summary(ERRS, "c") == (None, None, 0)
    assert fold_compare._summary(ERRS, "a") == error_medians(ERRS, "a")
    assert silicon_decode_rank.cells(ERRS, "a") == error_medians(ERRS, "a")
    assert kimi_family_mla.medians(ERRS) == metric_medians(ERRS, kimi_family_mla.METRICS)
    assert kimi_fold_terms.summary(ERRS) == metric_medians(ERRS, kimi_fold_terms.METRICS)


def test_median_cell_exact():
    from benchmarks.error_medians import median_cell
    assert median_cell([0.1, -0.3, 0.2]) == "20.0 (+10.0)"
    assert median_cell([0.1, -0.3, 0.2], "%") == "20.0% (+10.0%)"
    assert median_cell([-0.05]) == "5.0 (-5.0)"
    assert median_cell([]) == "-" and median_cell([], "%") == "-"
    import hopper_moe_prior
    import layer_token_owner
    assert hopper_moe_prior._cell(ERRS, "a") == "20.0% (+10.0%)" and hopper_moe_prior._cell(ERRS, "c") == "-"
    errs = [{"mean_ttft_ms": e["a"]} if "a" in e else {} for e in ERRS]
    assert layer_token_owner._summary("all", errs) == "all 20.0 (+10.0) / - (4)"
