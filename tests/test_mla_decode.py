"""MLA's fixed time per decoder layer and step (twin.cost.mla_decode; issue 33, round 8): embedded for MLA models
only, named in explain(), scoped ``@mla`` for the fit, and reset to its prior 0 by a fold that holds out the MLA
rows (Kimi-K2.5 in the data)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from twin.cost.mla_decode import MLA_TERMS, mla_term
from twin.cost.roofline import RooflineCostModel
from twin.core.scheduler_output import SchedulerOutput
from twin.fitting import provenance as pv
from twin.fitting.fit import Case
from twin.fitting.joint import FOLDS, default_start
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.replay import Target
from twin.fitting.scoped import in_scope, params_for
from twin.fitting.silicon import SiliconCase
from twin.hardware.catalog import resolve_model

KIMI = resolve_model("kimi-k2.5")


def _decode(n: int, context: int) -> SchedulerOutput:
    return SchedulerOutput(step_index=0, num_new_tokens=[1] * n, num_computed_before=[context] * n,
                           num_spec_tokens=[0] * n)


def test_the_embedded_value_and_which_models_take_it():
    assert MLA_TERMS == {"layer_overhead_s": 13.2e-6}
    assert KIMI.is_mla and KIMI.num_hidden_layers == 61
    assert mla_term(KIMI, "layer_overhead_s") == 13.2e-6
    assert mla_term(KIMI, "step_overhead_s") is None                       # only the terms in the table
    assert mla_term(resolve_model("llama-3.1-70b"), "layer_overhead_s") is None
    assert RooflineCostModel(KIMI, "B200", 4, weight_dtype="nvfp4").layer_overhead_s == 13.2e-6
    for other in (RooflineCostModel("llama-3.1-70b", "B200", 4), RooflineCostModel("mixtral-8x7b", "H100-SXM", 2)):
        assert other.layer_overhead_s == 0.0                               # GQA models keep the prior
    # a given value wins over the embedded one
    assert RooflineCostModel(KIMI, "B200", 4, weight_dtype="nvfp4", layer_overhead_s=0.0).layer_overhead_s == 0.0


@pytest.mark.parametrize("n, context", [(1, 100), (4, 1000), (64, 8000)])
def test_every_step_pays_61_layers_of_it_and_explain_names_it(n, context):
    cm = RooflineCostModel(KIMI, "B200", 4, weight_dtype="nvfp4")
    prior = RooflineCostModel(KIMI, "B200", 4, weight_dtype="nvfp4", layer_overhead_s=0.0)
    step = _decode(n, context)
    assert cm.step_time_s(step) - prior.step_time_s(step) == pytest.approx(61 * 13.2e-6, rel=1e-9)
    parts = cm.explain(step)
    assert parts["layer_overhead_s"] == pytest.approx(61 * 13.2e-6, rel=1e-12)
    assert parts["overhead_s"] == pytest.approx(prior.explain(step)["overhead_s"], rel=1e-12)
    assert sum(v for k, v in parts.items() if k != "total_s") == pytest.approx(parts["total_s"], rel=1e-12)
    assert "layer_overhead_s" not in prior.explain(step)


def test_the_fit_key_is_scoped_to_mla_models():
    kimi, llama = SimpleNamespace(model=KIMI), SimpleNamespace(model=resolve_model("llama-3.1-70b"))
    assert in_scope("mla", kimi) and not in_scope("mla", llama)
    params = {"layer_overhead_s": 0.0, "layer_overhead_s@mla": 20e-6}
    assert params_for(params, kimi) == {"layer_overhead_s": 20e-6}
    assert params_for(params, llama) == {"layer_overhead_s": 0.0}
    start = default_start()
    assert start["layer_overhead_s@mla"] == 13.2e-6 and start["layer_overhead_s"] == 0.0


def _row(name: str, model: str, weight_dtype: str, tp: int) -> SiliconCase:
    run = MeasuredRun(name=name, source="test", num_requests=12, rate_per_s=float("inf"), max_concurrency=4,
                      prompt_tokens=LengthSample.constant(512), output_tokens=LengthSample.constant(32),
                      metrics={"completed": 1.0, "mean_ttft_ms": 50.0, "mean_tpot_ms": 10.0},
                      server={"enable_prefix_caching": False, "vllm_version": "0.17"}, experiment=name)
    case = Case(run, Target(model, "B200", tp, weight_dtype=weight_dtype))
    obj = object.__new__(SiliconCase)
    for f in dataclasses.fields(SiliconCase):
        object.__setattr__(obj, f.name, getattr(case, f.name, f.default if f.default is not dataclasses.MISSING
                                                else None))
    return obj


def test_its_evidence_is_the_mla_rows_and_their_family_fold_resets_it_to_0():
    entry = {e.parameter: e for e in pv.embedded_entries()}["layer_overhead_s@mla"]
    assert (entry.value, entry.prior, entry.table) == (13.2e-6, 0.0, "MLA_TERMS")
    assert entry.evidence == "every ground-truth row on mla"
    from twin.fitting.joint import with_deployments
    ev = with_deployments([_row("kimi", "kimi-k2.5", "nvfp4", 8), _row("llama", "llama-3.1-70b", "fp8", 4)])
    assert [entry.is_evidence(c, d) for c, d in ev] == [True, False]
    kimi_fold = pv.fold_plan("kimi", FOLDS["family"], ev, ())
    assert kimi_fold.fixed["layer_overhead_s@mla"] == 0.0
    assert kimi_fold.actions["layer_overhead_s@mla"][1] == pv.RESET
    assert "layer_overhead_s@mla" not in pv.fold_plan("llama", FOLDS["family"], ev, ()).actions
