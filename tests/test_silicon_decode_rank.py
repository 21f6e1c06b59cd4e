"""The ranking of the silicon-held-out source fold's decode gap by term (benchmarks/silicon_decode_rank.py; issue 33,
round 18): exact logic on hand-made errors, and one-line errors on foreign files."""

from __future__ import annotations

import json

import pytest

from benchmarks.silicon_decode_rank import cells, mean_move, print_rank, ranked
from twin.errors import TwinInputError

T, E, R = "mean_tpot_ms", "mean_e2el_ms", "request_throughput"


def test_cells_and_moves_are_medians_and_means_over_the_rows_that_have_the_metric():
    errs = [{T: -0.1}, {T: 0.3}, {}, {T: -0.2}]
    assert cells(errs, T) == (pytest.approx(0.2), pytest.approx(-0.1), 3)
    assert cells(errs, E) is None
    assert mean_move(errs, [{T: 0.0}, {T: 0.3}, {T: 1.0}, {T: 0.0}], T) == pytest.approx((0.1 + 0.0 + 0.2) / 3)
    assert mean_move(errs, [{T: 0.0}] * 4, T, rows=[0]) == pytest.approx(0.1)
    with pytest.raises(TwinInputError):
        mean_move(errs, errs[:2], T)


def test_ranked_puts_the_fold_first_then_the_largest_move():
    names = ["a_b200_x", "b_h100_y"]
    fold = [{T: -0.2, E: -0.2, R: 0.25}, {T: -0.1}]
    errors = {"fold": fold, "small": [{T: -0.15}, {T: -0.1}], "big": [{T: 0.0}, {T: -0.05}]}
    out = ranked(errors, names)
    assert [e["label"] for e in out] == ["fold", "big", "small"]
    assert out[1]["points"] == pytest.approx(0.125) and out[2]["points"] == pytest.approx(0.025)
    assert out[1]["b200"][1] == pytest.approx(0.0) and out[1]["h100"][1] == pytest.approx(-0.05)
    with pytest.raises(TwinInputError):
        ranked({"small": fold}, names)


def test_print_rank_rejects_a_foreign_or_ragged_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"cases": ["a"], "errors": {"fold": [{T: 0.1}, {T: 0.2}]}}))
    with pytest.raises(TwinInputError):
        print_rank(bad)
    bad.write_text(json.dumps([1, 2]))
    with pytest.raises(TwinInputError):
        print_rank(bad)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"cases": ["a_b200"], "errors": {"fold": [{T: -0.1}], "x": [{T: 0.0}]}}))
    print_rank(good)
    assert "| x | +10.00 |" in capsys.readouterr().out
