"""Hostile input, second pass (issue 33, round 18): the speed and GPU micro-benchmarks' counts, options that cannot
apply in the mode a command line chose, and the round-18 scripts' report readers. Each is one exact line now (an
argparse ``error:`` or a ``TwinInputError``); no test simulates anything."""

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


def _last_line(script: str, *args: str) -> tuple[int, str]:
    """The exit status and the last stderr line of ``benchmarks/script`` run with ``args``."""
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), *args],
                         capture_output=True, text=True, timeout=120)
    assert "Traceback" not in res.stderr, res.stderr
    return res.returncode, res.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("script, args, message", [
    ("cost_model_speed", ("--repeats", "-1"), "argument --repeats: '-1': must be >= 1"),
    ("cost_model_speed", ("--calls", "0"), "argument --calls: '0': must be >= 1"),
    ("sweep_speed", ("--workers", "0"), "argument --workers: '0': must be >= 1"),
    ("bench_client_path", ("--tpot-ms", "nan"), "argument --tpot-ms: 'nan' is not a finite number"),
    ("bench_client_path", ("--port", "70000"), "argument --port: '70000': must be <= 65535"),
    ("bench_client_path", ("--requests", "-1"), "argument --requests: '-1': must be >= 0"),
    ("spec_random_tokens", ("--host-op-us", "inf"), "argument --host-op-us: 'inf' is not a finite number")])
def test_micro_benchmark_counts_are_checked(script, args, message):
    rc, line = _last_line(script, *args)
    assert rc == 2 and line == f"{script}.py: error: {message}"


@pytest.mark.parametrize("script, args, message", [
    ("eager_host_prior", ("--layers", "0"), "argument --layers: '0': must be >= 1"),
    ("spec_host_bookkeeping", ("--seqs", "-1"), "argument --seqs: '-1': must be >= 1"),
    ("spec_host_bookkeeping", ("--k", "5000"), "argument --k: '5000': must be <= 3888")])
def test_gpu_micro_benchmark_counts_are_checked(script, args, message):
    pytest.importorskip("torch")
    rc, line = _last_line(script, *args)
    assert rc == 2 and line == f"{script}.py: error: {message}"


def test_bench_client_path_checks_its_output_before_the_work(tmp_path):
    rc, line = _last_line("bench_client_path", "--json", str(tmp_path / "no" / "x.json"))
    assert rc == 2 and line == f"error: --json {tmp_path / 'no' / 'x.json'}: folder {tmp_path / 'no'} does not exist"


def test_refuse_given_names_the_options_given():
    ns = argparse.Namespace(kind=None, group="x", sim_s=5.0)
    cli.refuse_given(argparse.Namespace(kind=None), ("--kind",), "to 'rows'")       # nothing given: no error
    with pytest.raises(TwinInputError, match=r"^--group: applies to 'rows' only$"):
        cli.refuse_given(ns, ("--kind", "--group"), "to 'rows'")
    with pytest.raises(TwinInputError, match=r"^--group, --sim-s: apply with --report only$"):
        cli.refuse_given(ns, ("--kind", "--group", "--sim-s"), "with --report")


@pytest.mark.parametrize("script, args, message", [
    ("layer_token_owner", ("facts", "--group", "B200"), "--group: applies to 'rows' only"),
    ("layer_token_owner", ("facts", "--kind", "GPU", "--sim-s", "5"), "--kind, --sim-s: apply to 'rows' only"),
    ("prefill_attention", ("reading", "--every", "3"), "--every: applies to 'rows' only"),
    ("prefill_attention", ("rows", "--kind", "GPU"), "--kind: applies with --report only"),
    ("llama_b200_levers", ("--group", "B200"), "--group: applies with --report only"),
    ("llama_b200_levers", ("--bytes-bound", "--report", "x.json"), "--bytes-bound takes no --report"),
    ("frontend_ceiling", ("--match", "llama"), "--match: applies with --simulate only"),
    ("unseen_generation", ("plans", "--host-ms", "1"), "--host-ms: applies to ip-floor only")])
def test_an_option_that_cannot_apply_is_one_line(script, args, message):
    rc, line = _last_line(script, *args)
    assert rc == 2 and line == f"error: {message}"


def _report(tmp_path: Path, fold: dict, **top) -> Path:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"folds": {"family": {"folds": [{"held_out": "gpt-oss", **fold},
                                                               {"held_out": "kimi", **fold}]}}, **top}))
    return path


def test_silicon_every_is_read_and_checked():
    report = lambda args: fr.FoldReport({"folds": {"family": {"folds": []}}, **args}, "r.json")
    assert report({}).silicon_every(16) == 16 and report({"args": {"silicon_every": 3}}).silicon_every(16) == 3
    for args, message in (({"args": []}, "args is a JSON list, not an object"),
                          ({"args": {"silicon_every": 0}}, "args.silicon_every is 0, not a whole number >= 1"),
                          ({"args": {"silicon_every": True}}, "args.silicon_every is True, not a whole number >= 1")):
        with pytest.raises(TwinInputError, match=f"^r.json: {message}"):
            report(args).silicon_every(16)


def test_round_18_report_readers_are_one_line(tmp_path):
    path = _report(tmp_path, {"params": {"memory_efficiency": 0.9}})
    rc, line = _last_line("gptoss_token_frame", str(path))        # a fold without errors: was a KeyError
    assert rc == 2 and line == f"error: {path}: the fold holding 'gpt-oss' out has no errors object with names"
    path = _report(tmp_path, {"params": {"memory_efficiency": 0.9}, "errors": {}}, args=[])
    rc, line = _last_line("family_thr_terms", str(path), "--group", "kimi")
    assert rc == 2 and line == f"error: {path}: args is a JSON list, not an object (the options it was made with)"


@pytest.mark.parametrize("doc, message", [
    ({"cases": [], "errors": {"fold": []}}, "cases is not a non-empty list of case names"),
    ({"cases": [1], "errors": {"fold": [{}]}}, "cases is not a non-empty list of case names"),
    ({"cases": ["a"], "errors": {"fold": [{"mean_tpot_ms": None}]}}, "variant 'fold' has an error that is not a "
                                                                       "finite number"),
    ({"cases": ["a"], "errors": {"fold": [{"mean_tpot_ms": "x"}]}}, "variant 'fold' has an error that is not a "
                                                                      "finite number")])
def test_silicon_decode_rank_reads_a_save_checked(tmp_path, doc, message):
    rank = load_benchmark("silicon_decode_rank")
    path = tmp_path / "save.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TwinInputError, match=f"^{path}: {message}$"):
        rank.print_rank(path)


def test_silicon_decode_rank_checks_save_before_the_work(tmp_path):
    rc, line = _last_line("silicon_decode_rank", "run", str(tmp_path / "r.json"), "--save", str(tmp_path))
    assert rc == 2 and line == f"error: --save {tmp_path}: a directory"
