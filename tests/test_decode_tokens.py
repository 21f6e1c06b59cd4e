"""Issue 33, round 8: which tokens pay the per-token-per-layer cost (``twin.cost.decode_tokens``,
``layer_token_decode_share``): prior 1 (every token pays, bit-identical to round 7), the discount per sequence by
hand at share 0 and 0.5 on decode and prompt steps, every step function the same, ``explain()``'s parts adding up,
nothing embedded (round 8: not adopted), the fit key's scope, its declared evidence, and bad values rejected."""

from __future__ import annotations

import numpy as np
import pytest
from core_helpers import step_shape as step

from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError

KW = dict(model="llama-3.1-70b", gpu="B200", tensor_parallel_size=2, weight_dtype="fp8")   # dense: prior there
DECODE = step([1] * 64, [900] * 64)
PROMPT = step([1024, 1, 1, 1], [0, 900, 900, 900])


def test_prior_is_every_token_and_bit_identical():
    plain, one = RooflineCostModel(**KW), RooflineCostModel(**KW, layer_token_decode_share=1.0)
    assert plain._k_seq_off == 0.0 and one._k_seq_off == 0.0
    for s in (DECODE, PROMPT):
        assert one.step_time_s(s) == plain.step_time_s(s)


@pytest.mark.parametrize("share", [0.0, 0.5])
def test_each_sequence_skips_its_decode_tokens_share(share):
    plain, m = RooflineCostModel(**KW), RooflineCostModel(**KW, layer_token_decode_share=share)
    k_tok = m.layer_token_overhead_s * m.model.num_hidden_layers           # 0.2 us x 80 layers on Blackwell
    assert k_tok == pytest.approx(0.2e-6 * 80, rel=1e-12)
    assert plain.step_time_s(DECODE) - m.step_time_s(DECODE) == pytest.approx((1 - share) * 64 * k_tok, rel=1e-9)
    assert plain.step_time_s(PROMPT) - m.step_time_s(PROMPT) == pytest.approx((1 - share) * 4 * k_tok, rel=1e-9)
    e = m.explain(DECODE)
    assert e["layer_token_overhead_s"] == pytest.approx(share * 64 * k_tok, abs=1e-15)
    assert sum(v for k, v in e.items() if k != "total_s") == pytest.approx(e["total_s"], rel=1e-12)
    pairs = 3 * 900 + 0.5 * (1024 * 1024 + 3 + 1027)
    arr = m.step_times_s(np.array([1027, 64]), np.array([4, 64]), np.array([4, 64]), np.array([2700, 57600]),
                         np.array([pairs, 57664.0]))
    assert arr[0] == pytest.approx(m.step_time_s(PROMPT), rel=1e-12)
    assert arr[1] == pytest.approx(m.step_time_s(DECODE), rel=1e-12)
    assert m.decode_step_times_s(64, 57600, 1)[0] == pytest.approx(m.step_time_s(DECODE), rel=1e-12)


def test_nothing_is_embedded_and_the_fit_key_reaches_blackwell_fp8_experts_only():
    from types import SimpleNamespace as NS

    from twin.fitting.scoped import params_for
    from twin.hardware.catalog import resolve_gpu, resolve_model
    from twin.hardware.weight_formats import WeightFormats
    for model, gpu, dtype in (("MiniMaxAI/MiniMax-M2.5", "B200", "fp8"), ("MiniMaxAI/MiniMax-M2.5", "H100-SXM", "fp8"),
                              ("MiniMaxAI/MiniMax-M2.5", "B200", "nvfp4"), ("llama-3.1-70b", "B200", "fp8")):
        assert RooflineCostModel(model, gpu, tensor_parallel_size=2, weight_dtype=dtype)._k_seq_off == 0.0
    key = "layer_token_decode_share@blackwell+experts_fp8"
    dep = NS(gpu=resolve_gpu("B200"), weight_formats=WeightFormats.uniform("fp8"),
             model=resolve_model("MiniMaxAI/MiniMax-M2.5"))
    assert params_for({key: 0.0}, dep) == {"layer_token_decode_share": 0.0}
    m = RooflineCostModel("MiniMaxAI/MiniMax-M2.5", "B200", tensor_parallel_size=2, weight_dtype="fp8",
                          **params_for({key: 0.0}, dep))
    assert m._k_seq_off == pytest.approx(0.2e-6 * 62, rel=1e-12)        # share 0: a decode token pays none
    hopper = NS(gpu=resolve_gpu("H100-SXM"), weight_formats=WeightFormats.uniform("fp8"), model=dep.model)
    assert params_for({key: 0.0}, hopper) == {}


def test_provenance_declares_the_rows_a_fit_would_read():
    from twin.fitting.provenance import DECLARED_EVIDENCE
    for key in ("layer_token_decode_share@blackwell+experts_fp8", "moe_prompt_stream_efficiency@blackwell+experts_fp8"):
        assert DECLARED_EVIDENCE[key][0] == "the B200 MiniMax-M2.5 FP8 rows"


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_bad_values_are_rejected_with_the_name(bad):
    with pytest.raises(TwinInputError, match="layer_token_decode_share"):
        RooflineCostModel(**KW, layer_token_decode_share=bad)
