"""KV pool sizing: a hand-computed case, the override, the errors."""

from __future__ import annotations

import pytest

from twin.errors import TwinInputError
from twin.hardware.kv_sizing import kv_pool_breakdown, num_gpu_blocks

GIB = 2**30


def test_llama_8b_on_h100_by_hand():
    # H100-SXM reports 81559 MiB; 0.9 of it is the budget
    memory = 81559 * 2**20
    budget = int(memory * 0.9)                                   # 76_968_728_985
    weights = 2 * 8_030_261_248                                   # bf16, tp=1
    # the profile's peak: the forward (838 MB) or the dummy sampler beside the forward's output (855 MB)
    activations = max(8192 * 2 * (2 * 4096 + 3 * 14336), 8192 * 4096 * 2 + 256 * 128256 * (2 + 22))
    assert activations == 855_113_728
    runtime = 1 * GIB
    block = 16 * 128 * 1024                                       # 16 tokens x 128 KiB
    expected = (budget - weights - activations - runtime) // block
    assert expected == 28123
    b = kv_pool_breakdown("llama-3.1-8b", "H100-SXM", tp=1, block_size=16, gpu_memory_utilization=0.9,
                          weight_dtype="bf16", kv_dtype="bf16", max_num_batched_tokens=8192)
    assert b.num_gpu_blocks == expected
    assert (b.budget_bytes, b.weight_bytes, b.activation_reserve_bytes, b.runtime_reserve_bytes) == \
        (budget, weights, activations, runtime)
    assert b.kv_bytes_per_block == block
    assert b.usable_blocks == expected - 1                        # block 0 is the null block
    assert b.capacity_tokens == (expected - 1) * 16
    assert num_gpu_blocks("llama-3.1-8b", "H100-SXM", 1, 16, 0.9, "bf16", "bf16", 8192) == expected
    assert "28123 blocks" in b.summary()


def test_reserves_are_parameters():
    b = kv_pool_breakdown("llama-3.1-8b", "h100", activation_reserve_bytes=0, runtime_reserve_bytes=0)
    assert b.num_gpu_blocks == (int(81559 * 2**20 * 0.9) - 2 * 8_030_261_248) // (16 * 128 * 1024)


def test_more_memory_more_blocks():
    base = num_gpu_blocks("llama-3.1-8b", "h100")
    assert num_gpu_blocks("llama-3.1-8b", "h100", gpu_memory_utilization=0.95) > base
    assert num_gpu_blocks("llama-3.1-8b", "h100", kv_dtype="fp8") > 1.9 * base
    assert num_gpu_blocks("llama-3.1-8b", "h100", weight_dtype="fp8") > base
    assert num_gpu_blocks("llama-3.1-8b", "h100", block_size=32) == pytest.approx(base / 2, abs=1)
    assert num_gpu_blocks("llama-3.1-8b", "h200") > 1.95 * base


def test_tensor_parallel_sizing():
    b = kv_pool_breakdown("llama-3.1-70b", "H100-SXM", tp=4)
    assert b.kv_bytes_per_token == 320 * 1024 // 4
    assert b.num_gpu_blocks > 20000


def test_override():
    b = kv_pool_breakdown("llama-3.1-8b", "h100", num_gpu_blocks_override=11)
    assert b.num_gpu_blocks == 11 and b.overridden and b.usable_blocks == 10
    assert num_gpu_blocks("tiny-llama", "cpu", num_gpu_blocks_override=100) == 100
    with pytest.raises(TwinInputError, match="num_gpu_blocks_override"):
        num_gpu_blocks("llama-3.1-8b", "h100", num_gpu_blocks_override=1)
    with pytest.raises(TwinInputError, match="num_gpu_blocks_override"):
        num_gpu_blocks("llama-3.1-8b", "h100", num_gpu_blocks_override=0)


def test_weights_do_not_fit():
    with pytest.raises(TwinInputError) as e:
        num_gpu_blocks("llama-3.1-70b", "H100-SXM", tp=1)
    msg = str(e.value)
    assert "llama-3.1-70b" in msg and "131.4 GiB" in msg and "tensor_parallel_size=1" in msg and "0.9" in msg
    # even with an override, weights larger than the whole GPU cannot load
    with pytest.raises(TwinInputError, match="llama-3.1-70b"):
        num_gpu_blocks("llama-3.1-70b", "H100-SXM", tp=1, num_gpu_blocks_override=100)
    # weights fit but nothing is left for the KV cache
    with pytest.raises(TwinInputError, match="no room for the KV cache"):
        num_gpu_blocks("llama-3.1-8b", "RTX-4090", gpu_memory_utilization=0.65)


def test_max_model_len_must_fit():
    kv_pool_breakdown("llama-3.1-8b", "h100", max_model_len=131072)
    with pytest.raises(TwinInputError, match="max_model_len = 131072"):
        kv_pool_breakdown("llama-3.1-8b", "L4", max_model_len=131072, weight_dtype="fp8")


@pytest.mark.parametrize("kwargs, field", [({"gpu_memory_utilization": 0}, "gpu_memory_utilization"),
                                           ({"gpu_memory_utilization": 1.2}, "gpu_memory_utilization"),
                                           ({"block_size": 0}, "block_size"),
                                           ({"max_num_batched_tokens": -5}, "max_num_batched_tokens"),
                                           ({"kv_dtype": "int4"}, "kv_dtype"),
                                           ({"tp": 3}, "tensor_parallel_size")])
def test_bad_inputs(kwargs, field):
    with pytest.raises(TwinInputError, match=field):
        kv_pool_breakdown("llama-3.1-8b", "h100", **kwargs)


@pytest.mark.parametrize("weight_dtype, kv_dtype", [("awq", "fp8"), ("fp8", "fp8"), ("nf4", "bf16"),
                                                    ("int8", "fp8")])
def test_quantized_70b_pool_follows_vllms_rule(weight_dtype, kv_dtype):
    # vLLM: available = total x utilization - weights (as loaded) - activation peak - non-torch memory;
    # num_blocks = available // (block_size x per-token KV bytes of all layers)
    from twin.hardware.catalog import linear_weight_bytes, resolve_model
    m = resolve_model("llama-3.1-70b")
    budget = int(81559 * 2**20 * 0.9)
    other = 2 * (2 * 128256 * 8192 + 80 * 2 * 8192 + 8192)           # embedding, LM head, norms in bf16
    weights = linear_weight_bytes(m.linear_params, weight_dtype) + other
    activations = max(8192 * 2 * (2 * 8192 + 3 * 28672), 8192 * 8192 * 2 + 256 * 128256 * 24)
    kv_token = 80 * 2 * 8 * 128 * (1 if kv_dtype == "fp8" else 2)
    expected = (budget - weights - activations - GIB) // (16 * kv_token)
    b = kv_pool_breakdown("llama-3.1-70b", "H100-SXM", tp=1, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    assert (b.weight_bytes, b.kv_bytes_per_token, b.num_gpu_blocks) == (weights, kv_token, expected)
    assert b.weight_dtype == {"awq": "int4", "nf4": "nf4", "fp8": "fp8", "int8": "int8"}[weight_dtype]


def test_awq_pool_by_hand():
    b = kv_pool_breakdown("llama-3.1-70b", "H100-SXM", weight_dtype="awq", kv_dtype="fp8")
    assert b.num_gpu_blocks == 13141                 # ~210k fp8 KV tokens beside ~40 GB of AWQ weights
    assert 39e9 < b.weight_bytes < 41e9
    with pytest.raises(TwinInputError, match="weights per GPU"):
        kv_pool_breakdown("llama-3.1-70b", "H100-SXM", weight_dtype="bf16")


def test_moe_pool():
    # Mixtral-8x7B at tp=2: every expert's weights are loaded (each expert sharded), 8 kv heads -> 4 per GPU
    from twin.hardware.catalog import resolve_model
    m = resolve_model("mixtral-8x7b")
    b = kv_pool_breakdown(m, "H100-SXM", tp=2)
    assert b.weight_bytes == m.weight_bytes("bf16", 2) == pytest.approx(46.70e9, rel=0.002)   # 93.4 GB / 2
    assert b.kv_bytes_per_token == 32 * 2 * 4 * 128 * 2
    # the fused-MoE activation peak: top-2 experts' intermediate (2 x 14336), split over tp; it exceeds the
    # dummy sampler's (256 x 32k logits at 24 bytes beside the 8192 x 4096 output hidden states)
    assert b.activation_reserve_bytes == 8192 * 2 * (2 * 4096 + 3 * (2 * 14336 // 2))


def test_profile_peak_is_the_larger_phase():
    # vLLM's profile run: the forward at max_num_batched_tokens, then (its intermediates freed) the dummy
    # sampler's top-k/top-p pass over min(max_num_seqs, max_num_batched_tokens) logit rows beside the
    # forward's output hidden states; bf16 logits + 22 bytes per logit (fp32 copy, sorted, int64 indices,
    # softmax, two masks)
    from twin.hardware.kv_sizing import SAMPLER_BYTES_PER_LOGIT, estimate_activation_bytes
    from twin.hardware.catalog import resolve_model
    assert SAMPLER_BYTES_PER_LOGIT == 22
    m = resolve_model("llama-3.1-8b")
    forward = 8192 * 2 * (2 * 4096 + 3 * 14336)
    for seqs in (1, 64, 256, 1024):
        sampler = 8192 * 4096 * 2 + seqs * 128256 * (2 + 22)
        assert estimate_activation_bytes(m, 1, 8192, seqs) == max(forward, sampler)
    assert estimate_activation_bytes(m, 1, 8192, 64) == forward             # the forward's peak
    assert estimate_activation_bytes(m, 1, 8192, 1024) == 8192 * 4096 * 2 + 1024 * 128256 * 24
    # one logit row per dummy request, and a step of 512 tokens runs at most 512 of them
    assert estimate_activation_bytes(m, 1, 512, 1024) == max(512 * 2 * (2 * 4096 + 3 * 14336),
                                                             512 * 4096 * 2 + 512 * 128256 * 24)


def test_sampler_reserve_grows_with_max_num_seqs():
    small = kv_pool_breakdown("llama-3.1-8b", "H100-SXM", max_num_seqs=64)
    large = kv_pool_breakdown("llama-3.1-8b", "H100-SXM", max_num_seqs=1024)
    extra = large.activation_reserve_bytes - small.activation_reserve_bytes
    assert extra == 8192 * 4096 * 2 + 1024 * 128256 * 24 - 8192 * 2 * (2 * 4096 + 3 * 14336)
    assert small.num_gpu_blocks - large.num_gpu_blocks == pytest.approx(extra / (16 * 128 * 1024), abs=1)


def test_sampler_reserve_by_release_in_blocks():
    # twin.hardware.pool_release applied (not the default): Llama-3.1-8B, H100, 1024 sequences; only the sampler
    # phase differs between releases, at 12 (FlashInfer, Triton) or 36 (the sort) bytes per logit beyond the
    # bf16 logits, so the pools differ by exactly 1024 x 128256 x 24 bytes of budget, in whole 2 MiB blocks
    from twin.hardware.kv_sizing import SAMPLER_BYTES_PER_LOGIT, estimate_activation_bytes
    from twin.hardware.catalog import resolve_model
    budget, weights, runtime, block = int(81559 * 2**20 * 0.9), 2 * 8_030_261_248, GIB, 16 * 128 * 1024
    hidden = 8192 * 4096 * 2
    blocks = {}
    for version, path, per_logit in (("0.10.2", "flashinfer", 12), ("0.11.0", "flashinfer", 12),
                                     ("0.11.1", "sort", 36), ("0.16.0", "sort", 36), ("0.17.0", "triton", 12),
                                     ("0.20.1", "triton", 12), ("0.21.0", "flashinfer", 12),
                                     ("nightly", "flashinfer", 12)):
        b = kv_pool_breakdown("llama-3.1-8b", "H100-SXM", max_num_seqs=1024, sampler_release=version)
        assert b.sampler_path == path
        assert b.activation_reserve_bytes == hidden + 1024 * 128256 * (2 + per_logit)
        assert b.num_gpu_blocks == (budget - weights - b.activation_reserve_bytes - runtime) // block
        blocks[path] = b.num_gpu_blocks
    assert (blocks["flashinfer"], blocks["sort"]) == (27622, 26119)
    # the embedded rule: the sort at 22 bytes for every release (no sampler_release)
    b = kv_pool_breakdown("llama-3.1-8b", "H100-SXM", max_num_seqs=1024)
    assert SAMPLER_BYTES_PER_LOGIT == 22 and b.sampler_path == ""
    assert b.activation_reserve_bytes == hidden + 1024 * 128256 * 24
    m = resolve_model("llama-3.1-8b")
    assert estimate_activation_bytes(m, 1, 8192, 1024, "bf16", "sort") == hidden + 1024 * 128256 * 38
    # a reserve given by hand is used as given, whatever the release
    b = kv_pool_breakdown("llama-3.1-8b", "H100-SXM", activation_reserve_bytes=0, sampler_release="0.12.0")
    assert b.activation_reserve_bytes == 0 and b.sampler_path == ""
    with pytest.raises(TwinInputError, match="sampler_release"):
        kv_pool_breakdown("llama-3.1-8b", "H100-SXM", sampler_release="latest")
