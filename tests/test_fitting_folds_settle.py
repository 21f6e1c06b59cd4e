"""Round 6 fold mechanics (issue 33): a fold holds a term its training rows do not identify at its prior and fits
the others again; the eager host floors are held where no training run's prompt steps leave the captured CUDA
graphs (or where only MoE runs do, for the per-layer one); the embedded start of every generation-scoped entry;
the default report's terms."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from tests.fitting_helpers import fake_fold_fit
from twin.fitting import identify
from twin.fitting.fit import Case
from twin.fitting.identify import SETTLED, held_at_prior, identification, not_identified, range_share
from twin.fitting.joint import run_fold
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.provenance import embedded_start
from twin.fitting.replay import Target


def _run(name: str, prompt: int = 1024) -> MeasuredRun:
    return MeasuredRun(name=name, source="test", num_requests=12, rate_per_s=float("inf"), max_concurrency=4,
                       prompt_tokens=LengthSample.constant(prompt), output_tokens=LengthSample.constant(32),
                       metrics={"completed": 1.0, "mean_ttft_ms": 50.0, "mean_tpot_ms": 10.0},
                       server={"enable_prefix_caching": False, "vllm_version": "0.14"}, experiment=name)


def _dep(moe: bool, limits):
    return SimpleNamespace(model=SimpleNamespace(is_moe=moe, num_hidden_layers=60), cudagraph_tokens=limits)


EAGER = ("eager_layer_host_s", "eager_moe_layer_host_s")


def test_the_eager_floors_are_held_where_no_prompt_step_leaves_the_graphs():
    cases = [Case(_run("a", 1024), None), Case(_run("b", 1024), None)]
    graphed = [_dep(False, (512, 2048)), _dep(True, None)]          # 1024 <= 2048; None: every step graphed
    held = held_at_prior(cases, EAGER, graphed)
    assert held == {n: "no run has prompt steps beyond its captured CUDA graphs (the host floor never binds)"
                    for n in EAGER}
    dense_eager = [_dep(False, (512, 512)), _dep(True, None)]
    assert held_at_prior(cases, EAGER, dense_eager) == {
        "eager_moe_layer_host_s": "no run with eager prompt steps serves a MoE model"}
    moe_eager = [_dep(False, None), _dep(True, (8, 0))]             # FULL_DECODE_ONLY: every prompt step eager
    assert held_at_prior(cases, EAGER, moe_eager) == {
        "eager_layer_host_s": "every run with eager prompt steps serves a MoE model (the host time per decoder "
                              "layer is not split from the one per MoE layer)"}
    # fitted alone, the per-layer floor is identified by MoE rows too (it is then their whole host time)
    assert held_at_prior(cases, ("eager_layer_host_s",), moe_eager) == {}
    assert held_at_prior(cases, EAGER, [_dep(False, (512, 512)), _dep(True, (512, 512))]) == {}


def test_not_identified_is_a_standard_error_over_a_quarter_of_the_range_and_says_so():
    # request_path_s: 0-200 ms; eager_layer_host_s: 0-10 ms
    std = {"request_path_s": 50e-3, "eager_layer_host_s": 2.6e-3, "step_overhead_s": float("nan")}
    assert range_share("request_path_s", std) == pytest.approx(0.25)
    assert not_identified(("request_path_s", "eager_layer_host_s", "step_overhead_s"), std) == (
        "eager_layer_host_s", "step_overhead_s")
    report = identification(("request_path_s",), std, {"memory_efficiency": "why"}, {"eager_layer_host_s": 0.26})
    assert report == {"request_path_s": "identified",
                      "eager_layer_host_s": f"{SETTLED} (+/- 26% of its range), held at its prior",
                      "memory_efficiency": f"{identify.HELD}: why"}


def _capture_fit(monkeypatch, result=None):
    """A fake fit recording its calls (``result(calls, kw)``: what it returns; default: every fitted term at 1e-7,
    identified), and two H100 Llama runs (the fold trains on "x", tests on "y")."""
    calls, _ = fake_fold_fit(monkeypatch, 1e-7, result=result)
    cases = [Case(_run("x"), Target("llama-2-7b", "H100-SXM", 1)),
             Case(_run("y"), Target("llama-2-70b", "H100-SXM", 4))]
    return calls, cases, [SimpleNamespace(metrics={}) for _ in cases]


def test_a_fold_holds_an_unidentified_term_at_its_prior_and_fits_the_others_again(monkeypatch):
    def result(calls, kw):
        if len(calls) == 1:      # the first fit: the floor's standard error spans 30 % of its 0-10 ms range
            return SimpleNamespace(params={**kw["fixed"], "request_path_s": 9e-3, "eager_layer_host_s": 4e-3},
                                   std={"request_path_s": 1e-3, "eager_layer_host_s": 3e-3},
                                   data_share={"request_path_s": 0.9, "eager_layer_host_s": 0.9})
        return SimpleNamespace(params={**kw["fixed"], "request_path_s": 7e-3}, std={"request_path_s": 0.5e-3},
                               data_share={"request_path_s": 0.9})

    calls, cases, first = _capture_fit(monkeypatch, result)
    names = ("request_path_s", "eager_layer_host_s")
    fold = run_fold("GPU", "nothing-held", cases, lambda c: "train" if c.run.name == "x" else "test",
                    first, names=names, outer_iterations=1, evidence=[])
    # the second fit: only the identified term, the floor fixed at its prior (here its embedded value: 0), one round
    assert calls[1]["names"] == ("request_path_s",) and calls[1]["fixed"] == {"eager_layer_host_s": 0.0}
    assert calls[1]["outer_iterations"] == 1 and calls[1]["first"] is calls[0]["first"]
    assert fold.params == {"eager_layer_host_s": 0.0, "request_path_s": 7e-3}
    assert fold.std == {"request_path_s": 0.5e-3}
    assert fold.identification == {"request_path_s": "identified",
                                   "eager_layer_host_s": f"{SETTLED} (+/- 30% of its range), held at its prior"}
    calls.clear()
    kept = run_fold("GPU", "nothing-held", cases, lambda c: "train" if c.run.name == "x" else "test", first,
                    names=names, outer_iterations=1, evidence=[], settle=False)
    assert len(calls) == 1 and kept.params["eager_layer_host_s"] == 4e-3
    assert kept.identification["eager_layer_host_s"] == "weakly identified (+/- 30% of its range)"


def test_every_generation_scoped_entry_and_flat_default_is_a_start(monkeypatch):
    from twin.cost import default_terms
    monkeypatch.setitem(default_terms.GENERATION_TERMS, "blackwell", {"eager_layer_host_s": 0.84e-3,
                                                                     "eager_moe_layer_host_s": 1.15e-3})
    assert embedded_start(("eager_layer_host_s@blackwell", "eager_moe_layer_host_s@blackwell",
                           "eager_layer_host_s")) == pytest.approx({
        "eager_layer_host_s@blackwell": 0.84e-3, "eager_moe_layer_host_s@blackwell": 1.15e-3, "eager_layer_host_s": 0.0,
        # held beside the generation's MoE floor: a GQA layer's counted floor (round 14, twin.cost.eager_path_floors)
        "eager_moe_layer_host_s@blackwell+gqa+experts_nvfp4": 6 * 0.84e-3 / 16}, rel=1e-12)


def test_the_default_report_refits_per_fold_and_no_refit_fits_nothing():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import fidelity_real as fr
    assert fr._names(fr.parser().parse_args([])) == fr.FOLD_TERMS
    assert fr._names(fr.parser().parse_args(["--no-refit"])) == ()
    assert fr._names(fr.parser().parse_args(["--defaults-only"])) == ()
    assert fr._names(fr.parser().parse_args(["--terms", "request_path_s"])) == ("request_path_s",)
    # round 7: decode bandwidth and the per-token per-layer cost by generation (Hopper: the unscoped ones)
    assert {"eager_layer_host_s@blackwell", "layer_token_overhead_s@blackwell", "request_path_s@client_vllm_bench",
            "per_seq_overhead_s@sync", "memory_efficiency", "memory_efficiency@blackwell",
            "layer_token_overhead_s"} <= set(fr.FOLD_TERMS)
    assert not math.isnan(fr.REFIT_FIT_SIM_S) and fr.REFIT_SILICON_EVERY > fr.DEFAULT_SILICON_EVERY
    md = fr.parameter_markdown([("GPU", "B200", "request_path_s", "4.4 ms", "0.7", "identified")])
    assert md.splitlines()[-1] == "| GPU | B200 | `request_path_s` | 4.4 ms | 0.7 | identified |"


def test_an_expert_paths_entry_is_held_beside_its_fitted_unscoped_term(monkeypatch):
    # round 7: fitting layer_token_overhead_s unscoped (Hopper) must not override the (hopper, mxfp4) path's 0.15 us
    calls, cases, first = _capture_fit(monkeypatch)
    fold = run_fold("GPU", "test", cases, lambda c: "train" if c.run.name == "x" else "test", first,
                    names=("layer_token_overhead_s",), outer_iterations=1, evidence=[])
    assert calls[0]["fixed"] == {"layer_token_overhead_s@hopper+experts_mxfp4": 0.15e-6}
    assert fold.params == {"layer_token_overhead_s@hopper+experts_mxfp4": 0.15e-6, "layer_token_overhead_s": 1e-7}


def test_a_held_out_expert_paths_entry_is_refit_as_its_unscoped_term_not_held(monkeypatch):
    # the gpt-oss H100 rows (the path entry's evidence) held out: the entry is not kept (that would leak)
    calls, cases, first = _capture_fit(monkeypatch)
    from twin.fitting.replay import deployment_for
    target = Target("gpt-oss-120b", "H100-SXM", 2, weight_dtype="mxfp4")
    gptoss_h100 = SimpleNamespace(run=_run("z"), target=target,
                                  row=SimpleNamespace(system="h100_sxm", model_path="openai/gpt-oss-120b"))
    fold = run_fold("family", "test", cases, lambda c: "train" if c.run.name == "x" else "test", first,
                    names=("layer_token_overhead_s",), outer_iterations=1,
                    evidence=[(gptoss_h100, deployment_for(gptoss_h100.run, target))])
    # not kept at its embedded 0.15 us (that would leak): round 10 holds it at the other families' MoE per-token
    # readings instead (twin.fitting.path_token_prior: the B200 Kimi and MiniMax ones, the gpt-oss one held out)
    assert calls[0]["fixed"]["layer_token_overhead_s@hopper+experts_mxfp4"] == (0.241e-6 * 0.146e-6) ** 0.5
    assert fold.plan.actions["layer_token_overhead_s@hopper+experts_mxfp4"][1] == "refit on the training rows"
    assert fold.params["layer_token_overhead_s"] == 1e-7
