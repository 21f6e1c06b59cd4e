"""A Hopper MoE expert path held out (issue 33, round 10): a fold that resets a Hopper expert path's embedded values
(or refits its per-token entry as the dense unscoped term) gives the path ``layer_token_overhead_s@hopper+experts_
<fmt>`` at the geometric mean of the TP-split MoE per-token readings whose rows it keeps (twin.fitting.
path_token_prior); never a Blackwell path, never where no reading's rows are kept."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from tests.fitting_helpers import provenance_entry
from twin.fitting import path_token_prior as ptp
from twin.fitting import provenance as pv


def _row(system: str, model: str):
    return SimpleNamespace(row=SimpleNamespace(system=system, model_path=model))


GPTOSS_H100 = _row("h100_sxm", "openai/gpt-oss-120b")
KIMI_B200 = _row("b200_sxm", "moonshotai/Kimi-K2.5")
MINIMAX_B200 = _row("b200_sxm", "MiniMaxAI/MiniMax-M2.5")
MINIMAX_H100 = _row("h100_sxm", "MiniMaxAI/MiniMax-M2.5")
EVIDENCE = [(c, None) for c in (GPTOSS_H100, KIMI_B200, MINIMAX_B200, MINIMAX_H100)]


def _family(case) -> str:
    return case.row.model_path.split("/")[0]


def _plan(*parameters: str, action: str = pv.RESET) -> pv.FoldPlan:
    return pv.FoldPlan({p: (provenance_entry(p, 0.5), action) for p in parameters}, {}, {}, {})


def test_the_readings_whose_rows_the_fold_keeps():
    assert ptp.kept_readings([]) == [0.195e-6, 0.241e-6, 0.146e-6]
    assert ptp.kept_readings([(MINIMAX_B200, None)]) == [0.195e-6, 0.241e-6]
    # a MiniMax H100 row is none of the readings' rows
    assert ptp.kept_readings([(MINIMAX_H100, None)]) == [0.195e-6, 0.241e-6, 0.146e-6]
    assert ptp.kept_readings([(c, None) for c in (GPTOSS_H100, KIMI_B200, MINIMAX_B200)]) == []


def test_held_paths_are_hopper_expert_paths_only():
    actions = _plan("moe_expert_compute_efficiency@hopper+experts_fp8", "layer_token_overhead_s@hopper+experts_mxfp4",
                    "fused_allreduce_latency_s@blackwell+experts_mxfp4", "moe_layer_overhead_s@experts_int4",
                    "layer_token_overhead_s@blackwell", "memory_efficiency").actions
    assert ptp.held_paths(actions) == {("hopper", "fp8"), ("hopper", "mxfp4")}


def test_the_minimax_fold_pools_the_other_families_readings():
    plan = _plan("moe_expert_compute_efficiency@hopper+experts_fp8", "moe_layer_overhead_s@hopper+experts_fp8")
    prior = ptp.path_token_prior(plan, "MiniMaxAI", _family, EVIDENCE)
    # MiniMax's own B200 reading is held out with its family: gpt-oss H100 and Kimi B200 remain; its block-FP8
    # (wgmma) path's reset efficiency takes the dense rate beside it, not the Marlin paths' pooled value
    assert prior == {"layer_token_overhead_s@hopper+experts_fp8": pytest.approx(math.sqrt(0.195e-6 * 0.241e-6),
                                                                                rel=1e-12),
                     "layer_token_decode_share@hopper+experts_fp8": 0.0,
                     "moe_expert_compute_efficiency@hopper+experts_fp8": 1.0}


def test_a_path_refit_as_its_unscoped_term_takes_it_too():
    plan = _plan("layer_token_overhead_s@hopper+experts_mxfp4", action=pv.REFIT)
    prior = ptp.path_token_prior(plan, "openai", _family, EVIDENCE)
    assert prior == {"layer_token_overhead_s@hopper+experts_mxfp4": pytest.approx(math.sqrt(0.241e-6 * 0.146e-6),
                                                                                  rel=1e-12),
                     "layer_token_decode_share@hopper+experts_mxfp4": 0.0}


def test_a_marlin_paths_reset_efficiency_keeps_its_carried_prior():
    plan = _plan("moe_expert_compute_efficiency@hopper+experts_mxfp4", "layer_token_overhead_s@hopper+experts_mxfp4")
    prior = ptp.path_token_prior(plan, "openai", _family, EVIDENCE)
    assert set(prior) == {"layer_token_overhead_s@hopper+experts_mxfp4",
                          "layer_token_decode_share@hopper+experts_mxfp4"}


def test_nothing_without_a_held_hopper_path_or_a_kept_reading():
    assert ptp.path_token_prior(_plan("layer_token_overhead_s@blackwell"), "openai", _family, EVIDENCE) == {}
    assert ptp.path_token_prior(_plan(), "openai", _family, EVIDENCE) == {}
    # every reading's rows held out (the silicon-held-out source fold): nothing
    plan = _plan("moe_expert_compute_efficiency@hopper+experts_fp8")
    assert ptp.path_token_prior(plan, "silicon", lambda c: "silicon", EVIDENCE) == {}


def test_switched_off_the_folds_are_round_9s(monkeypatch):
    monkeypatch.setattr(ptp, "ENABLED", False)
    plan = _plan("moe_expert_compute_efficiency@hopper+experts_fp8")
    assert ptp.path_token_prior(plan, "MiniMaxAI", _family, EVIDENCE) == {}
