"""gpt-oss's active expert share (twin.cost.moe_terms, twin.fitting.routing_prior; issue 33 round 12): the experts a
step touches when a layer's routing draws from only a share of them, the roofline keyword (not embedded: prior 1;
the tried MXFP4 entry acts on MXFP4 experts only), and its evidence (the B200 gpt-oss rows only): the folds holding
any of them out reset it to its stated prior 1, the H100 GPU fold keeps it."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from twin.cost import default_terms, generation_experts
from twin.cost.moe_terms import routed_expert_read_bytes
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.fitting import provenance as pv
from twin.fitting.fit import Case
from twin.fitting.joint import FOLDS, with_deployments
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.replay import Target
from twin.fitting.routing_prior import TERM
from twin.fitting.silicon import SiliconCase
from twin.hardware.catalog import resolve_model
from twin.hardware.moe import expected_experts_touched, touched_fraction

SHARE = 0.75


def test_the_touched_share_is_uniform_over_the_active_experts():
    assert touched_fraction(128, 4, 64, 1.0) == touched_fraction(128, 4, 64)      # the default is the uniform rule
    assert expected_experts_touched(128, 4, 64, 0.75) == pytest.approx(96 * (1 - (1 - 4 / 96) ** 64), rel=1e-12)
    assert expected_experts_touched(128, 4, 1, 0.5) == pytest.approx(4.0)           # one token: its top-k
    assert touched_fraction(128, 4, 100_000, 0.75) == pytest.approx(0.75)           # a large batch: the active set
    assert expected_experts_touched(128, 4, 64, 0.01) == pytest.approx(4.0)         # never fewer than top-k
    assert touched_fraction(128, 4, None, 0.5) == 1.0                               # the all-expert bound
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(TwinInputError, match="moe_active_expert_share"):
            touched_fraction(128, 4, 8, bad)


def test_the_keyword_scales_the_routed_bytes_a_decode_step_reads():
    full = RooflineCostModel("gpt-oss-120b", "B200", 1, "mxfp4", "fp8", moe_active_expert_share=1.0)
    narrow = RooflineCostModel("gpt-oss-120b", "B200", 1, "mxfp4", "fp8", moe_active_expert_share=SHARE)
    model = resolve_model("gpt-oss-120b")
    routed = routed_expert_read_bytes(model, full.weight_formats.routed_experts, 1, 64)
    want = routed / touched_fraction(128, 4, 64) * (touched_fraction(128, 4, 64) - touched_fraction(128, 4, 64, SHARE))
    bandwidth = full.gpu.memory_bandwidth_bytes_per_s * full.memory_efficiency * full.quant_weight_efficiency
    assert (full._moe_weights_s(64) - narrow._moe_weights_s(64)) * bandwidth == pytest.approx(want, rel=1e-4)
    assert full._moe_weights_s(100_000) > narrow._moe_weights_s(100_000)           # a large batch still reads S
    with pytest.raises(TwinInputError, match="moe_active_expert_share"):
        RooflineCostModel("gpt-oss-120b", "B200", 1, "mxfp4", "fp8", moe_active_expert_share=0.0)


def test_nothing_is_embedded_and_an_mxfp4_entry_acts_on_the_mxfp4_experts_on_either_gpu_only(monkeypatch):
    for gpu in ("B200", "H100-SXM"):        # not embedded (round 12): the prior, uniform routing
        assert RooflineCostModel("gpt-oss-120b", gpu, 2, "mxfp4", "fp8").moe_active_expert_share == 1.0
    monkeypatch.setattr(default_terms, "EXPERT_FORMAT_TERMS", {"mxfp4": {"moe_active_expert_share": SHARE}})
    for gpu in ("B200", "H100-SXM"):
        assert RooflineCostModel("gpt-oss-120b", gpu, 2, "mxfp4", "fp8").moe_active_expert_share == SHARE
    assert RooflineCostModel("minimax-m2.5", "B200", 4, "fp8", "fp8").moe_active_expert_share == 1.0
    assert RooflineCostModel("llama-3.1-70b", "B200", 1, "fp8", "fp8").moe_active_expert_share == 1.0


def _run(name: str) -> MeasuredRun:
    return MeasuredRun(name=name, source="test", num_requests=12, rate_per_s=float("inf"), max_concurrency=4,
                       prompt_tokens=LengthSample.constant(512), output_tokens=LengthSample.constant(32),
                       metrics={"completed": 1.0, "mean_ttft_ms": 50.0, "mean_tpot_ms": 10.0},
                       server={"enable_prefix_caching": False, "vllm_version": "0.14"}, experiment=name)


def _silicon(name: str, target: Target, system: str, model_path: str):
    case = Case(_run(name), target)
    obj = object.__new__(SiliconCase)
    for f in dataclasses.fields(SiliconCase):
        object.__setattr__(obj, f.name, getattr(case, f.name, f.default if f.default is not dataclasses.MISSING
                                                else None))
    object.__setattr__(obj, "row", SimpleNamespace(system=system, model_path=model_path, precision="fp4"))
    return obj


@pytest.fixture()
def only_the_share(monkeypatch):
    """The embedded tables with the active share as their one entry, so that the plans below are exact."""
    monkeypatch.setattr(default_terms, "GENERATION_TERMS", {})
    monkeypatch.setattr(default_terms, "EXPERT_FORMAT_TERMS", {"mxfp4": {"moe_active_expert_share": SHARE}})
    monkeypatch.setattr(generation_experts, "GENERATION_EXPERT_TERMS", {})
    monkeypatch.setattr(default_terms, "SYNC_HOST_TERMS", {"sync_seq_host_s": 0.0})


def _evidence():
    """An inference-perf H100 run, a B200 and an H100 gpt-oss row, a B200 MiniMax row."""
    return with_deployments([
        Case(_run("ip-h100"), Target("llama-2-7b", "H100-SXM", 1)),
        _silicon("gptoss-b200", Target("gpt-oss-120b", "B200", 2, weight_dtype="mxfp4"), "b200_sxm",
                 "openai/gpt-oss-120b"),
        _silicon("gptoss-h100", Target("gpt-oss-120b", "H100-SXM", 2, weight_dtype="mxfp4"), "h100_sxm",
                 "openai/gpt-oss-120b"),
        _silicon("minimax-b200", Target("minimax-m2.5", "B200", 4, weight_dtype="fp8"), "b200_sxm",
                 "MiniMaxAI/MiniMax-M2.5")])


def test_its_evidence_is_the_b200_gpt_oss_rows_and_its_prior_uniform_routing(only_the_share):
    entry = {e.parameter: e for e in pv.embedded_entries()}[TERM]
    assert (entry.value, entry.prior, entry.table) == (SHARE, 1.0, "EXPERT_FORMAT_TERMS")
    assert entry.evidence.startswith("the B200 gpt-oss-120b rows")
    (_, ip), (b200, b200_dep), (h100, h100_dep), (minimax, minimax_dep) = _evidence()
    assert entry.is_evidence(b200, b200_dep)
    assert not entry.is_evidence(h100, h100_dep) and not entry.is_evidence(minimax, minimax_dep)


@pytest.mark.parametrize("kind, group", [("GPU", "B200"), ("source", "silicon"), ("family", "gpt-oss")])
def test_the_folds_holding_its_rows_out_reset_it_to_uniform_routing(only_the_share, kind, group):
    plan = pv.fold_plan(group, FOLDS[kind], _evidence(), ())
    assert plan.actions[TERM][1] == pv.RESET and plan.fixed == {TERM: 1.0}


@pytest.mark.parametrize("kind, group", [("GPU", "H100-SXM"), ("source", "inference-perf"), ("family", "minimax")])
def test_the_folds_keeping_its_rows_keep_it(only_the_share, kind, group):
    plan = pv.fold_plan(group, FOLDS[kind], _evidence(), ())
    assert TERM not in plan.actions and TERM not in plan.fixed
