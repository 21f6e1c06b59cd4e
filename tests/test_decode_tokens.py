"""Issue 33, round 8: which tokens pay the per-token-per-layer cost (``twin.cost.decode_tokens``,
``layer_token_decode_share``): prior 1 (every token pays, bit-identical to round 7), the discount per sequence by
hand at share 0 and 0.5 on decode and prompt steps, every step function the same, ``explain()``'s parts adding up,
the embedded value on Blackwell's FP8 expert path only, its provenance, and bad values rejected."""

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


def test_embedded_on_blackwell_fp8_experts_only():
    def off(model, gpu, dtype):
        return RooflineCostModel(model, gpu, tensor_parallel_size=2, weight_dtype=dtype)._k_seq_off
    b200_fp8 = RooflineCostModel("MiniMaxAI/MiniMax-M2.5", "B200", tensor_parallel_size=2, weight_dtype="fp8")
    assert b200_fp8._k_seq_off == pytest.approx(0.2e-6 * 62, rel=1e-12)   # share 0: a decode token pays none
    assert b200_fp8.moe_prompt_stream_efficiency == 0.5
    assert off("MiniMaxAI/MiniMax-M2.5", "H100-SXM", "fp8") == 0.0      # Hopper: nothing per token to share
    assert off("MiniMaxAI/MiniMax-M2.5", "B200", "nvfp4") == 0.0
    assert off("llama-3.1-70b", "B200", "fp8") == 0.0                   # dense FP8: not the expert path


def test_provenance_names_the_rows_and_the_prior():
    from twin.fitting.provenance import embedded_entries
    got = {e.parameter: e for e in embedded_entries()}
    for key, value in (("layer_token_decode_share@blackwell+experts_fp8", 0.0),
                       ("moe_prompt_stream_efficiency@blackwell+experts_fp8", 0.5)):
        assert got[key].value == value and got[key].prior == 1.0
        assert "MiniMax-M2.5 FP8" in got[key].evidence


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_bad_values_are_rejected_with_the_name(bad):
    with pytest.raises(TwinInputError, match="layer_token_decode_share"):
        RooflineCostModel(**KW, layer_token_decode_share=bad)
