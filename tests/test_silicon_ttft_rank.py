"""benchmarks/silicon_ttft_rank.py (issue 33, round 17): the ranking of reset terms by the points of signed TTFT
error they give back, its slices, and one-line errors for a bad saved file."""

from __future__ import annotations

import json

import pytest
from benchmark_module import load_benchmark
from twin.errors import TwinInputError

KEYS = [["H100-SXM", "gpt-oss H100-SXM"], ["B200", "kimi B200"], ["B200", "kimi B200"], ["H100-SXM"]]


def _errs(*xs):
    return [{"mean_ttft_ms": x} if x is not None else {"mean_tpot_ms": 0.1} for x in xs]


def test_ranked_orders_by_mean_move_and_reports_share_and_slices():
    m = load_benchmark("silicon_ttft_rank")
    errors = {"fold": _errs(-0.6, -0.5, -0.4, None), "defaults": _errs(0.0, -0.1, 0.0, None),
              "small": _errs(-0.6, -0.4, -0.4, None), "big": _errs(-0.1, -0.5, -0.4, None)}
    out = m.ranked(errors, KEYS)
    assert [e["variant"] for e in out] == ["big", "small"]
    big, small = out
    gap = (0.6 + 0.4 + 0.4) / 3 * 100                  # fold -> defaults, mean per row, points
    assert big["points"] == pytest.approx(50 / 3)
    assert big["share"] == pytest.approx((50 / 3) / gap)
    assert big["h100_points"] == pytest.approx(50.0)   # one H100 row with a TTFT, moved 0.5
    assert small["points"] == pytest.approx(10 / 3) and small["h100_points"] == pytest.approx(0.0)
    assert big["all"] == pytest.approx(-40.0) and big["gpt-oss H100-SXM"] == pytest.approx(-10.0)
    assert big["B200"] == pytest.approx(-45.0) and big["llama H100-SXM"] is None


def test_ranked_needs_the_fold_and_the_defaults_and_equal_rows():
    m = load_benchmark("silicon_ttft_rank")
    with pytest.raises(TwinInputError):
        m.ranked({"fold": _errs(-0.5)}, [["B200"]])
    with pytest.raises(TwinInputError):
        m.row_moves(_errs(-0.5, -0.4), _errs(-0.5))


def test_mean_signed_skips_rows_without_ttft_and_refuses_none():
    m = load_benchmark("silicon_ttft_rank")
    assert m.mean_signed(_errs(-0.5, None, -0.1)) == pytest.approx(-0.3)
    with pytest.raises(TwinInputError):
        m.mean_signed(_errs(None))


def test_read_saved_validates(tmp_path):
    m = load_benchmark("silicon_ttft_rank")
    good = tmp_path / "good.json"
    errs = {"fold": _errs(-0.5, None), "defaults": _errs(0.0, None)}
    good.write_text(json.dumps({"cases": ["a", "b"], "errors": errs}))
    assert m.read_saved(good) == (["a", "b"], errs)
    for i, (bad, message) in enumerate((
            ({"cases": ["a"], "errors": {"fold": _errs(-0.5, -0.1)}}, "not a silicon_ttft_split.py --save file"),
            ({"cases": ["a"], "errors": {"fold": [{"mean_ttft_ms": "x"}]}}, "not a silicon_ttft_split.py --save"),
            ({"cases": ["a"], "errors": {"fold": [{"mean_ttft_ms": float("nan")}]}}, "not a silicon_ttft_split"),
            ({"cases": "a", "errors": {}}, "not a silicon_ttft_split.py --save file"),
            ([1, 2], "a JSON list, not an object"),
            ({"cases": [], "errors": {"fold": [], "defaults": []}}, "cases must be a non-empty list of distinct"),
            ({"cases": [1], "errors": {"fold": [{}], "defaults": [{}]}}, "cases must be a non-empty list"),
            ({"cases": ["a", "a"], "errors": {"fold": [{}, {}], "defaults": [{}, {}]}}, "distinct case names"),
            ({"cases": ["a"], "errors": {"fold": [{}]}}, "the errors lack 'fold' or 'defaults'"))):
        p = tmp_path / f"bad{i}.json"
        p.write_text(json.dumps(bad))
        with pytest.raises(TwinInputError, match=message):
            m.read_saved(p)
    with pytest.raises(TwinInputError, match="a directory, not a file"):
        m.read_saved(tmp_path)
    with pytest.raises(TwinInputError):
        m.read_saved(tmp_path / "missing.json")


def test_ranked_from_the_defaults_measures_what_losing_a_term_costs():
    m = load_benchmark("silicon_ttft_rank")
    errors = {"fold": _errs(-0.6, -0.5, -0.4, None), "defaults": _errs(0.0, -0.1, 0.0, None),
              "off a": _errs(-0.3, -0.1, 0.0, None), "off b": _errs(0.0, -0.4, -0.3, None)}
    out = m.ranked(errors, KEYS, "defaults")
    assert [e["variant"] for e in out] == ["off b", "off a"]
    assert out[0]["points"] == pytest.approx(-20.0) and out[0]["share"] == pytest.approx(20 / (140 / 3))
    with pytest.raises(TwinInputError):
        m.ranked(errors, KEYS, "nowhere")


def test_no_ttft_row_in_both_and_no_gap_are_one_line_or_no_share():
    m = load_benchmark("silicon_ttft_rank")
    none = [{"mean_tpot_ms": 0.1}] * 4
    with pytest.raises(TwinInputError, match="no row has a mean_ttft_ms error in both"):
        m.ranked({"fold": none, "defaults": none, "v": none}, KEYS)
    same = _errs(-0.2, -0.1, 0.0, None)
    out = m.ranked({"fold": same, "defaults": same, "v": _errs(0.0, 0.0, 0.0, None)}, KEYS)
    assert out[0]["share"] is None          # no gap from the fold to the defaults: no share of it
