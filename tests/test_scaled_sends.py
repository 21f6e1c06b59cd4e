"""The harness's arrival draw for inference-perf stages (twin.fitting.scaled_sends, replay.build_requests) and
the seed-scatter script's arithmetic (round 20, 33z)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from benchmarks.seed_scatter import _seeds, _sends, pooled, scatter_table, spread
from twin.errors import TwinInputError
from twin.fitting.fit import Case
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.replay import Target, build_requests
from twin.fitting.scaled_sends import scalable, with_sends
from twin.workload.arrivals import scaled_exponential_sends, scaled_poisson_times
from twin.workload.rng import stream


def _run(**kw) -> MeasuredRun:
    base = dict(name="s", source="inference-perf", num_requests=400, prompt_tokens=LengthSample.constant(100),
                output_tokens=LengthSample.constant(10), metrics={}, rate_per_s=8.0, duration_s=49.7)
    return MeasuredRun(**(base | kw))


def test_a_scaled_stage_sends_its_count_over_count_over_rate():
    specs = build_requests(_run(scaled_sends=True), seed=3)
    t = np.array([s.arrival_s for s in specs])
    gaps = stream(3, "arrivals").standard_exponential(400)
    gaps *= 50.0 / gaps.sum()                      # 400 requests at 8 / s: the stage's 50 s
    assert len(t) == 400 and t[0] == 0.0
    assert t[-1] == pytest.approx(50.0 - gaps[0], rel=1e-12)
    assert np.all(np.diff(t) >= 0)


def test_a_window_of_a_scaled_stage_is_the_whole_draw_cut():
    whole = [s.arrival_s for s in build_requests(_run(scaled_sends=True), seed=1)]
    part = [s.arrival_s for s in build_requests(_run(scaled_sends=True), seed=1, max_requests=50)]
    assert part == whole[:50]


def test_unscaled_stages_keep_their_draw():
    specs = build_requests(_run(), seed=2)
    gaps = stream(2, "arrivals").gamma(1.0, 1.0 / 8.0, size=400)
    assert [s.arrival_s for s in specs] == pytest.approx(list(np.cumsum(gaps) - gaps[0]), rel=1e-12)


def test_the_product_draw_is_the_count_draw():
    a = scaled_poisson_times(8.0, 50.0, np.random.default_rng(5))
    b = scaled_exponential_sends(400, 50.0, np.random.default_rng(5))
    assert a.tolist() == b.tolist() and scaled_exponential_sends(0, 1.0, np.random.default_rng(0)).size == 0


def test_scaled_sends_need_a_finite_poisson_rate():
    with pytest.raises(ValueError, match="scaled sends need"):
        _run(scaled_sends=True, rate_per_s=None, max_concurrency=4)
    with pytest.raises(ValueError, match="scaled sends need"):
        _run(scaled_sends=True, burstiness=2.0)


def test_with_sends_rewrites_inference_perf_open_loops_only():
    target = Target(model="llama-2-7b", gpu="H100")
    cases = [Case(_run(), target), Case(_run(source="vllm-bench-serve"), target),
             Case(_run(rate_per_s=None, max_concurrency=4), target)]
    assert [scalable(c.run) for c in cases] == [True, False, False]
    scaled = with_sends(cases, "scaled")
    assert [c.run.scaled_sends for c in scaled] == [True, False, False]
    assert scaled[1] is cases[1] and scaled[2] is cases[2]
    assert [c.run.scaled_sends for c in with_sends(scaled, "unscaled")] == [False, False, False]
    assert with_sends(scaled, "as-read") == scaled
    with pytest.raises(ValueError, match="allowed as-read, scaled, unscaled"):
        with_sends(cases, "fixed")


def test_seed_scatter_arithmetic():
    runs = {0: {"a": {"mean_ttft_ms": 0.10, "mean_tpot_ms": -0.02}, "b": {"mean_ttft_ms": -0.04}},
            1: {"a": {"mean_ttft_ms": 0.04, "mean_tpot_ms": -0.01}, "b": {"mean_ttft_ms": -0.08}}}
    table = scatter_table(runs)
    assert table["a"]["mean_ttft_ms"]["range"] == pytest.approx(0.06)
    assert table["a"]["mean_tpot_ms"]["sd"] == pytest.approx(0.01 / 2 ** 0.5)
    assert set(table["b"]) == {"mean_ttft_ms"}
    assert pooled(runs[0])["mean_ttft_ms"] == pytest.approx({"abs": 0.07, "signed": 0.03})
    assert spread([0.5]) == {"range": 0.0, "sd": 0.0}


def test_seed_scatter_options():
    assert _seeds("0, 2,5") == [0, 2, 5] and _sends("scaled") == ["scaled"]
    for bad in ("0,0", "-1", "x", ""):
        with pytest.raises(TwinInputError, match="--seeds"):
            _seeds(bad)
    for bad in ("as-read", "scaled,scaled", "fixed", ""):
        with pytest.raises(TwinInputError, match="--sends"):
            _sends(bad)


def test_dataclass_replace_keeps_a_case_subclass():
    @dataclasses.dataclass(frozen=True)
    class Weighted(Case):
        weight: float = 2.0
    [c] = with_sends([Weighted(_run(), Target(model="llama-2-7b", gpu="H100"))], "scaled")
    assert isinstance(c, Weighted) and c.weight == 2.0 and c.run.scaled_sends


def test_the_harness_options():
    from benchmarks.fidelity_real import parser
    args = parser().parse_args([])
    assert args.inference_perf_sends == "as-read" and args.seed == 0
    args = parser().parse_args(["--inference-perf-sends", "scaled", "--seed", "4"])
    assert args.inference_perf_sends == "scaled" and args.seed == 4
    for bad in (["--inference-perf-sends", "fixed"], ["--seed", "-1"], ["--seed", "1.5"]):
        with pytest.raises(SystemExit):
            parser().parse_args(bad)


def test_the_reader_scales_a_constant_loads_stages_only(tmp_path):
    from tests.fitting_helpers import write_config, write_stage
    from twin.fitting.readers import read_results
    metrics = {"mean_ttft_ms": 30.0, "median_ttft_ms": 28.0, "p90_ttft_ms": 35.0, "p99_ttft_ms": 50.0,
               "mean_e2el_ms": 2030.0, "median_e2el_ms": 2000.0, "p99_e2el_ms": 2500.0}
    d = tmp_path / "exp"
    write_config(d, model="meta-llama/Llama-2-7b-hf", tp=1, groups=1, per_group=4, system_tokens=100,
                 question_tokens=400, output_tokens=201, stages=[(5.0, 60.0)], server={})
    write_stage(d, 0, rate=5.0, duration_s=60.0, metrics=metrics, prompt_tokens=520, output_tokens=201)
    assert [r.scaled_sends for r in read_results(d)] == [True]
    cfg = d / "results_config.yaml"
    cfg.write_text(cfg.read_text().replace("constant", "poisson"))
    assert [r.scaled_sends for r in read_results(d)] == [False]
