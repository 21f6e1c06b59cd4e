"""benchmarks/prefill_attention.py's pure helpers (issue 33, round 13): the three forms of the missing prompt time
over TP, and the Blackwell-only prefill attention share the ``rows`` reading simulates with."""

from __future__ import annotations

import numpy as np
import pytest

from tests.benchmark_module import load_benchmark
from twin.cost.roofline import RooflineCostModel

pa = load_benchmark("prefill_attention")


def test_split_forms_recover_exact_coefficients():
    gemm = np.array([50e-6, 25e-6, 12.5e-6, 6.25e-6])          # falls as 1 / TP, like the attention
    attn = gemm / 6.0
    per_token = pa.split_forms(0.5 * gemm + 12e-6, gemm, attn)
    (k, u), rms = per_token["kG+U"]
    assert k == pytest.approx(0.5) and u == pytest.approx(12e-6) and rms == pytest.approx(0.0, abs=1e-12)
    # a TP-flat part is what the attention form cannot fit: both of its columns fall as 1 / TP
    assert per_token["kG+aA"][1] > 1e-6 and per_token["aA"][1] > 1e-6
    (a,), rms = pa.split_forms(4.0 * attn, gemm, attn)["aA"]
    assert a == pytest.approx(4.0) and rms == pytest.approx(0.0, abs=1e-12)


def _terms(gpu: str):
    return RooflineCostModel("llama-3.1-70b", gpu, 8, "fp8", "fp8")._attention


def test_prefill_attention_share_touches_blackwell_prefill_only():
    b200, h100 = _terms("B200"), _terms("H100-SXM")
    with pa.blackwell_prefill_attention(0.25):
        slow, hopper = _terms("B200"), _terms("H100-SXM")
    assert slow.k_attn_mixed == pytest.approx(4.0 * b200.k_attn_mixed)
    assert slow.k_attn_decode == b200.k_attn_decode and slow.k_kv == b200.k_kv     # decode and KV traffic as before
    assert hopper == h100
    assert _terms("B200") == b200                                                 # restored after the block


def test_windowed_layers_take_the_share_too():
    base = RooflineCostModel("gpt-oss-120b", "B200", 1, "mxfp4", "fp8")._attention
    with pa.blackwell_prefill_attention(0.5):
        slow = RooflineCostModel("gpt-oss-120b", "B200", 1, "mxfp4", "fp8")._attention
    assert base.window and slow.k_attn_win == pytest.approx(2.0 * base.k_attn_win)
    assert slow.k_attn_mixed == pytest.approx(2.0 * base.k_attn_mixed)


def test_attention_shares_parse_and_reject():
    assert pa.attention_shares("0.26") == [0.26]
    assert pa.attention_shares("0.58, 0.17,") == [0.58, 0.17]
    for bad in ("x", "1.5", "0", "-0.1"):
        with pytest.raises(pa.argparse.ArgumentTypeError, match=r"\(0, 1\]"):
            pa.attention_shares(bad)
