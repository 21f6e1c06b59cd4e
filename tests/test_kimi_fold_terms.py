"""benchmarks/kimi_fold_terms.py (issue 33, round 14): the settings that put back what Kimi's rows read, the slices,
the summaries, and the grouping of repeated light-load runs."""

from __future__ import annotations

import pytest
from benchmark_module import load_benchmark
from twin.cost.marlin_moe import MARLIN_W4A16_MOE_TERMS
from twin.cost.mla_decode import MLA_TERMS
from twin.cost.mla_request import MLA_EXPERT_REQUEST_S, READINGS


def test_settings_put_back_one_kimi_read_term_at_a_time_then_all():
    m = load_benchmark("kimi_fold_terms")
    s = m.settings()
    assert s[0] == ("the fold (its own parameters)", {})
    singles = [o for _, o in s[1:-1]]
    assert singles == [{"layer_overhead_s@mla": MLA_TERMS["layer_overhead_s"]},
                       {"moe_layer_overhead_s@experts_int4": MARLIN_W4A16_MOE_TERMS["moe_layer_overhead_s"],
                        "moe_expert_efficiency@experts_int4": MARLIN_W4A16_MOE_TERMS["moe_expert_efficiency"]},
                       {"expert_path_request_s@mla+experts_nvfp4": READINGS["nvfp4"]}]
    assert s[-1][1] == {k: v for o in singles for k, v in o.items()}
    # the per-request time is a reading only: nothing of it is embedded
    assert MLA_EXPERT_REQUEST_S == {}


def test_case_slice_names_format_tp_lengths_and_load():
    m = load_benchmark("kimi_fold_terms")
    assert m.case_slice("int4", 8, 1024, 8192, 8) == {
        "format": "INT4", "format, TP": "INT4 TP8", "format, ISL/OSL": "INT4 1024/8192", "format, load": "INT4 C <= 8"}
    assert m.case_slice("fp4", 4, 1024, 1024, 16)["format, load"] == "NVFP4 C >= 16"


def test_summary_medians_and_missing_metric():
    m = load_benchmark("kimi_fold_terms")
    errs = [{"mean_ttft_ms": -0.10, "mean_tpot_ms": 0.02}, {"mean_ttft_ms": 0.04, "mean_tpot_ms": -0.06},
            {"mean_tpot_ms": 0.30}]
    s = m.summary(errs)
    assert s["mean_ttft_ms"] == (pytest.approx(0.07), pytest.approx(-0.03), 2)
    assert s["mean_tpot_ms"] == (pytest.approx(0.06), pytest.approx(0.02), 3)
    assert s["mean_e2el_ms"] is None and m.cell(None).strip() == "-"
    assert m.cell((0.07, -0.03, 2)) == "  7.0% ( -3.0%)"


def _row(ttft, tpot, *, fmt="fp4", script="March scripts", tp=4, isl=1024, osl=1024, conc=4, date="2026-03-11"):
    return {"format": fmt, "release": "0.17.0", "script": script, "tp": tp, "isl": isl, "osl": osl, "conc": conc,
            "date": date, "ttft_ms": ttft, "tpot_ms": tpot}


def test_repeat_groups_drop_file_copies_singletons_and_split_by_script():
    m = load_benchmark("kimi_fold_terms")
    rows = [_row(169.94, 8.36), _row(169.9407, 8.3614),          # one run, two copies in the file
            _row(183.5, 8.28, osl=8192),
            _row(81.5, 8.16, script="2026-04-20 script"),       # other flags: its own group, a singleton
            _row(232.1, 8.83, isl=8192)]                          # a singleton
    groups = m.repeat_groups(rows)
    assert list(groups) == [("fp4", "0.17.0", "March scripts", 4, 1024, 4)]
    runs = groups[("fp4", "0.17.0", "March scripts", 4, 1024, 4)]
    assert [r["ttft_ms"] for r in runs] == [169.94, 183.5]
    ms, steps = m.spread(runs)
    assert ms == pytest.approx(13.56)
    assert steps == pytest.approx(13.56 / ((8.36 + 8.28) / 2))


def test_floor_is_the_median_deviation_from_each_groups_median():
    m = load_benchmark("kimi_fold_terms")
    groups = {"a": [{"ttft_ms": 90.0, "tpot_ms": 10.0}, {"ttft_ms": 110.0, "tpot_ms": 10.0}],
              "b": [{"ttft_ms": 200.0, "tpot_ms": 9.0}, {"ttft_ms": 200.0, "tpot_ms": 11.0},
                    {"ttft_ms": 260.0, "tpot_ms": 10.0}]}
    # deviations: a 0.1, 0.1 (median 100); b 0, 0, 0.3 (median 200) -> median of [0, 0, 0.1, 0.1, 0.3] = 0.1
    assert m.floor(groups) == pytest.approx(0.1)
    # TPOT: a 0, 0; b 0.1, 0.1, 0 (median 10) -> median of [0, 0, 0, 0.1, 0.1] = 0
    assert m.floor(groups, "tpot_ms") == pytest.approx(0.0)
