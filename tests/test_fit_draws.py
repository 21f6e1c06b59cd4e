"""A fit's objective over K draws of each training run (twin.fitting.fit_draws, round 23): K = 1 is the fit as
before, exactly; K > 1 simulates each run the fit keeps at K disjoint draw seeds and fits the mean of their
re-costed metrics; a run that queued keeps one draw; a reader of ``metrics`` gets the first draw's; the scripts'
option is validated."""

from __future__ import annotations

import dataclasses
import statistics
import sys

import pytest

from twin.errors import TwinInputError
from twin.fitting.fit import Case, fit, simulate_cases
from twin.fitting.fit_draws import (DRAW_SEED_STRIDE, MAX_DRAWS, Draws, MeanSurrogate, check_draws,
                                    check_draws_option, draw_seeds, surrogate_for)
from twin.fitting.joint import default_start
from twin.fitting.measured_run import LengthSample, MeasuredRun, PromptPool
from twin.fitting.replay import Replayed, Target, deployment_for, replay
from twin.fitting.surrogate import Surrogate

TARGET = Target("llama-2-7b", "H100-SXM", 1)
SIM_S = 20.0
NAMES = ("per_seq_overhead_s", "request_path_s")


def _open(rate: float, name: str) -> MeasuredRun:
    return MeasuredRun(name=name, source="test", num_requests=int(rate * SIM_S), rate_per_s=rate, duration_s=SIM_S,
                       prompt_tokens=LengthSample.constant(700), output_tokens=LengthSample.constant(100),
                       prompt_pool=PromptPool(4, 5, 300), metrics={"completed": 1.0},
                       server={"max_num_seqs": 128}, experiment=name)


def _closed(conc: int) -> MeasuredRun:
    return MeasuredRun(name=f"c{conc}", source="test", num_requests=6 * conc, rate_per_s=float("inf"),
                       max_concurrency=conc, prompt_tokens=LengthSample.constant(512),
                       output_tokens=LengthSample.constant(64), metrics={"completed": 1.0},
                       server={"enable_prefix_caching": False, "vllm_version": "0.14"}, experiment="x")


def _measured(run: MeasuredRun, seed: int) -> Case:
    m = replay(run, TARGET, default_start(), seed=seed, max_sim_s=SIM_S).metrics
    keep = ("mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_e2el_ms")
    return Case(dataclasses.replace(run, metrics={k: m[k] for k in keep}), TARGET)


@pytest.fixture(scope="module")
def cases():
    return [_measured(_open(8.0, "light"), 11), _measured(_open(20.0, "busy"), 12), _measured(_closed(4), 13)]


def test_draw_seeds_are_the_seed_first_then_disjoint_strides():
    assert draw_seeds(5, 1) == (5,)
    assert draw_seeds(0, 3) == (0, DRAW_SEED_STRIDE, 2 * DRAW_SEED_STRIDE)
    assert draw_seeds(2, 2) == (2, 2 + DRAW_SEED_STRIDE)
    seen = [s for seed in range(5) for s in draw_seeds(seed, MAX_DRAWS)]
    assert len(seen) == len(set(seen))           # no two seeds of a report share a draw


@pytest.mark.parametrize("bad", [0, -1, MAX_DRAWS + 1, True, 1.5, "2", None])
def test_a_draw_count_outside_1_to_max_is_one_line(bad):
    with pytest.raises(TwinInputError, match=r"^--fit-draws .*: must be a whole number from 1 to 16$"):
        check_draws(bad, "--fit-draws")


def test_the_option_refuses_draws_where_nothing_is_fitted():
    assert check_draws_option(1, "--fit-draws", fitting=False) == 1
    assert check_draws_option(3, "--fit-draws", fitting=True) == 3
    with pytest.raises(TwinInputError, match="^--fit-draws 2: nothing is fitted here"):
        check_draws_option(2, "--fit-draws", fitting=False)


def test_one_draw_is_the_simulation_and_the_fit_as_before(cases):
    """K = 1: the same replays (no Draws), the same surrogate type and the same fitted values, exactly."""
    start = default_start()
    before = simulate_cases(cases, start, seed=3, max_sim_s=SIM_S)
    one = simulate_cases(cases, start, seed=3, max_sim_s=SIM_S, draws=1)
    assert all(type(r) is Replayed for r in one)
    assert [r.metrics for r in one] == [r.metrics for r in before]
    sur = surrogate_for(cases[0].run, TARGET, deployment_for(cases[0].run, TARGET), one[0], start, 3)
    assert type(sur) is Surrogate
    kw = dict(names=NAMES, start=start, outer_iterations=1, seed=3, max_sim_s=SIM_S, final_simulation=False)
    a, b = fit(cases, first=before, **kw), fit(cases, first=one, draws=1, **kw)
    assert a.params == b.params and a.std == b.std


def test_k_draws_are_the_k_seeds_replays_and_a_queued_run_keeps_one(cases):
    start = default_start()
    queued = Case(dataclasses.replace(cases[0].run, metrics={**cases[0].run.metrics, "mean_ttft_ms": 1e6}), TARGET)
    assert queued.run.queueing
    two = simulate_cases(cases + [queued], start, seed=3, max_sim_s=SIM_S, draws=2)
    assert [type(r) for r in two] == [Draws, Draws, Draws, Replayed]
    assert two[0].seeds == draw_seeds(3, 2)
    for k in (0, 1, 2):
        for replayed, s in zip(two[k].replays, two[k].seeds):
            alone = simulate_cases([cases[k]], start, seed=s, max_sim_s=SIM_S)[0]
            assert replayed.metrics == alone.metrics
        assert two[k].metrics == two[k].replays[0].metrics      # a reader of metrics: the run at its own seed
    assert two[3].metrics == simulate_cases([queued], start, seed=3, max_sim_s=SIM_S)[0].metrics


def test_the_mean_surrogate_predicts_the_mean_of_its_draws(cases):
    start = default_start()
    two = simulate_cases(cases[:1], start, seed=4, max_sim_s=SIM_S, draws=2)[0]
    dep = deployment_for(cases[0].run, TARGET)
    sur = surrogate_for(cases[0].run, TARGET, dep, two, start, 4)
    assert isinstance(sur, MeanSurrogate) and len(sur.surrogates) == 2
    moved = {**start, "per_seq_overhead_s": 4e-5, "request_path_s": 0.009}
    parts = [Surrogate(cases[0].run, TARGET, dep, r, start, s).predict(moved) for r, s in zip(two.replays, two.seeds)]
    got = sur.predict(moved)
    for key in ("mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "mean_tpot_ms", "mean_e2el_ms"):
        assert got[key] == pytest.approx((parts[0][key] + parts[1][key]) / 2, rel=1e-12)


def test_the_mean_of_k_draws_scatters_less_over_seeds(cases):
    """Seeded statistic: an open-loop run's surrogate mean TTFT over 6 seeds, one draw vs the mean of 4 (expected sd
    ratio 1/2; stated tolerance: below 0.8)."""
    start, run = default_start(), cases[1]
    dep = deployment_for(run.run, TARGET)

    def mean_ttft(seed: int, draws: int) -> float:
        sim = simulate_cases([run], start, seed=seed, max_sim_s=SIM_S, draws=draws)[0]
        return surrogate_for(run.run, TARGET, dep, sim, start, seed).predict(start)["mean_ttft_ms"]
    one = [mean_ttft(s, 1) for s in range(6)]
    four = [mean_ttft(s, 4) for s in range(6)]
    assert statistics.stdev(one) > 0
    assert statistics.stdev(four) < 0.8 * statistics.stdev(one)


def test_fidelity_real_refuses_fit_draws_without_a_fit(monkeypatch):
    from benchmarks import fidelity_real
    assert fidelity_real.parser().parse_args([]).fit_draws == 1
    monkeypatch.setattr(sys, "argv", ["fidelity_real.py", "--no-refit", "--fit-draws", "2"])
    with pytest.raises(TwinInputError, match="^--fit-draws 2: nothing is fitted here"):
        fidelity_real.main()
    monkeypatch.setattr(sys, "argv", ["fidelity_real.py", "--fit-draws", "17"])
    with pytest.raises(TwinInputError, match="^--fit-draws 17: must be a whole number from 1 to 16$"):
        fidelity_real.main()


def test_stage_window_draws_tabulates_each_stages_error_per_seed():
    from types import SimpleNamespace

    from benchmarks.stage_window_draws import stage_errors
    stage = SimpleNamespace(run=SimpleNamespace(name="s1", queueing=False, metrics={
        "mean_ttft_ms": 100.0, "p90_ttft_ms": 200.0, "median_ttft_ms": 50.0, "mean_tpot_ms": 10.0}))
    sim = {0: [SimpleNamespace(metrics={"mean_ttft_ms": 140.0, "p90_ttft_ms": 200.0, "median_ttft_ms": 50.0,
                                        "mean_tpot_ms": 9.0})],
           1: [SimpleNamespace(metrics={"mean_ttft_ms": 250.0, "p90_ttft_ms": 300.0, "median_ttft_ms": 55.0,
                                        "mean_tpot_ms": 9.5})]}
    (row,) = stage_errors([stage], sim)
    assert row["name"] == "s1" and row["queueing"] is False
    assert row["errors"]["mean_ttft_ms"]["by_seed"] == {0: pytest.approx(0.4), 1: pytest.approx(1.5)}
    assert row["errors"]["mean_ttft_ms"]["range"] == pytest.approx(1.1)
    assert row["errors"]["mean_tpot_ms"]["by_seed"] == {0: pytest.approx(-0.1), 1: pytest.approx(-0.05)}


def test_multi_seed_report_takes_a_report_without_fit_draws_as_made_at_one_draw():
    from benchmarks.multi_seed_report import check_comparable
    from tests.test_multi_seed_report import _report, _reports
    old, new = _report(0, 0.05, 0.06, 0.05), _report(1, 0.05, 0.06, 0.05, fit_draws=1)
    assert check_comparable(_reports(old, new), ["GPU"]) == [0, 1]
    with pytest.raises(TwinInputError, match="made with fit_draws = 3, r0.json with 1"):
        check_comparable(_reports(old, _report(1, 0.05, 0.06, 0.05, fit_draws=3)), ["GPU"])
