"""Are the error bands honest? (issue 33, round 20): benchmarks/band_coverage.py's held-out coverage on a tiny
synthetic report (exact counts by hand), the exporter's order-statistic range on hand-computed cases, the note's
text for it, and the bands file's checks of the construction and coverage (one line each)."""

from __future__ import annotations

import copy
import sys
from types import SimpleNamespace

import pytest

from benchmarks.fold_report import FoldReport
from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError
from twin.results import heldout_bands as hb
from twin.results import heldout_note as hn

bc = load_benchmark("band_coverage")
ex = load_benchmark("heldout_bands_export")
TTFT = "mean_ttft_ms"
GPU_ERR = {"a0": -0.3, "a1": -0.1, "a2": 0.0, "b0": 0.1, "b1": 0.2, "b2": 0.5, "m0": 0.0}
SERVERS = {**{n: ("hopper", False) for n in GPU_ERR if n != "m0"}, "m0": ("hopper", True)}


def _report(family_folds: bool = True) -> dict:
    """GPU folds: six Hopper dense cases of families A and B (TTFT as in ``GPU_ERR``) and one MoE case of family C;
    family folds: the same cases at half the error."""
    folds = {"GPU": {"folds": [{"held_out": "H100-SXM", "errors": {n: {TTFT: e} for n, e in GPU_ERR.items()}}]}}
    if family_folds:
        folds["family"] = {"folds": [
            {"held_out": fam, "errors": {n: {TTFT: e / 2} for n, e in GPU_ERR.items() if n[0] == fam.lower()}}
            for fam in ("A", "B")] + [{"held_out": "C", "errors": {"m0": {TTFT: 0.0}}}]}
    return {"args": {"folds": "GPU,family"}, "folds": folds}


def _cases():
    return bc.report_cases(FoldReport(_report()), SERVERS)


def _row(cov, kind, cell):
    return {k: cov[kind][cell][k] for k in ("inside", "tested", "no_band")}


def test_leave_one_case_out_counts_by_hand():
    # order, 5 evidence cases: min..max of the other five; a0 (-0.3) and b2 (0.5) lie outside theirs
    cov = bc.coverage(_cases(), TTFT, "order", "case", min_cases=5)
    assert _row(cov, "GPU", "hopper dense") == {"inside": 4, "tested": 6, "no_band": 0}
    # the MoE case has no other case: no band, not a miss; pooled adds it as such
    assert _row(cov, "GPU", "hopper MoE") == {"inside": 0, "tested": 0, "no_band": 1}
    assert _row(cov, "GPU", "pooled") == {"inside": 4, "tested": 6, "no_band": 1}
    assert cov["GPU"]["pooled"]["share"] == pytest.approx(4 / 6) and cov["GPU"]["hopper MoE"]["share"] is None
    # min..max widths of the others: a0 0.8, a1..b1 0.8, b2 0.5 -> median 0.8
    assert cov["GPU"]["hopper dense"]["width_median"] == pytest.approx(0.8)
    # linear p10..p90 of b1's others (-0.3, -0.1, 0, 0.1, 0.5): -0.22..0.34, b1 (0.2) inside; a0, b2 still out
    assert _row(bc.coverage(_cases(), TTFT, "linear", "case", 5), "GPU", "hopper dense")["inside"] == 4


def test_a_thin_cell_pooled_with_its_generation():
    # the MoE case's cell has no other case: with --pool-thin 2 it borrows Hopper's dense six (-0.3..0.5): inside
    cov = bc.coverage(_cases(), TTFT, "order", "case", min_cases=5, pool_thin=2)
    assert _row(cov, "GPU", "hopper MoE") == {"inside": 1, "tested": 1, "no_band": 0}
    assert _row(cov, "GPU", "hopper dense") == {"inside": 4, "tested": 6, "no_band": 0}      # 5 >= 2: its own cell
    assert _row(cov, "GPU", "pooled") == {"inside": 5, "tested": 7, "no_band": 0}


def test_leave_the_family_out_and_the_other_kind():
    # family A's band is family B's cases (0.1..0.5) and the reverse: every case outside
    cov = bc.coverage(_cases(), TTFT, "order", "family", min_cases=3)
    assert _row(cov, "GPU", "hopper dense") == {"inside": 0, "tested": 6, "no_band": 0}
    assert _row(bc.coverage(_cases(), TTFT, "order", "family", min_cases=4), "GPU", "hopper dense")["no_band"] == 6
    # the GPU cases against the family folds' band (-0.15..0.25): -0.1, 0, 0.1, 0.2 inside; the reverse all inside
    cov = bc.coverage(_cases(), TTFT, "order", "kind", min_cases=5)
    assert _row(cov, "GPU", "hopper dense") == {"inside": 4, "tested": 6, "no_band": 0}
    assert _row(cov, "family", "hopper dense") == {"inside": 6, "tested": 6, "no_band": 0}
    rows = bc.coverage_table(_cases(), ("order",), ("kind",), 5, metrics=(TTFT,))
    assert [(r["kind"], r["cell"]) for r in rows] == [("GPU", "hopper dense"), ("GPU", "hopper MoE"),
                                                     ("GPU", "pooled"), ("family", "hopper dense"),
                                                     ("family", "hopper MoE"), ("family", "pooled")]
    assert "| order | kind | GPU | pooled | 4/6 = 67%, 1 no band |" in bc.markdown(rows, pooled_only=True)


def test_the_weibull_reading_interpolates_the_order_range():
    errs = [i / 100 for i in range(18)]             # n = 18: plotting position 1.9 -> 0.009; 17.1 -> 0.161
    assert bc.ends(errs, "weibull") == pytest.approx((0.009, 0.161))
    assert bc.ends(errs, "order") == (0.0, 0.17)


def test_a_report_without_its_family_or_a_case_is_one_line():
    with pytest.raises(TwinInputError, match="no family folds"):
        bc.report_cases(FoldReport(_report(family_folds=False)), SERVERS)
    with pytest.raises(TwinInputError, match="'m0' is not in the ground truth"):
        bc.report_cases(FoldReport(_report()), {k: v for k, v in SERVERS.items() if k != "m0"})
    with pytest.raises(TwinInputError, match="--leave 'gpu'"):
        bc.evidence(_cases()[0], _cases(), "gpu")


@pytest.mark.parametrize("argv, needle", [
    (["--constructions", "median"], "not a band construction"), (["--leave", "gpu"], "not a way to leave"),
    (["--min-cases", "0"], ""), (["--pool-thin", "-1"], ""), ])
def test_the_script_refuses_bad_options(monkeypatch, capsys, argv, needle):
    monkeypatch.setattr(sys, "argv", ["band_coverage.py", "r.json", "--ground-truth", ".", *argv])
    with pytest.raises(SystemExit) as exit_:
        bc.main()
    assert exit_.value.code == 2 and needle in capsys.readouterr().err


@pytest.mark.parametrize("n, k, coverage", [(5, 1, 4 / 6), (8, 1, 7 / 9), (9, 1, 0.8), (10, 1, 9 / 11), (18, 1, 17 / 19),
                                            (19, 2, 0.8), (31, 3, 26 / 32)])
def test_the_order_rank_and_its_coverage(n, k, coverage):
    assert hb.order_rank(n) == k and hb.order_coverage(n) == pytest.approx(coverage)


def test_the_exporter_order_range_by_hand():
    assert ex.metric_band([0.2, -0.3, 0.0, 0.1, -0.1], 5) == pytest.approx(
        {"n": 5, "abs_median": 0.1, "signed_median": 0.0, "p10": -0.3, "p90": 0.2, "coverage": 4 / 6})
    band = ex.metric_band([i / 100 for i in range(19)], 5)            # k = 2: the 2nd lowest and 2nd highest
    assert (band["p10"], band["p90"], band["coverage"]) == (0.01, 0.17, 0.8)
    assert "coverage" not in ex.metric_band([0.1, 0.2], 5) and ex.metric_band([0.1, 0.2], 5)["p10"] is None
    assert "coverage" not in ex.metric_band([0.2, -0.3, 0.0, 0.1, -0.1], 5, "linear")
    with pytest.raises(TwinInputError, match="construction 'mean'"):
        ex.band_ends([0.1], "mean")


def _doc() -> dict:
    report = _report()
    report["folds"].pop("family")
    return ex.export_bands(FoldReport(report), SERVERS, commit="abc1234", date="2026-12-20", kinds=("GPU",))


def _dep(gpu: str, moe: bool):
    return SimpleNamespace(gpu=SimpleNamespace(name=gpu), model=SimpleNamespace(is_moe=moe))


def test_the_note_names_the_construction_and_marks_a_thin_cell():
    doc = _doc()
    assert doc["construction"] == "order" and doc["kinds"]["GPU"][0]["metrics"][TTFT]["coverage"] == pytest.approx(5 / 7)
    assert hn.server_lines("hopper", False, doc)[3:] == [
        "  TTFT mean   +5.0% (-30..+50%, ~71%)", "  TPOT        -", "  E2E mean    -", "  throughput  -",
        "  predicted / measured - 1: median (80% range); report abc1234, 2026-12-20",
        "  range by order statistics: ~80% of unseen servers inside, less where marked"]
    assert all(len(line) < 80 for line in hn.server_lines("hopper", False, doc))       # a terminal does not wrap it
    assert hn.metric_text({"n": 9, "signed_median": 0.0, "p10": -0.1, "p90": 0.1, "coverage": 0.8}) == "0.0% (-10..+10%)"
    body = SimpleNamespace(cost_model=SimpleNamespace(kind="roofline"))
    out = hn.bands_doc(_dep("H100-SXM", False), body, doc)
    assert out["construction"] == "order" and "median (80% range); report abc1234, 2026-12-20; range by order " \
        "statistics: ~80% of unseen servers inside, less where marked\n" in hn.bands_markdown(out)


@pytest.mark.parametrize("edit, needle", [
    (lambda d: d.update(construction="mean"), "construction is 'mean'"),
    (lambda d: d.pop("construction"), "construction is None"),
    (lambda d: d["kinds"]["GPU"][0]["metrics"][TTFT].update(coverage=0.8), "coverage is 0.8, not 0.714"),
    (lambda d: d["kinds"]["GPU"][0]["metrics"][TTFT].pop("coverage"), "coverage is None"),
    (lambda d: d["kinds"]["GPU"][1]["metrics"][TTFT].update(coverage=0.5), "p10/p90/coverage given for 1 cases"),
    (lambda d: d.update(construction="linear"), "coverage is 0.714"),
])
def test_a_hostile_construction_is_one_line(edit, needle):
    doc = copy.deepcopy(_doc())
    edit(doc)
    with pytest.raises(TwinInputError, match="bands.json") as err:
        hb.check_bands(doc, "bands.json")
    assert needle in str(err.value) and "\n" not in str(err.value)
