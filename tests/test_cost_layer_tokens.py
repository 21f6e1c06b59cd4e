"""The per-token, per-layer cost (``layer_token_overhead_s``, twin.cost.layer_tokens): exact step costs, its own
part in explain(), checked input, a Blackwell scope, and when a fit can identify it."""

from __future__ import annotations

import dataclasses
import math

import pytest
from core_helpers import step_shape as _step

from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.fitting.identify import held_at_prior
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.fit import Case
from twin.fitting.parameters import PARAMETERS_BY_NAME
from twin.fitting.replay import Target
from twin.fitting.scoped import params_for


def test_it_costs_value_x_layers_x_scheduled_tokens_exactly():
    base = RooflineCostModel("llama-2-7b", "B200", layer_token_overhead_s=0.0)    # 32 decoder layers
    term = RooflineCostModel("llama-2-7b", "B200", layer_token_overhead_s=0.25e-6)
    flat = RooflineCostModel("llama-2-7b", "B200", per_token_overhead_s=0.25e-6 * 32, layer_token_overhead_s=0.0)
    mixed, decode = _step([700, 1, 1], [0, 300, 900]), _step([1] * 8, [500] * 8)
    for s, tokens in ((mixed, 702), (decode, 8)):
        assert term.step_time_s(s) - base.step_time_s(s) == pytest.approx(0.25e-6 * 32 * tokens, rel=1e-9)
        assert term.step_time_s(s) == flat.step_time_s(s)                 # the same per-token coefficient
    assert term.decode_step_times_s(8, 500, 3) == flat.decode_step_times_s(8, 500, 3)
    assert term.constants.overhead_s_per_token == 0.25e-6 * 32


def test_the_embedded_default_is_blackwells_0_2_us_and_0_elsewhere():
    assert RooflineCostModel("llama-2-7b", "B200").layer_token_overhead_s == 0.2e-6
    assert RooflineCostModel("llama-2-7b", "GB200").layer_token_overhead_s == 0.2e-6
    assert RooflineCostModel("llama-2-7b", "H100-SXM").layer_token_overhead_s == 0.0
    assert RooflineCostModel("llama-2-7b", "A100-80GB").layer_token_overhead_s == 0.0
    assert RooflineCostModel("llama-2-7b", "B200", layer_token_overhead_s=0.0).layer_token_overhead_s == 0.0


def test_explain_names_it_apart_and_the_parts_still_add_up():
    base = RooflineCostModel("llama-2-7b", "B200", per_token_overhead_s=1e-6, layer_token_overhead_s=0.0)
    both = RooflineCostModel("llama-2-7b", "B200", per_token_overhead_s=1e-6, layer_token_overhead_s=0.5e-6)
    s = _step([300, 1, 1], [0, 40, 90])
    parts = both.explain(s)
    assert parts["layer_token_overhead_s"] == pytest.approx(302 * 0.5e-6 * 32, rel=1e-12)
    assert parts["per_token_overhead_s"] == pytest.approx(302 * 1e-6, rel=1e-12)
    assert parts["overhead_s"] == pytest.approx(base.explain(s)["overhead_s"], rel=1e-12)
    assert sum(v for k, v in parts.items() if k != "total_s") == pytest.approx(parts["total_s"], rel=1e-9)
    assert "layer_token_overhead_s" not in base.explain(s)
    assert both.parameters()["layer_token_overhead_s"] == 0.5e-6


@pytest.mark.parametrize("bad", [-1e-7, math.nan, math.inf, True, "0.2"])
def test_bad_values_are_one_line_errors_naming_the_field(bad):
    with pytest.raises(TwinInputError, match=r"layer_token_overhead_s = .*must be a finite number >= 0"):
        RooflineCostModel("llama-2-7b", "B200", layer_token_overhead_s=bad)


def test_the_blackwell_scope_applies_on_b200_only():
    from types import SimpleNamespace
    from twin.hardware.catalog import resolve_gpu

    params = {"layer_token_overhead_s@blackwell": 0.2e-6}
    assert params_for(params, SimpleNamespace(gpu=resolve_gpu("B200"))) == {"layer_token_overhead_s": 0.2e-6}
    assert params_for(params, SimpleNamespace(gpu=resolve_gpu("H100-SXM"))) == {}
    p = PARAMETERS_BY_NAME["layer_token_overhead_s@blackwell"]
    assert (p.prior, p.lower, p.to_model(1.0)) == (0.0, 0.0, 1e-6)


def _case(model: str, prompt: int) -> Case:
    run = MeasuredRun(name=f"{model}-{prompt}", source="test", num_requests=12, rate_per_s=float("inf"),
                      max_concurrency=4, prompt_tokens=LengthSample.constant(prompt),
                      output_tokens=LengthSample.constant(16), metrics={"completed": 1.0},
                      server={"enable_prefix_caching": False, "vllm_version": "0.14"}, experiment=model)
    return Case(run, Target(model, "B200", 1))


def test_it_is_held_at_prior_without_two_prompt_lengths_and_two_depths():
    name = "layer_token_overhead_s@blackwell"
    why = ("runs (blackwell) need uncached prompts 2x apart and two model depths (a cost per token and layer is "
           "not split from the per-token and per-step ones)")
    one_depth = [_case("llama-2-7b", p) for p in (512, 2048)]
    one_length = [_case(m, 512) for m in ("llama-2-7b", "llama-3.2-3b")]
    assert held_at_prior(one_depth, (name,)) == {name: why}
    assert held_at_prior(one_length, (name,)) == {name: why}
    both = [_case(m, p) for m in ("llama-2-7b", "llama-3.2-3b") for p in (512, 2048)]
    assert held_at_prior(both, (name,)) == {}
    h100 = [dataclasses.replace(c, target=Target(c.target.model, "H100-SXM", 1)) for c in both]
    assert held_at_prior(h100, (name,)) == {name: "no run (blackwell) in the data"}


@pytest.mark.slow
def test_the_fit_recovers_it_from_generated_b200_runs():
    """Runs generated at 0.3 us per token and layer on B200 (two depths, prompts 4x apart): the fit of the
    Blackwell-scoped term alone, from its prior 0, recovers it (stated tolerance 20 %: eight short runs)."""
    from twin.fitting.fit import fit
    from twin.fitting.joint import default_start
    from twin.fitting.replay import replay

    name = "layer_token_overhead_s@blackwell"
    true = {**default_start(), name: 0.3e-6}
    cases = []
    for model in ("llama-2-7b", "llama-3.2-3b"):
        for prompt in (512, 2048):
            for conc in (4, 16):
                c = _case(model, prompt)
                run = dataclasses.replace(c.run, name=f"{model}-{prompt}-{conc}", max_concurrency=conc,
                                          num_requests=3 * conc)
                m = replay(run, c.target, true).metrics
                cases.append(Case(dataclasses.replace(run, metrics={k: m[k] for k in (
                    "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "mean_tpot_ms", "mean_e2el_ms",
                    "request_throughput") if m.get(k) is not None}), c.target))
    assert held_at_prior(cases, (name,)) == {}
    start = default_start()
    res = fit(cases, names=(name,), start=start, fixed=dict(start), outer_iterations=3)
    assert res.params[name] == pytest.approx(0.3e-6, rel=0.20)
