"""benchmarks/multi_seed_report.py (issue 33, round 22): the held-out report over several seeds, on hand-built
reports (exact: medians, ranges, sds, target counts, MoE vs dense, per-case scatter, and the one-line refusals)."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.fold_report import FoldReport
from benchmarks.multi_seed_report import ALL, DENSE, MOE, KEYS, main, markdown, multi_seed, spread, text
from twin.errors import TwinInputError


def _summary(abs_: float | None, signed: float | None, n: int = 4) -> dict:
    """The same |error| and signed median on every metric but TTFT p50 (no case has it)."""
    out = {k: {"n": n, "abs": abs_, "signed": signed} for k in KEYS}
    out["median_ttft_ms"] = {"n": 0, "abs": None, "signed": None}
    return out


def _report(seed: int, a: float, b: float, case_err: float, moe: float = 0.05, dense: float = 0.04,
            groups=("H100-SXM", "B200"), **args) -> dict:
    """A GPU-fold report: pooled |error| a (signed -a), groups a and b, one case per group with error case_err."""
    folds = [{"held_out": g, "summary": _summary(v, v), "errors": {f"case-{g}": {k: case_err for k in KEYS
                                                                                 if k != "median_ttft_ms"}}}
             for g, v in zip(groups, (a, b))]
    return {"args": {"seed": seed, "workers": 1, "fit_sim_s": 30.0, "folds": "GPU", **args},
            "folds": {"GPU": {"pooled": _summary(a, -a), "folds": folds}},
            "moe_vs_dense": {"GPU": {DENSE: _summary(dense, 0.0), MOE: _summary(moe, 0.0)}}}


def _reports(*docs: dict) -> list[FoldReport]:
    return [FoldReport(d, f"r{i}.json") for i, d in enumerate(docs)]


def test_spread_median_range_and_sample_sd():
    s = spread([0.02, 0.08, 0.05])
    assert s == {"median": 0.05, "min": 0.02, "max": 0.08, "sd": pytest.approx(0.03)}
    assert spread([0.07])["sd"] == 0.0


def test_cells_over_seeds_with_targets_at_every_seed_and_at_the_median():
    # TTFT mean target 10 %: pooled |error| 9 / 12 / 7 % -> met at 2 of 3 seeds, at the median (9 %) met;
    # signed -9 / -12 / -7 %: outside +/-5 % at every seed
    result = multi_seed(_reports(_report(0, 0.09, 0.02, 0.01), _report(1, 0.12, 0.03, 0.03),
                                 _report(2, 0.07, 0.04, 0.02)), ["GPU"])
    assert result["seeds"] == [0, 1, 2]
    cells = result["kinds"]["GPU"]["cells"]
    assert list(cells) == [ALL, "H100-SXM", "B200", DENSE, MOE]
    ttft = cells[ALL]["mean_ttft_ms"]
    assert ttft["abs"]["median"] == 0.09 and ttft["abs"]["min"] == 0.07 and ttft["abs"]["max"] == 0.12
    assert ttft["abs"]["sd"] == pytest.approx(0.025166114784235833)
    assert ttft["signed"]["median"] == -0.09
    assert (ttft["abs_met_seeds"], ttft["abs_met_at_median"]) == (2, True)
    assert (ttft["signed_met_seeds"], ttft["signed_met_at_median"]) == (0, False)
    assert ttft["n"] == [4, 4, 4]
    assert ttft["abs_by_seed"] == [0.09, 0.12, 0.07] and ttft["signed_by_seed"] == [-0.09, -0.12, -0.07]
    # throughput's target is 3 %: 9 / 12 / 7 % miss at every seed
    thr = cells[ALL]["request_throughput"]
    assert (thr["abs_met_seeds"], thr["abs_met_at_median"]) == (0, False)
    # a metric without cases at some seed is left out of the cell
    assert "median_ttft_ms" not in cells[ALL]
    # the B200 group: 2 / 3 / 4 % -> throughput met at 2 seeds of 3, not at the median? median 3 % <= 3 %: met
    b200 = cells["B200"]["request_throughput"]
    assert (b200["abs_met_seeds"], b200["abs_met_at_median"]) == (2, True)


def test_moe_vs_dense_counts_seeds_and_reads_the_seed_medians():
    result = multi_seed(_reports(_report(0, 0.05, 0.05, 0.0, moe=0.06, dense=0.04),
                                 _report(1, 0.05, 0.05, 0.0, moe=0.03, dense=0.04),
                                 _report(2, 0.05, 0.05, 0.0, moe=0.05, dense=0.045)), ["GPU"])
    m = result["kinds"]["GPU"]["moe_vs_dense"]["mean_tpot_ms"]
    assert m["met_seeds"] == 1
    assert m["met_at_median"] is False          # medians: MoE 5 %, dense 4 %
    assert m["gap"]["median"] == pytest.approx(0.005)
    assert m["gap"]["min"] == pytest.approx(-0.01) and m["gap"]["max"] == pytest.approx(0.02)
    assert "median_ttft_ms" not in result["kinds"]["GPU"]["moe_vs_dense"]


def test_case_scatter_is_the_sd_of_each_case_over_seeds():
    result = multi_seed(_reports(_report(0, 0.05, 0.05, 0.01), _report(1, 0.05, 0.05, 0.05)), ["GPU"])
    c = result["kinds"]["GPU"]["case_scatter"]["mean_tpot_ms"]
    assert c["n"] == 2
    assert c["median_sd"] == pytest.approx(0.04 / math.sqrt(2))
    assert c["max_sd"] == pytest.approx(0.04 / math.sqrt(2))
    assert c["max_case"] in ("case-H100-SXM", "case-B200")


def test_text_names_targets_and_misses_at_the_median():
    out = text(multi_seed(_reports(_report(0, 0.09, 0.02, 0.01), _report(1, 0.12, 0.03, 0.03)), ["GPU"]))
    assert "2 seeds (0, 1)" in out
    assert "all held out       TTFT mean  n   4 | |error|  10.5 [9.0..12.0] sd 2.1 met 1/2, median NOT" in out
    assert "signed -10.5 [-12.0..-9.0] sd 2.1 met 0/2, median NOT" in out
    assert "MoE no worse than dense, TPOT      : met 0/2, median NOT; MoE - dense |error| +1.0" in out


def test_markdown_one_row_per_cell_with_sds_and_seeds_meeting():
    md = markdown(multi_seed(_reports(_report(0, 0.09, 0.02, 0.01), _report(1, 0.12, 0.03, 0.03)), ["GPU"]))
    lines = md.splitlines()
    assert lines[0] == "| fold | cell | TTFT mean | TTFT p50 | TPOT | E2E mean | throughput |"
    assert len(lines) == 2 + 5
    assert lines[2].startswith("| GPU | all held out | 10.5 (-10.5); sd 2.1 / 2.1; met 1/2*, 0/2* | - | ")
    assert "| GPU | B200 | 2.5 (+2.5); sd 0.7 / 0.7; met 2/2, 2/2 |" in md


def test_refusals_are_one_line():
    with pytest.raises(TwinInputError, match="seed 0, as r0.json"):
        multi_seed(_reports(_report(0, 0.1, 0.1, 0.0), _report(0, 0.1, 0.1, 0.0)), ["GPU"])
    with pytest.raises(TwinInputError, match="made with fit_sim_s = 60.0, r0.json with 30.0"):
        multi_seed(_reports(_report(0, 0.1, 0.1, 0.0), _report(1, 0.1, 0.1, 0.0, fit_sim_s=60.0)), ["GPU"])
    with pytest.raises(TwinInputError, match="holds out GPU groups H100-SXM"):
        multi_seed(_reports(_report(0, 0.1, 0.1, 0.0), _report(1, 0.1, 0.1, 0.0, groups=("H100-SXM",))), ["GPU"])
    with pytest.raises(TwinInputError, match="no family folds"):
        multi_seed(_reports(_report(0, 0.1, 0.1, 0.0), _report(1, 0.1, 0.1, 0.0)), ["family"])
    bad = _report(1, 0.1, 0.1, 0.0)
    bad["folds"]["GPU"]["pooled"]["mean_tpot_ms"]["abs"] = "x"
    with pytest.raises(TwinInputError, match="GPU pooled: mean_tpot_ms abs / signed"):
        multi_seed(_reports(_report(0, 0.1, 0.1, 0.0), bad), ["GPU"])
    del bad["moe_vs_dense"]
    bad["folds"]["GPU"]["pooled"]["mean_tpot_ms"]["abs"] = 0.1
    with pytest.raises(TwinInputError, match=r"no moe_vs_dense\['GPU'\]"):
        multi_seed(_reports(_report(0, 0.1, 0.1, 0.0), bad), ["GPU"])
    neg = _report(1, 0.1, 0.1, 0.0)
    neg["args"]["seed"] = -1
    with pytest.raises(TwinInputError, match="args.seed is -1"):
        multi_seed(_reports(_report(0, 0.1, 0.1, 0.0), neg), ["GPU"])


def test_the_workers_json_and_fold_kinds_may_differ(tmp_path):
    a = _report(0, 0.09, 0.02, 0.01, json="a.json")
    b = _report(1, 0.12, 0.03, 0.03, json="b.json")
    b["args"].update(workers=2, folds="source,GPU,family")
    assert multi_seed(_reports(a, b), ["GPU"])["seeds"] == [0, 1]


def test_main_writes_the_json_and_refuses_one_report(tmp_path, capsys):
    paths = []
    for seed, a in ((0, 0.09), (1, 0.12)):
        paths.append(tmp_path / f"s{seed}.json")
        paths[-1].write_text(json.dumps(_report(seed, a, 0.02, 0.01)))
    out = tmp_path / "out.json"
    md = tmp_path / "out.md"
    main([str(p) for p in paths] + ["--folds", "GPU", "--json", str(out), "--markdown", str(md)])
    assert md.read_text().startswith("| fold | cell |")
    data = json.loads(out.read_text())
    assert data["seeds"] == [0, 1]
    assert data["kinds"]["GPU"]["cells"][ALL]["mean_tpot_ms"]["abs"]["median"] == pytest.approx(0.105)
    assert "== GPU" in capsys.readouterr().out
    with pytest.raises(TwinInputError, match="two or more reports"):
        main([str(paths[0]), "--folds", "GPU"])
    with pytest.raises(TwinInputError, match="--folds 'GPU,GPU'"):
        main([str(p) for p in paths] + ["--folds", "GPU,GPU"])
