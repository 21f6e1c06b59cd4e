"""The multi-source fit: it recovers known parameters (new terms included) from runs the twin generated itself,
and a term the training data cannot identify is reported as held at its prior, with the reason."""

from __future__ import annotations

import dataclasses

import pytest

from twin.cost.default_terms import GENERATION_TERMS
from twin.fitting.fit import Case, fit
from twin.fitting.identify import HELD, held_at_prior, identification
from twin.fitting.joint import FOLDS, JOINT_NAMES, WeightedCase, default_start, errors, run_fold, summarize
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.replay import Target, replay
from twin.fitting.fit import simulate_cases
from twin.fitting.provenance import embedded_entries

TRUE = {"memory_efficiency": 0.85, "memory_efficiency@blackwell": 0.65, "moe_expert_efficiency": 0.6,
        "step_overhead_s": 2.0e-3}
# two model sizes on each GPU generation separate bandwidth (bytes per step) from the fixed step overhead
TARGETS = {"h100": Target("llama-2-7b", "H100-SXM", 1), "h100-70b": Target("llama-2-70b", "H100-SXM", 4),
           "b200": Target("llama-2-7b", "B200", 1), "b200-70b": Target("llama-2-70b", "B200", 2),
           "moe": Target("mixtral-8x7b", "H100-SXM", 2)}


def _run(name: str, conc: int, prompt: int = 512, output: int = 64) -> MeasuredRun:
    return MeasuredRun(name=name, source="test", num_requests=3 * conc, rate_per_s=float("inf"),
                       max_concurrency=conc, prompt_tokens=LengthSample.constant(prompt),
                       output_tokens=LengthSample.constant(output), metrics={"completed": 1.0},
                       server={"enable_prefix_caching": False, "vllm_version": "0.14"}, experiment=name)


def _generated(params: dict, which=("h100", "h100-70b", "b200", "b200-70b", "moe")) -> list[Case]:
    cases = []
    for key in which:
        for conc in (4, 32):
            run = _run(f"{key}-c{conc}", conc)
            m = replay(run, TARGETS[key], params).metrics
            measured = {k: m[k] for k in ("mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "mean_tpot_ms",
                                          "mean_e2el_ms", "request_throughput")}
            cases.append(Case(dataclasses.replace(run, metrics=measured), TARGETS[key]))
    return cases


@pytest.mark.slow
def test_the_joint_fit_recovers_the_parameters_that_generated_the_runs():
    cases = _generated({**default_start(), **TRUE})
    start = default_start()
    names = tuple(TRUE)
    res = fit(cases, names=names, start=start, fixed={k: v for k, v in start.items() if k not in names},
              outer_iterations=3)
    # stated tolerances: efficiencies within 5 % (the MoE one 10 %: fewer runs see it), the step overhead 30 %
    assert res.params["memory_efficiency"] == pytest.approx(0.85, rel=0.05)
    assert res.params["memory_efficiency@blackwell"] == pytest.approx(0.65, rel=0.05)
    assert res.params["moe_expert_efficiency"] == pytest.approx(0.6, rel=0.10)
    assert res.params["step_overhead_s"] == pytest.approx(2.0e-3, rel=0.30)
    # and the same runs at the starting defaults were far off (the test can fail)
    assert abs(start["memory_efficiency"] / 0.85 - 1) > 0.1 and abs(start["moe_expert_efficiency"] / 0.6 - 1) > 0.3


def test_terms_the_data_cannot_identify_are_held_at_their_prior_and_say_why():
    cases = _generated(default_start(), which=("h100",))
    held = held_at_prior(cases, JOINT_NAMES)
    assert held["memory_efficiency@blackwell"] == "no run (blackwell) in the data"
    assert held["moe_expert_efficiency"] == "no run serves a MoE model"
    assert held["moe_expert_compute_efficiency"] == "no run serves a MoE model"
    assert held["allreduce_latency_s"] == "every run is on one GPU (no all-reduce)"
    assert held["step_overhead_s@sync"] == "no run (sync) in the data"
    assert held["quant_weight_efficiency@int4"] == "no run (int4) in the data"
    assert held["request_path_s@blackwell"] == "no run (blackwell) in the data"
    assert "prefills long uncached prompts" in held["compute_efficiency"]
    assert "memory_efficiency" not in held and "step_overhead_s" not in held
    b200_only = _generated(default_start(), which=("b200",))
    assert held_at_prior(b200_only, JOINT_NAMES)["memory_efficiency"] == "no run (outside blackwell) in the data"
    report = identification([n for n in JOINT_NAMES if n not in held], {}, held)
    assert report["moe_expert_efficiency"] == f"{HELD}: no run serves a MoE model"


@pytest.mark.slow
def test_a_fold_reports_what_its_training_set_cannot_identify():
    """Leave-one-GPU-out with B200 held out: the Blackwell terms are not identified, held at their prior, and the
    B200 runs are predicted with the Hopper fractions."""
    cases = [WeightedCase(c.run, c.target) for c in _generated(default_start(), which=("h100", "b200"))]
    first = simulate_cases(cases, default_start())
    # every embedded value let through: these runs were generated at them (the provenance rule that would reset
    # them is tested in tests/test_fitting_provenance.py)
    fold = run_fold("GPU", "B200", cases, FOLDS["GPU"], first, outer_iterations=1,
                    allow=tuple(e.parameter for e in embedded_entries()))
    assert fold.identification["memory_efficiency@blackwell"].startswith(HELD)
    assert fold.identification["compute_efficiency@blackwell"].startswith(HELD)
    assert "memory_efficiency@blackwell" not in fold.params
    assert [c.target.gpu for c in fold.cases] == ["B200", "B200"]
    s = summarize(list(zip(fold.cases, fold.predicted)))
    assert s["mean_tpot_ms"]["n"] == 2 and abs(s["mean_tpot_ms"]["signed"]) < 0.05   # generated at the defaults
    assert set(errors(fold.cases[0], fold.predicted[0])) >= {"mean_ttft_ms", "mean_tpot_ms"}


def test_a_fold_whose_training_set_identifies_none_of_the_terms_predicts_at_the_defaults():
    """Only Blackwell-scoped terms, B200 held out: nothing to fit (was scipy's max_nfev error); the held-out runs
    are simulated at the embedded defaults less what the B200 rows gave evidence to (the Blackwell per-token
    per-layer cost; these plain cases count as inference-perf runs, so the serving defaults too), and with those
    let through exactly as the defaults predict them."""
    cases = [WeightedCase(c.run, c.target) for c in _generated(default_start(), which=("h100", "b200"))]
    first = simulate_cases(cases, default_start())
    names = ("memory_efficiency@blackwell", "layer_overhead_s@blackwell")
    fold = run_fold("GPU", "B200", cases, FOLDS["GPU"], first, names=names, outer_iterations=1)
    assert fold.params == fold.plan.fixed and fold.params["layer_token_overhead_s@blackwell"] == 0.0
    assert all(fold.identification[n].startswith(HELD) for n in names)
    assert fold.predicted == [r.metrics for r in simulate_cases(fold.cases, fold.plan.fixed)]
    let = run_fold("GPU", "B200", cases, FOLDS["GPU"], first, names=names, outer_iterations=1,
                   allow=tuple(e.parameter for e in embedded_entries()))
    assert let.params == {}
    assert let.predicted == [first[i].metrics for i, c in enumerate(cases) if c.target.gpu == "B200"]


def _cases_at_prompts(prompts: tuple[int, ...]) -> list[Case]:
    return [Case(_run(f"p{p}-c{conc}", conc, prompt=p), TARGETS["h100"]) for p in prompts for conc in (4, 32)]


def test_a_per_token_cost_is_held_at_prior_unless_prompt_lengths_differ():
    """One prompt length: a cost per scheduled token moves every step as the per-step constant does, so the data
    cannot split them; prompts 4x apart (uncached) can."""
    names = ("step_overhead_s", "per_token_overhead_s")
    held = held_at_prior(_cases_at_prompts((512,)), names)
    assert held == {"per_token_overhead_s": "no two runs prefill uncached prompts of lengths 2x apart (a cost per "
                                            "token is not split from the per-step and per-request ones)"}
    assert held_at_prior(_cases_at_prompts((512, 2048)), names) == {}
    assert default_start(names)["per_token_overhead_s"] == 0.0     # its prior: the pure roofline


@pytest.mark.slow
def test_the_fit_recovers_a_per_token_cost_from_generated_runs():
    true = {**default_start(), "per_token_overhead_s": 6.0e-6}
    cases = []
    for p in (512, 2048):
        for conc in (4, 32):
            run = _run(f"p{p}-c{conc}", conc, prompt=p)
            m = replay(run, TARGETS["h100"], true).metrics
            cases.append(Case(dataclasses.replace(run, metrics={k: m[k] for k in (
                "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "mean_tpot_ms", "mean_e2el_ms",
                "request_throughput") if m.get(k) is not None}), TARGETS["h100"]))
    start = default_start()
    res = fit(cases, names=("per_token_overhead_s",), start=start,
              fixed={k: v for k, v in start.items() if k != "per_token_overhead_s"}, outer_iterations=3)
    # stated tolerance: 20 % (four runs, one GPU)
    assert res.params["per_token_overhead_s"] == pytest.approx(6.0e-6, rel=0.20)


def test_a_weight_scope_covers_a_checkpoint_quantised_in_one_layer_group():
    """Kimi-K2.5's checkpoint: INT4 routed experts, bf16 elsewhere. ``@int4`` covers it (the roofline runs every
    quantised group at ``quant_weight_efficiency``), ``@fp8`` does not; a uniform FP8 one is ``@fp8`` only."""
    from types import SimpleNamespace

    from twin.fitting.scoped import in_scope, params_for
    from twin.hardware.weight_formats import WeightFormats

    kimi = SimpleNamespace(weight_formats=WeightFormats(routed_experts="int4-g32-sym"),
                           kv_pool=SimpleNamespace(weight_dtype="routed_experts=int4-g32-sym"))
    fp8 = SimpleNamespace(weight_formats=WeightFormats.uniform("fp8"), kv_pool=SimpleNamespace(weight_dtype="fp8"))
    assert in_scope("int4", kimi) and not in_scope("fp8", kimi)
    assert in_scope("fp8", fp8) and not in_scope("int4", fp8)
    params = {"quant_weight_efficiency": 1.0, "quant_weight_efficiency@int4": 0.6}
    assert params_for(params, kimi) == {"quant_weight_efficiency": 0.6}
    assert params_for(params, fp8) == {"quant_weight_efficiency": 1.0}


def test_a_per_layer_cost_is_held_at_prior_unless_the_models_differ_in_depth():
    """One model (one layer count): a cost per decoder layer is a cost per step; two depths split them. The
    Blackwell-scoped one looks at the Blackwell runs only."""
    names = ("layer_overhead_s", "layer_overhead_s@blackwell", "allreduce_latency_s@blackwell")
    one_depth = _generated(default_start(), which=("h100", "b200"))            # llama-2-7b only: 32 layers
    held = held_at_prior(one_depth, names)
    assert held["layer_overhead_s"] == ("every run (outside blackwell) has the same number of decoder layers (a "
                                        "cost per layer is not split from the per-step one)")
    assert held["layer_overhead_s@blackwell"].startswith("every run (blackwell) has the same number")
    assert held["allreduce_latency_s@blackwell"] == "every run is on one GPU (no all-reduce)"
    two_depths = _generated(default_start(), which=("h100", "b200", "b200-70b"))
    held = held_at_prior(two_depths, names)
    assert "layer_overhead_s@blackwell" not in held and "allreduce_latency_s@blackwell" not in held
    assert held["layer_overhead_s"].startswith("every run (outside blackwell)")
    # the MLA models' embedded value rides beside the unscoped term (twin.cost.mla_decode; round 8)
    assert default_start(names) == {"layer_overhead_s": 0.0, "layer_overhead_s@blackwell": 0.0,
                                    "allreduce_latency_s@blackwell": 24.7e-6, "layer_overhead_s@mla": 13.2e-6}


@pytest.mark.slow
def test_the_fit_splits_a_blackwell_per_layer_cost_from_its_all_reduce(monkeypatch):
    """Runs generated with 30 us per layer and 10 us per all-reduce on B200 (7B at TP1, 70B at TP1 and TP2):
    the fit of the two Blackwell-scoped terms recovers both (stated tolerance 5 %; measured within 0.2 %),
    starting from the priors (0 per layer, Hopper's 24.7 us all-reduce). Without Blackwell's unsharded floor
    (twin.cost.unsharded_decode, round 10): with it a TP1 step pays 2 x (latency - link) per layer too, so TP1
    and TP2 rows no longer separate a per-layer time from the latency (what the B200 rows say)."""
    monkeypatch.setitem(GENERATION_TERMS["blackwell"], "unsharded_allreduce_link_s", None)
    true = {**default_start(), "layer_overhead_s@blackwell": 30e-6, "allreduce_latency_s@blackwell": 10e-6}
    targets = {"b200": TARGETS["b200"], "b200-70b-tp1": Target("llama-2-70b", "B200", 1),
               "b200-70b": TARGETS["b200-70b"]}
    cases = []
    for key, target in targets.items():
        for conc in (4, 32):
            run = _run(f"{key}-c{conc}", conc)
            m = replay(run, target, true).metrics
            cases.append(Case(dataclasses.replace(run, metrics={k: m[k] for k in (
                "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "mean_tpot_ms", "mean_e2el_ms",
                "request_throughput")}), target))
    names = ("layer_overhead_s@blackwell", "allreduce_latency_s@blackwell")
    assert held_at_prior(cases, names) == {}
    start = default_start()
    res = fit(cases, names=names, start=start, fixed={k: v for k, v in start.items() if k not in names},
              outer_iterations=3)
    assert res.params["layer_overhead_s@blackwell"] == pytest.approx(30e-6, rel=0.05)
    assert res.params["allreduce_latency_s@blackwell"] == pytest.approx(10e-6, rel=0.05)
    assert res.std["layer_overhead_s@blackwell"] < 3e-6 and res.std["allreduce_latency_s@blackwell"] < 3e-6
