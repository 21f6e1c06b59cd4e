"""benchmarks/fold_report.py (issue 33, round 16): the one validated reader of a ``fidelity_real.py --json`` report's
folds; every defect is one exact ``TwinInputError`` line naming the file, and a script prints it without a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark_module import load_benchmark
from twin.errors import TwinInputError

fr = load_benchmark("fold_report")

ROOT = Path(__file__).resolve().parents[1]


def _folds() -> dict:
    return {"GPU": {"folds": [
        {"held_out": "H100-SXM", "params": {"step_overhead_s": 1.5e-3, "memory_efficiency": 0.93, "n_layers": 2},
         "std": {"step_overhead_s": 1e-4, "memory_efficiency": None},
         "identification": {"memory_efficiency": "not identified, held at its prior"},
         "errors": {"case-a": {"mean_ttft_ms": -0.25, "mean_tpot_ms": 0.125}}},
        {"held_out": "B200", "params": {"step_overhead_s": 2e-3}, "errors": {}}]},
        "family": {"folds": [{"held_out": "kimi", "params": {}}]}}


def _write(tmp_path, doc: object, name: str = "r.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _error(call, *args) -> str:
    with pytest.raises(TwinInputError) as info:
        call(*args)
    return str(info.value)


def test_a_fold_is_read_exactly(tmp_path):
    path = _write(tmp_path, {"args": {}, "folds": _folds()})
    rep = fr.load_report(path)
    assert rep.kinds() == ["GPU", "family"]
    assert [f["held_out"] for f in rep.folds("GPU")] == ["H100-SXM", "B200"]
    h100 = rep.fold("GPU", "H100-SXM")
    params = rep.params(h100)
    assert params == {"step_overhead_s": 1.5e-3, "memory_efficiency": 0.93, "n_layers": 2}
    assert type(params["n_layers"]) is int                         # values come back as the file has them
    params["step_overhead_s"] = 9.0                                 # a copy: the report is unchanged
    assert rep.data["folds"]["GPU"]["folds"][0]["params"]["step_overhead_s"] == 1.5e-3
    assert rep.std(h100) == {"step_overhead_s": 1e-4, "memory_efficiency": None}
    assert rep.identification(h100) == {"memory_efficiency": "not identified, held at its prior"}
    assert rep.identification(rep.fold("GPU", "B200")) == {}       # a report that does not say
    assert rep.errors(h100) == {"case-a": {"mean_ttft_ms": -0.25, "mean_tpot_ms": 0.125}}
    assert fr.fold_params(path, "GPU", "B200") == {"step_overhead_s": 2e-3}
    with pytest.raises(TwinInputError, match="the fold holding 'kimi' out has no parameters"):
        fr.fold_params(path, "family", "kimi")                      # an empty fit is refused (round 18)


@pytest.mark.parametrize("text, what", [
    ("", ":1: not valid JSON (Expecting value)"),
    ('{"folds": ', ":1: not valid JSON (Expecting value)"),
    ('{"folds": {},\n "folds": {}}', ": key 'folds' appears twice in one object; each key once"),
    ("[1, 2]", ": a JSON list, not an object (a fidelity_real.py --json report)"),
    ('{"cases": []}', ": no folds (make it with fidelity_real.py --folds ... --json)"),
    ('{"folds": {}}', ": no folds (make it with fidelity_real.py --folds ... --json)"),
    ('{"folds": {"GPU": []}}', ": folds['GPU'] has no list of folds"),
    ('{"folds": {"GPU": {"pooled": {}}}}', ": folds['GPU'] has no list of folds"),
    ('{"folds": {"GPU": {"folds": [{"params": {}}]}}}', ": GPU fold 0 is not an object with a held_out name"),
    ('{"folds": {"GPU": {"folds": [{"held_out": 3}]}}}', ": GPU fold 0 is not an object with a held_out name"),
])
def test_a_bad_file_is_one_exact_line(tmp_path, text, what):
    path = _write(tmp_path, text)
    assert _error(fr.load_report, path) == f"{path}{what}"


def test_a_missing_oversized_or_non_utf8_file_is_one_exact_line(tmp_path, monkeypatch):
    missing = tmp_path / "none.json"
    assert _error(fr.load_report, missing) == f"{missing}: no such file"
    assert _error(fr.load_report, tmp_path) == f"{tmp_path}: a directory, not a file"    # a folder is not a report
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"x": "\xe9"}')
    assert _error(fr.load_report, latin) == f"{latin}:1: not UTF-8 text (byte 0xe9); save the file as UTF-8"
    big = _write(tmp_path, {"folds": _folds()}, "big.json")
    monkeypatch.setattr(fr, "MAX_REPORT_BYTES", 10)
    assert _error(fr.load_report, big) == f"{big}: {big.stat().st_size:,} bytes; a report may be at most 10 bytes"


def test_an_absent_fold_is_one_exact_line(tmp_path):
    path = _write(tmp_path, {"folds": _folds()})
    rep = fr.load_report(path)
    assert _error(rep.folds, "source") == f"{path}: no source folds (it has: GPU, family)"
    assert _error(rep.fold, "GPU", "A100") == f"{path}: no GPU fold holds 'A100' out (held out: H100-SXM, B200)"
    assert _error(fr.fold_params, path, "family", "llama") == \
        f"{path}: no family fold holds 'llama' out (held out: kimi)"


@pytest.mark.parametrize("fold, call, what", [
    ({"params": {"a": "1.0"}}, "params", "the fold holding 'g' out: params 'a' is '1.0', not a finite number"),
    ({"params": {"a": True}}, "params", "the fold holding 'g' out: params 'a' is True, not a finite number"),
    ({"params": {"a": None}}, "params", "the fold holding 'g' out: params 'a' is None, not a finite number"),
    ({"params": {"a": float("nan")}}, "params", "the fold holding 'g' out: params 'a' is nan, not a finite number"),
    ({"params": {"a": float("inf")}}, "params", "the fold holding 'g' out: params 'a' is inf, not a finite number"),
    ({"params": [1.0]}, "params", "the fold holding 'g' out has no params object with names"),
    ({}, "params", "the fold holding 'g' out has no params object with names"),
    ({"std": {"a": "x"}}, "std", "the fold holding 'g' out: std 'a' is 'x', not a finite number"),
    ({"identification": {"a": 1}}, "identification",
     "the fold holding 'g' out: an identification that is not a string"),
    ({}, "errors", "the fold holding 'g' out has no errors object with names"),
    ({"errors": {"c": {"mean_ttft_ms": None}}}, "errors",
     "the fold holding 'g' out: errors of 'c' 'mean_ttft_ms' is None, not a finite number"),
    ({"errors": {"c": [0.1]}}, "errors", "the fold holding 'g' out has no errors of 'c' object with names"),
])
def test_a_bad_value_is_one_exact_line(tmp_path, fold, call, what):
    path = tmp_path / "r.json"            # json writes nan and inf as NaN and Infinity, and reads them back
    path.write_text(json.dumps({"folds": {"GPU": {"folds": [{"held_out": "g", **fold}]}}}))
    rep = fr.load_report(path)
    assert _error(getattr(rep, call), rep.fold("GPU", "g")) == f"{path}: {what}"


def test_a_parsed_report_names_its_source():
    hint = "no folds (make it with fidelity_real.py --folds ... --json)"
    assert _error(fr.FoldReport, {"cases": []}) == f"the report: {hint}"
    assert _error(fr.FoldReport, [], "x.json") == f"x.json: {hint}"
    rep = fr.FoldReport({"folds": {"GPU": {"folds": [{"held_out": "g", "params": {1: 2.0}}]}}}, "y.json")
    assert _error(rep.params, rep.fold("GPU", "g")) == \
        "y.json: the fold holding 'g' out has no params object with names"


def test_a_script_prints_the_line_without_a_traceback(tmp_path):
    path = _write(tmp_path, '{"folds": {"GPU": {"folds": [{"held_out": "B200", "params": {"a": "x"}}]}}}')
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "transfer_readings.py"), str(path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2
    assert res.stderr == f"error: {path}: the fold holding 'B200' out: params 'a' is 'x', not a finite number\n"


def _record(name: str = "row-a", **over) -> dict:
    rec = {"name": name, "source": "silicon", "gpu": "B200", "family": "kimi", "moe": True, "conc": 4, "tp": 8,
           "client": True, "version": None, "errors": {"mean_ttft_ms": -0.1},
           "measured": {"mean_ttft_ms": 50.0, "request_throughput": None},
           "predicted": {"mean_ttft_ms": 45.0, "completed": 10, "slo_met": {}, "window": None}}
    return rec | over


def test_defaults_cases_reads_valid_records_and_requires_what_is_needed(tmp_path):
    path = _write(tmp_path, {"cases": [_record(), _record("row-b", conc=None)]})
    assert [c["name"] for c in fr.defaults_cases(path)] == ["row-a", "row-b"]
    no_errors = {k: v for k, v in _record().items() if k != "errors"}
    path = _write(tmp_path, {"cases": [no_errors]})
    assert len(fr.defaults_cases(path)) == 1
    assert _error(fr.defaults_cases, path, ("errors",)) == (
        f"{path}: case 0 ('row-a'): no errors (make it with fidelity_real.py --defaults-only --json)")


@pytest.mark.parametrize("doc, message", [
    ({"folds": {}}, "no list of cases (make it with fidelity_real.py --defaults-only --json)"),
    ({"cases": []}, "no list of cases (make it with fidelity_real.py --defaults-only --json)"),
    ({"cases": [[1]]}, "case 0: not an object with a name (make it with fidelity_real.py --defaults-only --json)"),
    ({"cases": [_record(), _record()]}, "case 1: the name 'row-a' is given twice"),
    ({"cases": [_record(errors={"mean_ttft_ms": None})]}, "case 0 ('row-a'): errors.mean_ttft_ms is None, not a "
                                                          "finite number"),
    ({"cases": [_record(measured={"mean_ttft_ms": "50"})]}, "measured.mean_ttft_ms is '50', not a finite number"),
    ({"cases": [_record(predicted={"completed": True})]}, "predicted.completed is True, not a finite number"),
    ({"cases": [_record(measured=[50.0])]}, "case 0 ('row-a'): measured is not an object"),
    ({"cases": [_record(conc=4.5)]}, "conc is 4.5, not a whole number >= 0"),
    ({"cases": [_record(tp=-1)]}, "tp is -1, not a whole number >= 0"),
    ({"cases": [_record(gpu=7)]}, "gpu is 7, not text"),
    ({"cases": [_record(client="yes")]}, "client is 'yes', not true or false")])
def test_defaults_cases_defects_are_one_line_naming_the_file_case_and_field(tmp_path, doc, message):
    path = _write(tmp_path, doc)
    assert _error(fr.defaults_cases, path).endswith(message)
    assert _error(fr.defaults_cases, path).startswith(f"{path}: ")


def test_defaults_cases_refuses_non_finite_numbers_and_a_directory(tmp_path):
    path = _write(tmp_path, '{"cases": [{"name": "a", "measured": {"mean_ttft_ms": Infinity}}]}')
    assert _error(fr.defaults_cases, path) == f"{path}: case 0 ('a'): measured.mean_ttft_ms is inf, not a finite number"
    assert _error(fr.defaults_cases, tmp_path) == f"{tmp_path}: a directory, not a file"


def test_defaults_cases_row_need_asks_each_server_row_for_a_value_not_the_inference_perf_runs(tmp_path):
    unscoped = {"name": "run-a", "source": "inference-perf", "gpu": "H100", "family": "llama", "errors": {}}
    path = _write(tmp_path, {"cases": [_record(), unscoped]})
    assert len(fr.defaults_cases(path, row_need=("gpu", "tp"))) == 2
    assert _error(fr.defaults_cases, path, (), ("gpu", "isl")) == (
        f"{path}: case 0 ('row-a'): no isl (a server row's attribute) (make it with fidelity_real.py --defaults-only "
        "--json)")
    path = _write(tmp_path, {"cases": [_record(tp=None)]})
    assert _error(fr.defaults_cases, path, (), ("tp",)).startswith(f"{path}: case 0 ('row-a'): no tp ")
