"""twin.hardware.pool_memory: CUDA's device total and the fused-MoE workspaces in the KV budget (issue 33, round 15)."""

from __future__ import annotations

import pytest

from twin.errors import TwinInputError
from twin.hardware.catalog import resolve_gpu, resolve_model
from twin.hardware.kv_sizing import kv_pool_breakdown
from twin.hardware.parallel import ParallelLayout
from twin.hardware.pool_memory import CUDA_TOTAL_GIB, cuda_total_bytes, moe_workspace_bytes

GIB = 2**30


def test_cuda_totals():
    assert cuda_total_bytes(resolve_gpu("H100-SXM")) == round(79.19 * GIB)
    assert cuda_total_bytes(resolve_gpu("B200")) == round(178.35 * GIB)
    a100 = resolve_gpu("A100-SXM-80GB")                      # no reading: the catalogue's total
    assert a100.name not in CUDA_TOTAL_GIB and cuda_total_bytes(a100) == int(a100.memory_bytes)
    for name in CUDA_TOTAL_GIB:                              # CUDA never sees more than nvidia-smi's total
        assert cuda_total_bytes(resolve_gpu(name)) < resolve_gpu(name).memory_bytes


def test_pool_from_cuda_total_by_hand():
    # Llama-3.1-8B, H100, vLLM's defaults otherwise: only the budget differs, 0.9 x CUDA's 79.19 GiB
    budget = int(round(79.19 * GIB) * 0.9)
    weights, runtime, block = 2 * 8_030_261_248, GIB, 16 * 128 * 1024
    activations = 8192 * 4096 * 2 + 256 * 128256 * (2 + 22)
    b = kv_pool_breakdown("llama-3.1-8b", "H100-SXM", cuda_total=True)
    assert (b.memory_bytes, b.budget_bytes, b.activation_reserve_bytes) == (round(79.19 * GIB), budget, activations)
    assert b.num_gpu_blocks == (budget - weights - activations - runtime) // block == 27912
    assert kv_pool_breakdown("llama-3.1-8b", "H100-SXM").num_gpu_blocks == 28123     # off: the catalogue's total
    with pytest.raises(TwinInputError, match="cuda_total"):
        kv_pool_breakdown("llama-3.1-8b", "H100-SXM", cuda_total="yes")
    with pytest.raises(TwinInputError, match="moe_workspace"):
        kv_pool_breakdown("llama-3.1-8b", "H100-SXM", moe_workspace=1)


def test_moe_workspace_by_hand():
    m = resolve_model("minimax-m2.5")                        # hidden 3072, top-8 of 256 experts 1536 wide
    # TP 2, no expert parallelism: each expert split in two (768 wide per GPU): max(768, 3072) + max(1536, 3072)
    tp2 = ParallelLayout(tensor_parallel_size=2)
    assert moe_workspace_bytes(m, tp2, 16384, 2) == 2 * (16384 * 2 * 3072 + 16384 * 8 * (3072 + 3072))
    # TP 4 with expert parallelism: experts whole (1536 wide): max(1536, 3072) + max(3072, 3072)
    ep4 = ParallelLayout(tensor_parallel_size=4, enable_expert_parallel=True)
    assert moe_workspace_bytes(m, ep4, 8192, 2) == 2 * (8192 * 2 * 3072 + 8192 * 8 * (3072 + 3072))
    # in the pool: the forward phase is the larger one here (256 sequences: a small sampler phase)
    on = kv_pool_breakdown(m, "H100-SXM", tp=4, layout=ep4, weight_dtype="fp8", max_num_seqs=256,
                           sampler_release="0.18.0", moe_workspace=True)
    off = kv_pool_breakdown(m, "H100-SXM", tp=4, layout=ep4, weight_dtype="fp8", max_num_seqs=256,
                            sampler_release="0.18.0")
    assert on.activation_reserve_bytes == moe_workspace_bytes(m, ep4, 8192, 2)
    assert off.activation_reserve_bytes == 8192 * 3072 * 2 + 256 * 200064 * (2 + 12)
    # a dense model is not affected
    assert kv_pool_breakdown("llama-3.1-8b", "H100-SXM", moe_workspace=True).num_gpu_blocks == 28123


def test_non_torch_reading_reproduces_the_ground_truth_pool():
    # the one vLLM pool figure in the ground truth: Llama-2-7B TP 1 on an H100, 7,463 blocks of 16 tokens
    from twin.hardware.pool_memory import NON_TORCH_RESERVE_BYTES
    kw = dict(tp=1, max_num_batched_tokens=2048, max_num_seqs=128, max_model_len=4096)
    assert kv_pool_breakdown("llama-2-7b", "H100-SXM", cuda_total=True, runtime_reserve_bytes=NON_TORCH_RESERVE_BYTES,
                             **kw).num_gpu_blocks == 7463
    assert kv_pool_breakdown("llama-2-7b", "H100-SXM", **kw).num_gpu_blocks == 7420          # embedded
    assert kv_pool_breakdown("llama-2-7b", "H100-SXM", cuda_total=True, **kw).num_gpu_blocks == 7367
