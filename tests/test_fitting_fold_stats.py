"""Round 7 (issue 33): the fit's standard errors mean something, the identification rule rejects what is not
evidence, and a fold's parameter table prints the value each term was simulated at."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from twin.fitting.fit import PRIOR_WEIGHT, SE_STEP_SHARE, Case, _standard_errors, fit
from twin.fitting.identify import MIN_DATA_SHARE, WEAK_SHARE, identification, not_identified, range_share
from twin.fitting.joint import FoldResult, parameter_table, simulated_value
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.replay import Target, cost_model_for, deployment_for, replay

MEM = PARAMETERS_BY_NAME["memory_efficiency"]          # 0.3-1.0, prior 0.8
SPAN = MEM.upper - MEM.lower


def _linear_residuals(slopes: np.ndarray, x_true: float, noise: np.ndarray, jump: float = 0.0, at: float = 0.0):
    """Residuals of a one-parameter fit, linear in x, plus the weak prior's row; ``jump`` added above ``at``."""
    def residuals(x: np.ndarray) -> np.ndarray:
        r = slopes * (x[0] - x_true) + noise + (jump if x[0] > at else 0.0)
        return np.append(r, PRIOR_WEIGHT * (x[0] - MEM.prior) / SPAN)
    return residuals


def test_a_small_jump_at_the_solution_does_not_make_the_standard_error_vanish():
    """The optimiser can stop on a jump of the surrogate (round 6: a MoE step's recosted tokens truncated to a
    whole token): a Jacobian over ~1e-8 of the value sees the jump as a slope of ~1e6 and the standard error ~0.
    Over +/- 1 % of the range the slope is the smooth one, give or take jump / (2 x step)."""
    rng = np.random.default_rng(7)
    slopes, noise = np.full(40, 2.0), rng.normal(0.0, 0.02, 40)
    x = np.array([0.8])
    res = _linear_residuals(slopes, 0.8, noise, jump=0.002, at=0.8 + 1e-9)
    assert (res(x + 1.2e-8)[0] - res(x)[0]) / 1.2e-8 > 1e5         # the jump, as a tiny step sees it
    std, share = _standard_errors(res, x, ("memory_efficiency",))
    r0 = res(x)
    s2 = r0 @ r0 / (len(r0) - 1)
    smooth = math.sqrt(s2 / (slopes @ slopes + (PRIOR_WEIGHT / SPAN) ** 2))     # the analytic standard error
    # the jump adds 0.002 / (2 x 0.007) = 0.14 to a slope of 2 (one side of the central difference): 7 %
    assert std["memory_efficiency"] == pytest.approx(smooth, rel=0.1)
    assert std["memory_efficiency"] > 1e-3 and share["memory_efficiency"] == pytest.approx(1.0, abs=1e-3)
    assert SE_STEP_SHARE == 0.01


def test_a_term_the_runs_do_not_move_is_not_identified_however_small_its_standard_error():
    """Noise-free residuals: s^2 is tiny, so the standard error of a term only the prior holds is tiny too (1e-6
    of its range, 'identified' by the range rule alone); the runs give 0 % of its precision, so it is not."""
    names = ("memory_efficiency", "step_overhead_s")

    def residuals(x):     # the runs see memory_efficiency only; step_overhead_s has its prior's row alone
        data = 2.0 * (x[0] - 0.8) + np.linspace(-1e-6, 1e-6, 30)
        priors = PRIOR_WEIGHT * (x - np.array([0.8, 1.0])) / np.array([SPAN, 20.0])
        return np.concatenate([data, priors])

    std, share = _standard_errors(residuals, np.array([0.8, 1.0]), names)
    assert range_share("step_overhead_s", std) < 1e-4 <= WEAK_SHARE        # degenerate: tiny, from the prior
    assert share["step_overhead_s"] == pytest.approx(0.0, abs=1e-9) and share["memory_efficiency"] > 0.99
    assert not_identified(names, std, share) == ("step_overhead_s",)
    assert identification(names, std, {}, None, share) == {
        "memory_efficiency": "identified",
        "step_overhead_s": "weakly identified (the runs give 0% of its precision, its prior the rest)"}
    assert identification(names, std, {}, {"step_overhead_s": "the runs give 0% of its precision, its prior the "
                                                              "rest"}, share)["step_overhead_s"] == (
        "not identified by the fit (the runs give 0% of its precision, its prior the rest), held at its prior")
    assert MIN_DATA_SHARE == 0.5


TRUE = {"memory_efficiency": 0.7, "step_overhead_s": 2.5e-3}
TARGETS = (Target("llama-2-7b", "H100-SXM", 1), Target("llama-2-70b", "H100-SXM", 4))
NOISE = 0.01          # seeded multiplicative noise on every measured metric


def _generated(noise: float) -> list[Case]:
    rng = np.random.default_rng(3)
    cases = []
    for target in TARGETS:
        for conc in (2, 16):
            run = MeasuredRun(name=f"{target.model}-c{conc}", source="test", num_requests=4 * conc,
                              rate_per_s=float("inf"), max_concurrency=conc, prompt_tokens=LengthSample.constant(512),
                              output_tokens=LengthSample.constant(64), metrics={"completed": 1.0},
                              server={"enable_prefix_caching": False, "vllm_version": "0.14"}, experiment="g")
            m = replay(run, target, TRUE).metrics
            measured = {k: m[k] * (1.0 + noise * rng.standard_normal()) for k in (
                "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "mean_tpot_ms")}
            cases.append(Case(dataclasses.replace(run, metrics=measured), target))
    return cases


def test_twin_generated_runs_identify_what_they_pin_and_not_what_they_cannot():
    """Runs the twin generated at known values (+1 % seeded noise): memory_efficiency and step_overhead_s are
    identified, each standard error a sane share of its range and covering the truth (3 standard errors: a seeded
    check); a Blackwell term the H100 runs never see is reported as not identified. Noise-free, the unseen term's
    standard error shrinks with s^2 to a sliver of its range (the degenerate case) and is still not identified."""
    names = ("memory_efficiency", "step_overhead_s", "layer_overhead_s@blackwell")
    start = {"memory_efficiency": 0.85, "step_overhead_s": 1.5e-3, "layer_overhead_s@blackwell": 10e-6}
    res = fit(_generated(NOISE), names=names, start=start, outer_iterations=3, final_simulation=False)
    for n in ("memory_efficiency", "step_overhead_s"):
        assert 0.0 < range_share(n, res.std) <= WEAK_SHARE and res.data_share[n] >= MIN_DATA_SHARE
        assert abs(res.params[n] - TRUE[n]) <= 3.0 * res.std[n], (n, res.params[n], res.std[n])
    assert not_identified(names, res.std, res.data_share) == ("layer_overhead_s@blackwell",)
    clean = fit(_generated(0.0), names=names, start=start, outer_iterations=3, final_simulation=False)
    assert range_share("layer_overhead_s@blackwell", clean.std) < WEAK_SHARE          # the range rule alone: fooled
    assert clean.data_share["layer_overhead_s@blackwell"] < 1e-6
    assert "layer_overhead_s@blackwell" in not_identified(names, clean.std, clean.data_share)


def _sync_case() -> Case:
    run = MeasuredRun(name="qwen3-sync", source="test", num_requests=8, rate_per_s=float("inf"), max_concurrency=4,
                      prompt_tokens=LengthSample.constant(512), output_tokens=LengthSample.constant(32),
                      metrics={"completed": 1.0}, server={"vllm_version": "0.12"}, experiment="q")
    return Case(run, Target("llama-2-7b", "H100-SXM", 1))


def test_the_table_prints_what_a_held_scoped_term_was_simulated_at():
    """Family qwen3 (round 6): per_seq_overhead_s@sync is held (no sync server trains the fold), so the held-out
    sync servers are costed at the fold's per_seq_overhead_s, not at the embedded 63.7 us (which holds the 45 us
    read off those very rows). The table says so, and the cost model agrees."""
    params = {"per_seq_overhead_s": 9.573e-6, "step_overhead_s": 1.845e-3}
    fold = FoldResult("family", "qwen3", params, {"per_seq_overhead_s": 4.3e-6, "step_overhead_s": 0.15e-3},
                      {"per_seq_overhead_s": "identified", "step_overhead_s": "identified",
                       "per_seq_overhead_s@sync": "not identified, held at prior: no run (sync) in the data",
                       "request_path_s@client_vllm_bench": "not identified, held at prior: no run (client_vllm_bench) "
                                                           "in the data"}, [], [])
    rows = {r[0]: r for r in parameter_table(fold)}
    assert rows["per_seq_overhead_s@sync"][1:3] == (
        "9.573 us per sequence per step (held: simulated at the fold's per_seq_overhead_s)", "-")
    assert rows["request_path_s@client_vllm_bench"][1] == "4.8 ms per request (held: the embedded default)"
    assert rows["per_seq_overhead_s"][1] == "9.573 us per sequence per step"
    case = _sync_case()
    dep = deployment_for(case.run, case.target)
    assert not dep.scheduler_config.async_scheduling
    cost = cost_model_for(dep, case.target, fold.params)
    assert (cost.per_seq_overhead_s, cost.sync_seq_host_s) == (9.573e-6, 0.0)
    assert simulated_value(fold, "per_seq_overhead_s@sync")[0] == cost.per_seq_overhead_s


def test_a_training_row_is_simulated_again_only_where_its_cost_keywords_move_and_once_across_folds(monkeypatch):
    """The plan's resets move the B200 row (its Blackwell term goes 0.2 -> 0 us) but not the H100 row (the scoped
    term does not act on it): only the B200 row is simulated again, and a second fold resetting the same entry
    takes it from the cache kept across folds."""
    from types import SimpleNamespace

    from twin.fitting import joint
    calls = []

    def fake_simulate(cases, params, **kw):
        calls.append([c.target.gpu for c in cases])
        return [SimpleNamespace(metrics={"gpu": c.target.gpu, "call": len(calls)}) for c in cases]

    monkeypatch.setattr(joint, "simulate_cases", fake_simulate)
    base = _sync_case().run
    rows = [Case(base, Target("llama-2-7b", "H100-SXM", 1)), Case(base, Target("llama-2-7b", "B200", 1))]
    first = ["h100-first", "b200-first"]
    plan = SimpleNamespace(affects=lambda d: True)
    name = "layer_token_overhead_s@blackwell"
    cache: dict = {}
    for _ in range(2):
        train_first = list(first)
        joint._resimulate(rows, train_first, plan, {name: 0.0}, {name: 0.2e-6}, cache, max_sim_s=30.0, workers=1,
                          seed=0)
        assert train_first[0] == "h100-first" and train_first[1].metrics == {"gpu": "B200", "call": 1}
    assert calls == [["B200"]] and len(cache) == 1


def test_recosted_steps_are_linear_between_whole_sequence_counts():
    """The cost model prices a step by whole tokens (a MoE step's expert bytes): the surrogate's steps at a
    fractional concurrency are priced between the whole numbers of sequences either side, so a 0.5 % smaller
    concurrency no longer drops a 4-sequence decode step to 3 tokens' price (round 6's jump)."""
    from twin.fitting.surrogate import _recosted
    seen = []

    class Truncating:       # a step's price by whole tokens, as the roofline's MoE lookup truncates them
        @staticmethod
        def step_times_s(tokens, seqs, logits, context, pairs):
            seen.append((np.array(tokens), np.array(seqs)))
            return np.floor(tokens) * 1.0

    features = tuple(np.array([v]) for v in (4.0, 4.0, 4.0, 100.0, 104.0))
    decodes = np.array([4.0])
    assert _recosted(Truncating, features, decodes, 1.0).tolist() == [4.0]
    assert _recosted(Truncating, features, decodes, 0.995) == pytest.approx([3.98], abs=1e-12)   # truncated: 3
    assert _recosted(Truncating, features, decodes, 1.25).tolist() == [5.0]                        # whole: one call
    assert all((t == s).all() for t, s in seen)         # sequences and tokens move together: decode steps stay so
