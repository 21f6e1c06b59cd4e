"""The fit's case weights (``twin.fitting.case_weights``, issue 33 round 19): the default rule is the source rule
exactly, and the cell rule keeps each source's total while sharing it among cells by sqrt(count)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from twin.errors import TwinInputError
from twin.fitting.case_weights import WEIGHTINGS, case_divisors
from twin.fitting.joint import WeightedCase, balanced


def _divisors(cells: list[tuple[str, str]], weighting: str) -> list[float]:
    return case_divisors(cells, lambda c: c[0], lambda c: c[1], weighting)


# source A: cell x 4 cases, cell y 1 case; source B: one cell of 9 cases
CELLS = [("A", "x")] * 4 + [("A", "y")] + [("B", "z")] * 9


def test_source_rule_divides_by_the_root_of_the_source_count():
    assert _divisors(CELLS, "source") == [math.sqrt(5)] * 5 + [3.0] * 9


def test_cell_rule_hand_computed():
    # A: N 5, sum of roots 2 + 1 = 3; x: sqrt(4) * 3 / sqrt(5), y: 1 * 3 / sqrt(5); B: 3 * 3 / 3
    d = _divisors(CELLS, "cell")
    assert d[:4] == pytest.approx([6 / math.sqrt(5)] * 4, rel=1e-15)
    assert d[4] == pytest.approx(3 / math.sqrt(5), rel=1e-15)
    assert d[5:] == pytest.approx([3.0] * 9, rel=1e-15)
    totals = {"A": 0.0, "B": 0.0, "x": 0.0, "y": 0.0}
    for (s, k), v in zip(CELLS, d):
        totals[s] += 1 / v
        totals[k] = totals.get(k, 0.0) + 1 / v
    assert totals["A"] == pytest.approx(math.sqrt(5), rel=1e-12)      # the source's total is kept
    assert totals["B"] == pytest.approx(3.0, rel=1e-12)
    assert totals["x"] / totals["y"] == pytest.approx(2.0, rel=1e-12)  # cells by sqrt(count): sqrt(4) / sqrt(1)


def test_one_cell_per_source_is_the_source_rule():
    cells = [("A", "x")] * 7 + [("B", "z")] * 2
    assert _divisors(cells, "cell") == pytest.approx(_divisors(cells, "source"), rel=1e-15)


def test_unknown_weighting_is_one_line_error():
    with pytest.raises(TwinInputError, match="allowed: source, cell, silicon-cell"):
        _divisors(CELLS, "equal")
    assert WEIGHTINGS == ("source", "cell", "silicon-cell")


def _case(model: str, gpu: str, weight: float = 1.0) -> WeightedCase:
    return WeightedCase(SimpleNamespace(model=model), SimpleNamespace(gpu=gpu, model=model), weight=weight)


def test_balanced_default_unchanged_and_own_weight_multiplies():
    cases = [_case("llama-3.1-8b", "H100-SXM")] * 3 + [_case("mixtral-8x7b", "H100-SXM", 0.5)]
    assert [c.weight for c in balanced(cases)] == [1 / math.sqrt(4)] * 3 + [0.5 / math.sqrt(4)]
    cell = [c.weight for c in balanced(cases, "cell")]
    # one source of 4: llama 3 cases, mixtral 1; sum of roots sqrt(3) + 1
    root = math.sqrt(3) + 1
    assert cell[:3] == pytest.approx([2 / (math.sqrt(3) * root)] * 3, rel=1e-15)
    assert cell[3] == pytest.approx(0.5 * 2 / root, rel=1e-15)


def _report(values: dict[str, float], ident: str = "identified"):
    from benchmarks.fold_report import FoldReport
    folds = [{"held_out": g, "params": {"step_overhead_s": v}, "identification": {"step_overhead_s": ident}}
             for g, v in values.items()]
    return FoldReport({"names": ["step_overhead_s"], "folds": {"GPU": {"folds": folds}}}, "test.json")


def test_term_spread_over_identified_folds():
    from benchmarks.case_weight_terms import spread, term_values
    values = term_values(_report({"H100-SXM": 1.5e-3, "B200": 3.0e-3}), ["GPU"], "step_overhead_s")
    assert values == [("GPU/H100-SXM", pytest.approx(1.5), True), ("GPU/B200", pytest.approx(3.0), True)]
    assert spread(values) == (pytest.approx(1.5), pytest.approx(3.0))
    held = term_values(_report({"H100-SXM": 1.5e-3, "B200": 3.0e-3}, "held at prior"), ["GPU"], "step_overhead_s")
    assert spread(held) is None


def test_term_values_unknown_kind_is_one_line_error():
    from benchmarks.case_weight_terms import term_values

    with pytest.raises(TwinInputError, match="no family folds"):
        term_values(_report({"B200": 1e-3}), ["family"], "step_overhead_s")


def test_cell_shares_sum_to_one():
    from benchmarks.case_weight_refit import cell_shares
    cases = balanced([_case("llama-3.1-8b", "H100-SXM")] * 3 + [_case("mixtral-8x7b", "B200", 0.5)], "cell")
    shares = cell_shares(cases)
    assert sum(shares.values()) == pytest.approx(1.0, rel=1e-12)
    assert set(shares) == {("inference-perf", "llama", "H100-SXM"), ("inference-perf", "mixtral", "B200")}


def test_silicon_cell_rule_cells_only_the_silicon_source():
    cells = [("silicon", "x")] * 4 + [("silicon", "y")] + [("inference-perf", "a")] * 3 + [("inference-perf", "b")]
    d = _divisors(cells, "silicon-cell")
    assert d[:5] == pytest.approx(_divisors(cells, "cell")[:5], rel=1e-15)
    assert d[5:] == pytest.approx([2.0] * 4, rel=1e-15)        # the source rule: sqrt(4)


def test_terms_matched_by_fold_name(tmp_path, capsys, monkeypatch):
    import json
    import sys
    from benchmarks import case_weight_terms

    def write(name, groups):
        folds = [{"held_out": g, "params": {"step_overhead_s": v}, "identification": {"step_overhead_s": "identified"}}
                 for g, v in groups.items()]
        path = tmp_path / name
        path.write_text(json.dumps({"names": ["step_overhead_s"], "folds": {"GPU": {"folds": folds}}}))
        return str(path)

    before = write("a.json", {"H100-SXM": 1e-3, "B200": 2e-3})
    after = write("b.json", {"B200": 4e-3})
    monkeypatch.setattr(sys, "argv", ["case_weight_terms.py", before, after, "--kinds", "GPU"])
    case_weight_terms.main()
    out = capsys.readouterr().out.splitlines()
    assert "range over identified folds: 1..2 -> -" in out[0]
    assert out[1].split() == ["GPU/H100-SXM", "1", "->", "-"]
    assert out[2].split() == ["GPU/B200", "2", "->", "4"]
