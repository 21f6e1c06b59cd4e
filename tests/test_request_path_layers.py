"""The per-layer request path (issue 33, round 17: ``request_path_layer_s``, twin.fitting.path_layers) and the
structure screen (benchmarks/request_path_structure.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark_module import load_benchmark
from test_fitting_clients import _run as clients_run
from twin.errors import TwinInputError
from twin.fitting.joint import default_start
from twin.fitting.measured_run import MeasuredRun
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.fit import Case
from twin.fitting.identify import held_at_prior
from twin.fitting.path_layers import BASE_S, TERM, covers, layer_path_s, split_kwargs
from twin.fitting.replay import Target, cost_model_for, deployment_for, replay
from twin.fitting.surrogate import Surrogate

S = load_benchmark("request_path_structure")
BENCH = f"{TERM}@client_vllm_bench"


def _run(name: str, client: str | None, conc: int = 1) -> MeasuredRun:
    return clients_run(name, client, conc, requests_per_user=8, output_tokens=16)


def test_the_terms_are_fit_parameters_with_prior_zero():
    for name in (TERM, BENCH):
        p = PARAMETERS_BY_NAME[name]
        assert p.prior == 0.0 and p.scale == 1e-6 and p.lower == 0.0


def test_the_path_grows_by_the_models_decoder_layers_on_the_scoped_runs_only():
    target = Target("llama-2-7b", "H100-SXM", 1)         # 32 decoder layers
    bench, iperf = (deployment_for(_run(n, c), target) for n, c in (("a", "vllm-bench"), ("b", "inference-perf")))
    params = {"request_path_s": 5e-3, BENCH: 100e-6}
    # a covered run: the embedded path (4.8 ms, not the fold's request_path_s) + 32 layers x 100 us
    assert cost_model_for(bench, target, params).request_path_s == pytest.approx(BASE_S + 32 * 100e-6)
    assert cost_model_for(iperf, target, params).request_path_s == pytest.approx(5e-3)
    assert BASE_S == 4.8e-3 and layer_path_s(1e-4, "llama-2-70b") == pytest.approx(4.8e-3 + 80e-4)
    assert split_kwargs({"a": 1, TERM: 2.0}) == ({"a": 1}, 2.0) and split_kwargs({"a": 1}) == ({"a": 1}, None)
    assert covers([BENCH], bench) and not covers([BENCH], iperf) and covers([TERM], iperf)
    assert not covers(["request_path_s@client_vllm_bench"], bench)


def test_the_covered_runs_do_not_identify_the_unscoped_path():
    target = Target("llama-2-7b", "H100-SXM", 1)
    bench_only = [Case(_run("a", "vllm-bench"), target)]
    assert held_at_prior(bench_only, ["request_path_s", BENCH]) == {
        "request_path_s": "no run in the data"}
    assert held_at_prior(bench_only, ["request_path_s"]) == {}
    mixed = bench_only + [Case(_run("b", "inference-perf"), target)]
    assert held_at_prior(mixed, ["request_path_s", BENCH]) == {}


def test_a_negative_value_is_a_one_line_error():
    with pytest.raises(Exception) as exc:
        layer_path_s(-1e-6, "llama-2-7b")
    assert TERM in str(exc.value) and "\n" not in str(exc.value)


def test_the_surrogate_moves_ttft_by_the_per_layer_path_exactly_at_light_load():
    """One request at a time: the added per-request delay is the TTFT's move, in a re-simulation and in the
    fit's surrogate alike (4.8 ms - the default path 4.8 ms + 32 layers x 200 us = 6.4 ms)."""
    target = Target("llama-2-7b", "H100-SXM", 1)
    run = _run("c", "vllm-bench")
    dep = deployment_for(run, target)
    base = default_start()
    new = {**base, BENCH: 200e-6}
    at_base = replay(run, target, base, deployment=dep)
    moved = replay(run, target, new, deployment=dep).metrics["mean_ttft_ms"] - at_base.metrics["mean_ttft_ms"]
    surrogate = Surrogate(run, target, dep, at_base, base)
    predicted = surrogate.predict(new)["mean_ttft_ms"] - at_base.metrics["mean_ttft_ms"]
    assert moved == pytest.approx(6.4, abs=0.05) and predicted == pytest.approx(6.4, abs=1e-6)


def _case(name, family, source, pred, meas, isl=1000, osl=1000, model="meta-llama/Llama-3.1-70B", conc=4):
    return {"name": name, "source": source, "family": family, "client": source == "silicon", "conc": conc,
            "model": model, "measured": {"mean_ttft_ms": meas},
            "predicted": {"mean_ttft_ms": pred, "completed": 10, "total_input_tokens": 10 * isl,
                          "total_output_tokens": 10 * osl}}


def test_the_screen_recovers_a_per_layer_shift_and_scores_the_held_family(tmp_path):
    """Rows missing exactly 0.1 ms per decoder layer: the per-layer structure fits 10 ms per 100 layers and
    scores the held-out family at 0 error; the constant one cannot."""
    models = {"llama": ("meta-llama/Llama-3.1-70B", 80), "gpt-oss": ("openai/gpt-oss-120b", 36),
              "kimi": ("moonshotai/Kimi-K2.5", 61), "minimax": ("MiniMaxAI/MiniMax-M2.5", 62)}
    cases = [_case(f"{f}{i}", f, "silicon", 50.0 + i, 50.0 + i + 0.1 * layers, model=m)
             for f, (m, layers) in models.items() for i in range(3)]
    cases.append(_case("run-llama-2-7b/stage0", "llama", "inference-perf", 20.0, 20.0, model=None))
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"cases": cases}))
    loaded = S.load(path)
    assert loaded[-1]["_features"]["layers_per_100"] == pytest.approx(0.32)
    held = {label: (train, held) for label, train, held in S.folds(loaded, 64)}
    train, rows = held["family gpt-oss"]
    coef = S.fit(train, S.STRUCTURES["layers"])
    assert coef[0] == pytest.approx(10.0, rel=1e-4)
    assert S.score(rows, S.STRUCTURES["layers"], coef)[0] == pytest.approx(0.0, abs=1e-6)
    assert S.score(rows, S.STRUCTURES["constant"], S.fit(train, S.STRUCTURES["constant"]))[0] > 0.01
    assert len(held["source silicon"][0]) == 1 and len(held["source silicon"][1]) == 12


def _one_line(call, *args) -> str:
    with pytest.raises(TwinInputError) as exc:
        call(*args)
    assert "\n" not in str(exc.value)
    return str(exc.value)


def test_the_screen_rejects_bad_input(tmp_path):
    """Every defect of the defaults file is one line naming the file and the field (fold_report.defaults_cases)."""
    def write(name, doc):
        path = tmp_path / name
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        return path

    good = _case("llama0", "llama", "silicon", 50.0, 60.0)
    for doc, message in (
            ("[1]", "a JSON list, not an object"), ("", "not valid JSON"), ("{", "not valid JSON"),
            ("[" * 200 + "]" * 200, "levels deep; at most 64"), ({"cases": {}}, "no list of cases"),
            ({"cases": []}, "no list of cases"), ({"cases": [1]}, "case 0: not an object with a name"),
            ({"cases": [{k: v for k, v in good.items() if k != "measured"}]}, "case 0 ('llama0'): no measured"),
            ({"cases": [good, good]}, "the name 'llama0' is given twice"),
            ({"cases": [{**good, "measured": {"mean_ttft_ms": "60"}}]}, "measured.mean_ttft_ms is '60', not a finite"),
            ({"cases": [{**good, "conc": "4"}]}, "conc is '4', not a whole number >= 0"),
            ({"cases": [{**good, "conc": True}]}, "conc is True, not a whole number >= 0"),
            ({"cases": [{**good, "conc": -1}]}, "conc is -1, not a whole number >= 0"),
            ({"cases": [{**good, "family": 3}]}, "family is 3, not text"),
            ({"cases": [{**good, "predicted": [1]}]}, "predicted is not an object"),
            ({"cases": [{**good, "measured": {"mean_ttft_ms": -5.0}}]}, "mean_ttft_ms is -5.0, not a number >= 0"),
            ({"cases": [{**good, "predicted": {"mean_ttft_ms": 50.0}}]}, "no completed request in the twin's run"),
            ({"cases": [{**good, "measured": {"mean_ttft_ms": None}}]}, "no case with a measured and a predicted"),
            ({"cases": [{**good, "model": "no-such-model"}]}, "llama0: model: ")):
        path = write("bad.json", doc)
        assert _one_line(S.load, path).startswith(f"{path}:"), doc
        assert message in _one_line(S.load, path), doc
    nan = write("nan.json", '{"cases": [{"name": "a", "measured": {"mean_ttft_ms": NaN}, "predicted": {}}]}')
    assert "measured.mean_ttft_ms is nan, not a finite number" in _one_line(S.load, nan)
    assert _one_line(S.load, tmp_path / "missing.json") == f"{tmp_path / 'missing.json'}: no such file"
    assert _one_line(S.load, tmp_path) == f"{tmp_path}: a directory, not a file"
    non_utf8 = tmp_path / "latin1.json"
    non_utf8.write_bytes(b'{"cases": "\xff"}')
    assert "not UTF-8 text" in _one_line(S.load, non_utf8)
    with pytest.raises(TwinInputError, match="no model named in the run name"):
        S.layers_of({"name": "unknown-run", "model": None})
    odd = write("odd.json", {"cases": [_case("unknown-run", "llama", "inference-perf", 1.0, 1.0, model=None)]})
    assert "no model named in the run name" in _one_line(S.load, odd)
    no_conc = write("no_conc.json", {"cases": [{**good, "conc": None}]})
    assert "a bench-client row without its conc or family" in _one_line(S.folds, S.load(no_conc), 10)
    assert _one_line(S.main, [str(odd), "--max-conc", "0"]) == "--max-conc 0: must be >= 1"


def test_the_screen_script_prints_one_line_and_exits_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"cases": [{"name": "a", "measured": {"mean_ttft_ms": "x"}, "predicted": {}}]}')
    done = subprocess.run([sys.executable, str(Path(S.__file__)), str(bad)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {bad}: case 0 ('a'): measured.mean_ttft_ms is 'x', not a finite number"
