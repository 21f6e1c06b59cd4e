"""Hostile input, third pass (issue 33, round 23, 33zG): the readers of the held-out report scripts
(``benchmarks/fold_report.py`` and the scripts that pool, pair or export a report: ``multi_seed_report``,
``whatif_fidelity``, ``whatif_export``, ``heldout_bands_export``, ``band_coverage``, ``paired_change``,
``heldout_intervals``) and the packaged tables' loaders (``twin.results.heldout_bands.load_bands``,
``twin.results.whatif_bands.load_whatif``). One test or more per defect fixed; each is one exact line naming the
file, the key and the allowed form. No test simulates anything or reads the ground truth."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark_module import load_benchmark
from twin.errors import TwinInputError
from twin.results import heldout_bands as hb
from twin.results import whatif_bands as wb

ROOT = Path(__file__).resolve().parents[1]
fr = load_benchmark("fold_report")
ms = load_benchmark("multi_seed_report")
we = load_benchmark("whatif_export")
pc = load_benchmark("paired_change")
hi = load_benchmark("heldout_intervals")
wf = load_benchmark("whatif_fidelity")

CASE = "run-a/stage0"
ERRS = {"mean_ttft_ms": -0.25, "mean_tpot_ms": 0.125}


def _report(errors_h100: dict | None = None, errors_b200: dict | None = None, seed: int = 0) -> dict:
    summary = {k: {"n": 1, "abs": 0.1, "signed": -0.1} for k in ms.KEYS}
    folds = [{"held_out": "H100-SXM", "params": {"step_overhead_s": 1.5e-3}, "summary": summary,
              "errors": {CASE: dict(ERRS)} if errors_h100 is None else errors_h100},
             {"held_out": "B200", "params": {"step_overhead_s": 2e-3}, "summary": summary,
              "errors": {"run-b/stage0": dict(ERRS)} if errors_b200 is None else errors_b200}]
    return {"args": {"seed": seed}, "folds": {"GPU": {"pooled": summary, "folds": folds}},
            "moe_vs_dense": {"GPU": {ms.DENSE: summary, ms.MOE: summary}}}


def _error(call, *args, **kw) -> str:
    with pytest.raises(TwinInputError) as info:
        call(*args, **kw)
    return str(info.value)


def _errors_of(doc: dict, source: str = "r.json") -> dict:
    rep = fr.FoldReport(doc, source)
    return rep.errors(rep.folds("GPU")[0])


# fold_report: numbers, metric names and ranges of the per-case errors

def test_an_integer_beyond_a_float_is_not_a_finite_number():
    assert not fr.finite_number(10**400) and fr.finite_number(10**300) and not fr.finite_number(True)
    line = _error(_errors_of, _report({CASE: {"mean_ttft_ms": 10**400}}))
    assert line == ("r.json: the fold holding 'H100-SXM' out: errors of 'run-a/stage0' 'mean_ttft_ms' is "
                    "1000000000000000000000000000000000000000... (401 characters), not a finite number")


@pytest.mark.parametrize("value", [-1.0, -5.0, 1.5e9])
def test_an_error_outside_a_signed_relative_error_is_refused(value):
    line = _error(_errors_of, _report({CASE: {"mean_ttft_ms": value}}))
    assert line == (f"r.json: the fold holding 'H100-SXM' out: errors of 'run-a/stage0': mean_ttft_ms is {value!r}, "
                    "not a signed relative error in (-1, 1e+09] (predicted / measured - 1)")


def test_an_error_must_name_a_metric():
    line = _error(_errors_of, _report({CASE: {"p99_ttft_ms": 0.1}}))
    assert line == ("r.json: the fold holding 'H100-SXM' out: errors of 'run-a/stage0': 'p99_ttft_ms' is not a metric "
                    "(mean_ttft_ms, median_ttft_ms, mean_tpot_ms, mean_e2el_ms, request_throughput)")


def test_the_largest_allowed_error_and_one_just_above_minus_one_read():
    errs = _errors_of(_report({CASE: {"mean_ttft_ms": -0.999, "mean_tpot_ms": 1e9}}))
    assert errs == {CASE: {"mean_ttft_ms": -0.999, "mean_tpot_ms": 1e9}}


# fold_report: the structure of a fold kind

def test_a_group_held_out_by_two_folds_of_a_kind_is_refused():
    doc = _report()
    doc["folds"]["GPU"]["folds"][1]["held_out"] = "H100-SXM"
    assert _error(fr.FoldReport, doc, "r.json") == ("r.json: GPU folds 0 and 1 both hold 'H100-SXM' out (each group "
                                                    "once per fold kind)")


def test_a_case_held_out_by_two_folds_of_a_kind_is_refused():
    doc = _report(errors_b200={CASE: dict(ERRS)})
    assert _error(fr.FoldReport, doc, "r.json") == ("r.json: case 'run-a/stage0' is held out by two GPU folds "
                                                    "('H100-SXM' and 'B200'); a case is held out once per kind")


def test_a_100_kB_case_name_is_cut_in_the_message():
    name = "x" * 100_000
    line = _error(_errors_of, _report({name: {"mean_ttft_ms": "0.1"}}))
    assert len(line) < 1200 and line.endswith("'mean_ttft_ms' is '0.1', not a finite number")


# fold_report: what the file is

def test_a_pipe_is_read_a_device_and_a_link_loop_are_refused(tmp_path):
    read, write = os.pipe()
    os.write(write, json.dumps(_report()).encode())
    os.close(write)
    try:
        assert fr.read_json(Path(f"/dev/fd/{read}"))["args"] == {"seed": 0}     # bash's <(...)
    finally:
        os.close(read)
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    zero = tmp_path / "zero.json"
    assert _error(fr.read_json, zero) == f"{zero}: a device or socket; the report must be a file"
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    assert _error(fr.read_json, loop) == f"{loop}: cannot read report (Too many levels of symbolic links)"
    assert _error(fr.read_json, tmp_path / "none.json") == f"{tmp_path}/none.json: no such file"


# multi_seed_report

def test_multi_seed_refuses_a_summary_count_that_is_not_a_whole_number():
    doc = _report()
    doc["folds"]["GPU"]["folds"][0]["summary"] = {k: {"n": "x", "abs": 0.1, "signed": 0.1} for k in ms.KEYS}
    line = _error(ms.cells, fr.FoldReport(doc, "r.json"), "GPU")
    assert line == ("r.json: the GPU fold holding 'H100-SXM' out: mean_ttft_ms n is 'x', not a whole number >= 0 "
                    "(the cases with the metric)")


def test_multi_seed_refuses_reports_that_hold_out_other_cases():
    other = _report(errors_b200={"run-c/stage0": dict(ERRS)}, seed=1)
    reps = [fr.FoldReport(_report(), "a.json"), fr.FoldReport(other, "b.json")]
    assert _error(ms.check_comparable, reps, ["GPU"]) == (
        "a.json: holds out GPU case 'run-b/stage0', b.json does not (the reports must hold out the same cases)")
    empty = _report(errors_b200={}, seed=1)
    reps = [fr.FoldReport(_report(), "a.json"), fr.FoldReport(empty, "b.json")]
    assert "a.json: holds out GPU case 'run-b/stage0', b.json does not" in _error(ms.check_comparable, reps, ["GPU"])


# whatif_export: the what-if table it reads

def _whatif_doc() -> dict:
    cell = {"n": 4, "ratio_abs_median": 0.05, "ratio_signed_median": -0.02, "abs_error_median": 0.1,
            "direction_judged": 4, "direction_right": 1.0, "cancels": 0, "compounds": 0}
    return {"summary": {"GPU": {"concurrency": {"mean_ttft_ms": cell}}}, "ignore": [], "report": "r.json",
            "floor_scale": 1.0, "kinds": ["GPU"], "pairs": []}


@pytest.mark.parametrize("path, value, message", [
    (("GPU",), [], "summary.GPU is not an object"),
    (("GPU", "concurrency"), "x", "summary.GPU.concurrency is not an object"),
    (("GPU", "concurrency", "mean_ttft_ms"), 3, "summary.GPU.concurrency.mean_ttft_ms is not an object"),
    (("GPU", "concurrency", "mean_ttft_ms", "n"), None, "summary.GPU.concurrency.mean_ttft_ms.n is None, not a whole "
                                                       "number >= 1"),
    (("GPU", "concurrency", "mean_ttft_ms", "n"), float("nan"), "summary.GPU.concurrency.mean_ttft_ms.n is nan, not a "
                                                                "whole number >= 1"),
    (("GPU", "concurrency", "mean_ttft_ms", "ratio_abs_median"), "0.1",
     "summary.GPU.concurrency.mean_ttft_ms.ratio_abs_median is '0.1', not a finite number"),
    (("GPU", "concurrency", "mean_ttft_ms", "direction_right"), 10**400,
     "summary.GPU.concurrency.mean_ttft_ms.direction_right is 1000000000000000000000000000000000000000... (401 "
     "characters), not a finite number or null")])
def test_whatif_export_checks_the_table_it_reads(tmp_path, path, value, message):
    doc = _whatif_doc()
    node = doc["summary"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    out = tmp_path / "w.json"
    out.write_text(json.dumps(doc))
    assert _error(we._whatif, out) == f"{out}: {message} (a whatif_fidelity.py --json output)"


def test_whatif_export_reads_a_good_table_and_names_a_missing_key(tmp_path):
    (tmp_path / "w.json").write_text(json.dumps(_whatif_doc()))
    assert we._whatif(tmp_path / "w.json")["summary"]["GPU"]["concurrency"]["mean_ttft_ms"]["n"] == 4
    doc = _whatif_doc()
    del doc["summary"]["GPU"]["concurrency"]["mean_ttft_ms"]["n"]
    (tmp_path / "w.json").write_text(json.dumps(doc))
    assert _error(we._whatif, tmp_path / "w.json") == (f"{tmp_path}/w.json: summary.GPU.concurrency.mean_ttft_ms.n is "
                                                       "missing, not a whole number >= 1 (a whatif_fidelity.py --json "
                                                       "output)")
    (tmp_path / "w.json").write_text("[1]")
    assert _error(we._whatif, tmp_path / "w.json") == (f"{tmp_path}/w.json: no summary object (a whatif_fidelity.py "
                                                       "--json output)")


# the scripts name the report's file

def test_paired_change_names_both_files():
    before = fr.FoldReport(_report(), "before.json")
    after = fr.FoldReport(_report(errors_b200={"run-c/stage0": dict(ERRS)}), "after.json")
    assert _error(pc.pairs, before, after, "GPU", {}) == (
        "before.json: GPU folds: case 'run-b/stage0' is in one report only (not in after.json: the reports hold out "
        "other cases)")
    swapped = _report()
    folds = swapped["folds"]["GPU"]["folds"]
    folds[0]["held_out"], folds[1]["held_out"] = "B200", "H100-SXM"
    assert _error(pc.pairs, before, fr.FoldReport(swapped, "after.json"), "GPU", {}) == (
        "before.json -> after.json: GPU folds: case 'run-a/stage0' is held out with 'H100-SXM' before, 'B200' after")


def test_heldout_intervals_names_the_file():
    assert _error(hi.add_intervals, _report(), [], None, source="r.json") == (
        "r.json: case 'run-a/stage0' is not in the ground truth (--ground-truth?)")


def test_whatif_fidelity_names_the_file():
    assert _error(wf.report_pairs, fr.FoldReport(_report(), "r.json"), ["GPU"], {}, {}) == (
        "r.json: case 'run-a/stage0' is not in the ground truth (--ground-truth?)")


# the packaged tables' loaders

def _bands() -> dict:
    return json.loads(hb.DATA_FILE.read_text())


def _first_band(doc: dict) -> dict:
    return next(iter(doc["kinds"]["GPU"][0]["metrics"].values()))


@pytest.mark.parametrize("key, value, message", [
    ("abs_median", 10**400, "abs_median is 1000000000000000000000000000000000000000... (401 characters), not a finite "
                            "number"),
    ("n", 10**400, "n is 1000000000000000000000000000000000000000... (401 characters), not a whole number >= 1, at "
                   "most 1,000,000,000"),
    ("p10", -1.5, "p10 is -1.5, not a signed relative error in (-1, 1e+09]"),
    ("signed_median", 1e308, "signed_median is 1e+308, not a signed relative error in (-1, 1e+09]"),
    ("abs_median", 1e308, "abs_median is 1e+308, above 1e+09")])
def test_the_bands_loader_refuses_numbers_out_of_form(key, value, message):
    doc = _bands()
    _first_band(doc)[key] = value
    metric = next(iter(doc["kinds"]["GPU"][0]["metrics"]))
    assert _error(hb.check_bands, doc, "b.json") == (
        f"b.json: kinds.GPU[0].metrics.{metric}.{message} (rewrite it with benchmarks/heldout_bands_export.py)")


def _whatif_cell(doc: dict) -> tuple[str, dict]:
    kind = next(iter(doc["kinds"]))
    knob = next(iter(doc["kinds"][kind]))
    metric = next(iter(doc["kinds"][kind][knob]))
    return f"kinds.{kind}.{knob}.{metric}", doc["kinds"][kind][knob][metric]


@pytest.mark.parametrize("key, value, message", [
    ("ratio_abs_median", 10**400, "ratio_abs_median is 1000000000000000000000000000000000000000... (401 characters), "
                                  "not a finite number"),
    ("ratio_signed_median", -2.0, "ratio_signed_median is -2.0, outside -1..1e+09"),
    ("n", 10**12, "n is 1000000000000, not a whole number >= 3, at most 1,000,000,000")])
def test_the_whatif_loader_refuses_numbers_out_of_form(key, value, message):
    doc = json.loads(wb.DATA_FILE.read_text())
    where, cell = _whatif_cell(doc)
    cell[key] = value
    assert _error(wb.check_whatif, doc, "w.json") == (f"w.json: {where}.{message} (rewrite it with "
                                                      "benchmarks/whatif_export.py)")


def test_the_loaders_say_what_the_path_is(tmp_path):
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    assert _error(hb.load_bands, tmp_path / "zero.json") == (f"{tmp_path}/zero.json: a device or socket; the held-out "
                                                             "bands must be a file")
    assert _error(wb.load_whatif, tmp_path / "zero.json") == (f"{tmp_path}/zero.json: a device or socket; the what-if "
                                                              "bands must be a file")
    assert _error(wb.load_whatif, tmp_path) == f"{tmp_path}: a directory, not a what-if bands file"
    assert _error(wb.load_whatif, tmp_path / "none.json") == f"{tmp_path}/none.json: no such file"
    kinds = copy.deepcopy(_bands())
    kinds["kinds"] = {"x" * 100_000: []}
    assert _error(hb.check_bands, kinds, "b.json") == (
        "b.json: kinds.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (100,000 characters): not a fold kind (GPU, family) "
        "(rewrite it with benchmarks/heldout_bands_export.py)")


def test_the_packaged_tables_still_load():
    assert hb.load_bands()["schema"] == hb.SCHEMA and wb.load_whatif()["schema"] in wb.SCHEMAS


# the readers that read a fold's params and errors raw check them first

@pytest.mark.parametrize("script, args", [("gptoss_ttft_terms", ("--kind", "GPU", "--group", "H100-SXM")),
                                          ("gpt_oss_tp8_prompt", ("--folds", "GPU:H100-SXM"))])
@pytest.mark.parametrize("field, value, message", [
    ("errors", [], "the fold holding 'H100-SXM' out has no errors object with names"),
    ("params", {"memory_efficiency": float("nan")}, "the fold holding 'H100-SXM' out: params 'memory_efficiency' is "
                                                    "nan, not a finite number")])
def test_raw_fold_readers_check_params_and_errors(tmp_path, script, args, field, value, message):
    doc = _report()
    doc["folds"]["GPU"]["folds"][0][field] = value
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), str(path), *args],
                         capture_output=True, text=True, timeout=120)
    assert "Traceback" not in res.stderr and res.returncode == 2
    assert res.stderr.strip().splitlines() == [f"error: {path}: {message}"]


def test_eval_window_reading_checks_the_errors_before_its_simulations(tmp_path):
    doc = _report()
    doc["folds"]["GPU"]["folds"][1]["errors"] = []
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "eval_window_reading.py"), "--report", str(path),
                          "--variants", "GPU:H100-SXM"], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in res.stderr and res.returncode == 2
    assert res.stderr.strip().splitlines() == [f"error: {path}: the fold holding 'B200' out has no errors object with "
                                               "names"]


def test_a_name_longer_than_a_path_may_be_is_one_line():
    name = "x" * 5000
    assert _error(fr.read_json, name).endswith("...: not a file name (longer than a path may be, or holding a NUL "
                                               "byte)")
    for load in (hb.load_bands, wb.load_whatif):
        assert _error(load, name) == ("'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (5,002 characters): not a file name "
                                      "(longer than a path may be, or holding a NUL byte)")
