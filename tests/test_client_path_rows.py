"""Which training rows identify the bench client's path in a fold (issue 33, round 18: twin.fitting.client_path_rows)
and the screen of those rules (benchmarks/client_fit_screen.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmark_module import load_benchmark
from twin.fitting.client_path_rows import BENCH_PATH, LIGHT_CONC, check_rule, light_bench, light_identified_path
from twin.fitting.fit import Case
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.replay import Target

SCREEN = load_benchmark("client_fit_screen")


def _case(name: str, client: str | None, conc: int) -> Case:
    run = MeasuredRun(name=name, source="test", num_requests=8 * conc, rate_per_s=float("inf"), max_concurrency=conc,
                      prompt_tokens=LengthSample.constant(256), output_tokens=LengthSample.constant(16),
                      metrics={"completed": 1.0}, experiment=name, client=client)
    return Case(run, Target("llama-2-7b", "H100-SXM", 1))


def test_light_rows_are_bench_rows_at_most_light_conc_users():
    assert LIGHT_CONC == 8
    assert light_bench(_case("a", "vllm-bench", 8)) and light_bench(_case("b", "vllm-bench", 1))
    assert not light_bench(_case("c", "vllm-bench", 9))
    assert not light_bench(_case("d", "inference-perf", 4)) and not light_bench(_case("e", None, 4))


def _recorder(value: float):
    calls = []

    def fit_fn(cases, **kw):
        calls.append((cases, kw))
        return SimpleNamespace(params={**kw["fixed"], BENCH_PATH: value})
    return calls, fit_fn


def test_rule_light_fits_the_path_alone_on_the_light_rows_at_the_start():
    cases = [_case("light", "vllm-bench", 4), _case("loaded", "vllm-bench", 64), _case("perf", "inference-perf", 2)]
    first = ["sim-light", "sim-loaded", "sim-perf"]
    start = {BENCH_PATH: 4.8e-3, "step_overhead_s": 2e-3}
    calls, fit_fn = _recorder(9e-3)
    got = light_identified_path("light", cases, first, (BENCH_PATH, "step_overhead_s"), start, {"x": 1.0},
                                {BENCH_PATH: 4.8e-3}, fit_fn, max_sim_s=30.0, workers=1, seed=0)
    assert got == {BENCH_PATH: 9e-3}
    (fitted, kw), = calls
    assert [c.run.name for c in fitted] == ["light"] and kw["first"] == ["sim-light"]
    assert kw["names"] == (BENCH_PATH,) and kw["outer_iterations"] == 1 and kw["final_simulation"] is False
    # the other fitted terms sit at the fold's start (where ``first`` was simulated), the fixed ones stay
    assert kw["fixed"] == {"x": 1.0, "step_overhead_s": pytest.approx(2e-3)}
    assert kw["max_sim_s"] == 30.0 and kw["priors"] == {BENCH_PATH: 4.8e-3}


@pytest.mark.parametrize("rule, names, conc", [("all", (BENCH_PATH,), 4), ("light", ("step_overhead_s",), 4),
                                               ("light", (BENCH_PATH,), 16)])
def test_no_change_for_rule_all_an_unfitted_path_or_no_light_row(rule, names, conc):
    calls, fit_fn = _recorder(9e-3)
    assert light_identified_path(rule, [_case("a", "vllm-bench", conc)], ["s"], names, {}, {}, {}, fit_fn) == {}
    assert calls == []


def test_an_unknown_rule_is_a_one_line_error():
    assert check_rule("light") == "light"
    with pytest.raises(ValueError, match="one of all, light"):
        light_identified_path("dense", [], [], (BENCH_PATH,), {}, {}, {}, None)


def _row(name, family, gpu, conc, pred, meas, moe=True):
    return {"name": name, "source": "silicon", "client": True, "family": family, "gpu": gpu, "conc": conc,
            "moe": moe, "model": "openai/gpt-oss-120b",
            "predicted": {"mean_ttft_ms": pred, "completed": 10, "total_input_tokens": 10240,
                          "total_output_tokens": 10240},
            "measured": {"mean_ttft_ms": meas}, "errors": {"mean_ttft_ms": pred / meas - 1}}


def test_the_screen_fits_each_rule_on_its_training_rows_and_scores_every_held_out_row():
    cases = [_row("k-light", "kimi", "B200", 4, 50.0, 55.0), _row("k-loaded", "kimi", "B200", 64, 100.0, 130.0),
             _row("g-light", "gpt-oss", "H100-SXM", 4, 40.0, 42.0), _row("g-loaded", "gpt-oss", "B200", 64, 80, 84)]
    for c in cases:
        c["_features"] = {"one": 1.0}
    rows = {(label, rule): (n, shift, a, s) for label, rule, n, shift, a, s in SCREEN.screen(cases, 8, 0.1)}
    n, shift, a, s = rows[("family gpt-oss", "light (CONC <= 8)")]
    assert n == 1 and shift == pytest.approx(5.0, abs=1e-4)          # kimi's light row alone: 50 + 5 = 55
    assert a == pytest.approx(0.5 * (45 / 42 - 1 + 85 / 84 - 1), rel=1e-4)   # both held-out rows, median of two
    n, shift, _, _ = rows[("family gpt-oss", "all (the folds' rule)")]
    assert n == 2 and shift > 5.0
    assert rows[("family gpt-oss", "dense")][1] is None            # no dense training row


def test_the_screen_cli_rejects_bad_options(tmp_path: Path):
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "client_fit_screen.py"
    f = tmp_path / "d.json"
    f.write_text(json.dumps({"cases": []}))
    for opts in (["--light-conc", "0"], ["--path-share", "0"], ["--path-share", "nan"]):
        r = subprocess.run([sys.executable, str(script), str(f), *opts], capture_output=True, text=True)
        assert r.returncode != 0 and "Traceback" not in r.stderr, opts


@pytest.mark.parametrize("rule, names, conc", [("all", (BENCH_PATH,), 4), ("light", (BENCH_PATH,), 4),
                                               ("light-fit", ("step_overhead_s",), 4),
                                               ("light-fit", (BENCH_PATH,), 16)])
def test_light_fit_changes_nothing_for_another_rule_an_unfitted_path_or_no_light_row(rule, names, conc):
    from twin.fitting.client_path_rows import light_path_after_fit
    assert light_path_after_fit(rule, [_case("a", "vllm-bench", conc)], ["s"], names, {}, {}, {}, {}, seed=0,
                                loss="linear", scale=1.0) is None
    with pytest.raises(ValueError, match="one of all, light, light-fit"):
        light_path_after_fit("dense", [], [], names, {}, {}, {}, {}, seed=0, loss="linear", scale=1.0)


def test_fidelity_real_refuses_the_rule_where_no_fold_fits_the_bench_path():
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "fidelity_real.py"
    for opts in (["--defaults-only"], ["--no-refit"], ["--terms", "step_overhead_s"]):
        r = subprocess.run([sys.executable, str(script), *opts, "--client-path-rows", "light"], capture_output=True,
                           text=True)
        assert r.returncode != 0 and "Traceback" not in r.stderr, opts
        assert "--client-path-rows light: the folds do not fit request_path_s@client_vllm_bench" in r.stderr, opts
