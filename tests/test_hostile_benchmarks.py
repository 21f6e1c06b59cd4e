"""Hostile input to the older benchmark scripts (issue 33, round 18): each surface the round's fuzzing found a
traceback, a hang or a silent acceptance on is one exact ``TwinInputError`` (or argparse) line now. One test per
surface; exact messages."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark_module import load_benchmark
from twin.errors import TwinInputError

ROOT = Path(__file__).resolve().parents[1]
cli = load_benchmark("cli_checks")
fr = load_benchmark("fold_report")


def _error(call, *args, **kwargs) -> str:
    with pytest.raises(TwinInputError) as info:
        call(*args, **kwargs)
    return str(info.value)


def _write(tmp_path: Path, doc: object, name: str = "x.json") -> Path:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


@pytest.mark.parametrize("text, message", [
    ("1,nan", "--v '1,nan': 'nan' is not a finite number"),
    ("inf", "--v 'inf': 'inf' is not a finite number"),
    ("1,x", "--v '1,x': 'x' is not a number"),
    ("-1", "--v '-1': '-1': must be >= 0"),
    (",", "--v ',': expected one or more comma-separated numbers")])
def test_number_list_refuses_nan_inf_text_negative_and_nothing(text, message):
    assert _error(cli.number_list, text, "--v", low=0.0) == message


def test_number_list_and_bounded_types_read_good_values():
    assert cli.number_list("1, 2.5,,4", "--v") == [1.0, 2.5, 4.0]
    assert cli.number_list("", "--v", allow_empty=True) == []
    assert cli.number_list("4,16", "--c", whole=True, low=1) == [4, 16]
    assert _error(cli.number_list, "1.5", "--c", whole=True) == "--c '1.5': '1.5' is not a whole number"
    assert cli.positive_int("3") == 3 and cli.nonneg_float("0") == 0.0
    for parse, text in ((cli.positive_int, "0"), (cli.positive_float, "0"), (cli.finite_float, "nan"),
                        (cli.nonneg_int, "-1"), (cli.bounded(False, 0.0, high=1.0), "1.5")):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)


def test_silicon_ttft_split_prior_refuses_nan_and_a_name_twice():
    split = load_benchmark("silicon_ttft_split")
    assert split.parse_prior("a:memory_efficiency=0.9") == ("a", {"memory_efficiency": 0.9})
    assert _error(split.parse_prior, "a:memory_efficiency=nan") == \
        "--prior a: memory_efficiency='nan': expected a finite number"
    assert _error(split.parse_prior, "a:memory_efficiency=0.9,memory_efficiency=0.8") == \
        "--prior a: memory_efficiency: given twice"


def _case(**over) -> dict:
    case = {"name": "row-a", "source": "silicon", "errors": {"mean_tpot_ms": -0.1},
            "measured": {"mean_tpot_ms": 10.0}, "predicted": {"mean_tpot_ms": 9.0}}
    return case | over


@pytest.mark.parametrize("case, metrics, message", [
    (_case(measured={}), (), "errors.mean_tpot_ms without a measured.mean_tpot_ms"),
    (_case(predicted={"mean_tpot_ms": None}), (), "errors.mean_tpot_ms without a predicted.mean_tpot_ms"),
    (_case(), ("mean_ttft_ms",), "no errors.mean_ttft_ms"),
    (_case(measured={"mean_tpot_ms": -5.0}), (), "measured.mean_tpot_ms is -5.0, not a number >= 0")])
def test_defaults_cases_require_the_metrics_a_caller_indexes(tmp_path, case, metrics, message):
    path = _write(tmp_path, {"cases": [case]})
    assert message in _error(fr.defaults_cases, path, metrics=metrics)
    assert _error(fr.defaults_cases, path, metrics=metrics).startswith(f"{path}: case 0 ('row-a'): ")


def test_defaults_cases_keep_a_consistent_record(tmp_path):
    path = _write(tmp_path, {"cases": [_case()]})
    assert fr.defaults_cases(path, metrics=("mean_tpot_ms",))[0]["name"] == "row-a"


def test_fold_errors_require_the_metrics_a_caller_indexes():
    rep = fr.FoldReport({"folds": {"GPU": {"folds": [
        {"held_out": "B200", "params": {}, "errors": {"a": {"mean_tpot_ms": 0.1}, "b": {"mean_ttft_ms": 0.1}}}]}}},
        "r.json")
    fold = rep.fold("GPU", "B200")
    assert len(rep.errors(fold)) == 2
    assert _error(rep.errors, fold, ("mean_tpot_ms",)) == \
        "r.json: the fold holding 'B200' out: errors of 'b' have no mean_tpot_ms"


def test_an_empty_inference_perf_folder_is_one_line_naming_it(tmp_path):
    from twin.fitting.ground_truth import H100_FOLDER, h100_cases
    (tmp_path / H100_FOLDER / "not-an-experiment").mkdir(parents=True)
    assert _error(h100_cases, tmp_path) == (f"{tmp_path / H100_FOLDER}: no inference-perf experiment (a folder "
                                            "with an exp-config.yaml) in it")


TABLE_HEAD = "set,family,gpu,month,version,precision,gap_ms,prefill_ms,measured_ms,twin_ms,tpot_meas_ms,tpot_twin_ms," \
             "conc,isl,tp,layers\n"


@pytest.mark.parametrize("body, message", [
    ("", "no rows (a ttft_light_load.py --csv table)"),
    ("defaults,llama,B200,2026-03,0.10.2,fp8,1,2,3,4,5,6,4,1024,8\n", "line 2: no layers"),
    ("defaults,llama,B200,2026-03,0.10.2,fp8,nan,2,3,4,5,6,4,1024,8,80\n", "line 2: gap_ms 'nan' is not a finite"),
    ("defaults,llama,B200,2026-03,0.10.2,fp8,1,2,3,4,5,6,0,1024,8,80\n", "line 2: conc '0': must be >= 1")])
def test_light_table_defects_are_one_line(tmp_path, body, message):
    table = load_benchmark("light_table")
    head = TABLE_HEAD if "no layers" not in message else TABLE_HEAD.replace(",layers", "")
    path = _write(tmp_path, head + body if body else "", "t.csv")
    assert _error(table.read_table, path).startswith(f"{path}: {message}")


def test_light_table_refuses_an_oversized_field(tmp_path):
    table = load_benchmark("light_table")
    path = _write(tmp_path, "[" * 200000, "t.csv")                  # a csv.Error traceback before
    assert _error(table.read_table, path) == f"{path}: not a CSV table (field larger than field limit (131072))"


def test_light_table_reads_a_good_row(tmp_path):
    table = load_benchmark("light_table")
    path = _write(tmp_path, TABLE_HEAD + "defaults,llama,B200,2026-03,0.10.2,fp8,1.5,2,3,4,5,6,4,1024,8,80\n", "t.csv")
    row = table.read_table(path)[0]
    assert (row["gap_ms"], row["conc"], row["tp"], row["set"]) == (1.5, 4, 8, "defaults")


def test_saved_rows_and_llama_decode_runs_are_checked(tmp_path):
    saved = load_benchmark("saved_rows")
    good = {"tp": 2, "isl": 1024, "osl": 1024, "conc": 4, "mtpot": 10.0, "ptpot": 9.0, "mttft": 50.0, "pttft": 45.0}
    assert _error(saved.read_rows, _write(tmp_path, {"a": 1}), counts=("tp",)) == \
        f"{tmp_path / 'x.json'}: expected a non-empty list of rows (a --save file)"
    assert _error(saved.check_rows, [good | {"tp": True}], "f", counts=("tp",)) == \
        "f: row 0: tp is True, not a whole number >= 1 (a --save file)"
    decode = load_benchmark("llama_decode")
    path = _write(tmp_path, {"0.3": [good]})
    assert decode.read_runs(path) == {0.3: [good]}
    path = _write(tmp_path, '{"0.3": [{"tp": 2, "isl": 1, "osl": 1, "conc": 1, "mtpot": 1, "ptpot": 1, "mttft": 1, '
                            '"pttft": NaN}]}')
    assert _error(decode.read_runs, path) == f"{path}: '0.3': row 0: pttft is nan, not a finite number > 0 (a --save file)"
    assert _error(decode.read_runs, _write(tmp_path, {"2": [good]})) == f"{path}: key '2': '2': must be <= 1"


def test_bench_path_pull_reads_through_the_checked_reader(tmp_path):
    pull = load_benchmark("bench_path_pull")
    path = _write(tmp_path, "[" * 100000 + "]" * 100000)        # a RecursionError traceback before
    assert _error(pull.main, [str(path)]) == f"{path}: JSON nested too deeply; at most 64 levels"
    with pytest.raises(SystemExit):
        pull.main([str(path), "--max-conc", "0"])


def test_cold_start_probe_and_first_wave_rows_are_checked():
    stalls = load_benchmark("cold_start_stalls")
    stalls.check_probes("2048:0.5,4096:itl")
    for bad in ("2048", "x:1", "2048:nan", "0:1"):
        assert _error(stalls.check_probes, bad).startswith(f"--probe-stall {bad!r}: expected THRESHOLD:SECONDS")
    wave = load_benchmark("gptoss_first_wave")
    assert wave.parse_rows("1024x1024x4x1") == [(1024, 1024, 4, 1)]
    assert _error(wave.parse_rows, "1024x1024x4").startswith("--rows '1024x1024x4': expected ISLxOSLxCONCxTP")


def test_a_script_prints_a_missing_metric_as_one_line(tmp_path):
    path = _write(tmp_path, {"cases": [_case(measured={}) | {"gpu": "B200", "family": "kimi", "tp": 8, "ep": 0,
                                                              "dp": 1, "isl": 1024, "osl": 1024, "conc": 4}]})
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "decode_slices.py"), str(path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2
    assert res.stderr == (f"error: {path}: case 0 ('row-a'): errors.mean_tpot_ms without a measured.mean_tpot_ms "
                          "(make it with fidelity_real.py --defaults-only --json)\n")


@pytest.mark.parametrize("script, flag", [("fidelity_real.py", "--json"), ("silicon_ttft_split.py", "--save")])
def test_an_output_path_that_is_a_folder_is_one_line_before_the_work(tmp_path, script, flag):
    args = [str(tmp_path / "r.json")] if script == "silicon_ttft_split.py" else []
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args, flag, str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2
    assert res.stderr == f"error: {flag} {tmp_path}: a directory\n"
