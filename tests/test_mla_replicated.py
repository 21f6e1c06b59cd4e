"""MLA's down projections are whole on every tensor-parallel rank (twin.hardware.mla_replicated): the bytes a
GPU holds and streams and the FLOPs it runs per token, by hand on Kimi-K2.5 (bf16 attention, INT4 experts)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from twin.cost.deployment_terms import linear_seconds_per_token
from twin.hardware.catalog import resolve_gpu, resolve_model
from twin.hardware.mla_replicated import replicated_attention_bytes, replicated_attention_params
from twin.hardware.weight_formats import WeightFormats

KIMI = resolve_model("kimi-k2.5")
INT4 = WeightFormats(routed_experts="int4-g32-sym")


def test_kimi_keeps_61_layers_of_7168_x_2112_weights_on_every_rank():
    assert replicated_attention_params(KIMI) == 61 * 7168 * (1536 + 512 + 64) == 923_467_776
    assert replicated_attention_bytes(KIMI, "bf16") == 2 * 923_467_776                 # 1.85 GB
    # NVFP4: 0.5 + 1/16 bytes a weight plus a 4-byte FP32 scale per tensor (q_a and kv_a in each layer)
    assert replicated_attention_bytes(KIMI, "nvfp4") == Fraction(9, 16) * 923_467_776 + 4 * 2 * 61
    assert replicated_attention_params(resolve_model("llama-3.1-8b")) == 0


def test_the_replicated_projections_add_seven_eighths_of_their_bytes_per_gpu_at_tp8(monkeypatch):
    import twin.hardware.models as models
    with_whole = {tp: (KIMI.weight_bytes(INT4, tp), KIMI.weight_read_bytes(INT4, tp, 32)) for tp in (1, 8)}
    monkeypatch.setattr(models, "replicated_attention_bytes", lambda model, fmt: 0)      # split like the rest
    split = {tp: (KIMI.weight_bytes(INT4, tp), KIMI.weight_read_bytes(INT4, tp, 32)) for tp in (1, 8)}
    whole = 2 * 923_467_776
    assert with_whole[1] == split[1]                               # one GPU: nothing to replicate
    for held, streamed in zip(with_whole[8], split[8]):            # bytes held, bytes a 32-token step streams
        assert held - streamed == pytest.approx(whole * 7 / 8, abs=1)    # 1.62 GB more on every GPU


def test_every_rank_multiplies_the_replicated_projections_for_every_token():
    b200 = resolve_gpu("B200")
    k1 = linear_seconds_per_token(KIMI, b200, INT4, 1, 0.6)
    k8 = linear_seconds_per_token(KIMI, b200, INT4, 8, 0.6)
    whole = replicated_attention_params(KIMI)
    # all groups of this checkpoint run at the bf16 rate (W4A16 experts too): tp8 = tp1 / 8 + 7/8 of the
    # projections' 2 FLOPs per weight
    assert k8 == pytest.approx(k1 / 8 + 2 * whole * 7 / 8 / (b200.flops("bf16") * 0.6), rel=1e-12)
    llama = resolve_model("llama-3.1-70b")
    assert linear_seconds_per_token(llama, b200, WeightFormats(), 8, 0.6) == pytest.approx(
        linear_seconds_per_token(llama, b200, WeightFormats(), 1, 0.6) / 8, rel=1e-12)
