"""The device total vLLM sizes its KV budget from: CUDA's, not nvidia-smi's.

vLLM's worker takes ``requested_memory = ceil(total x gpu_memory_utilization)`` with ``total`` from
``torch.cuda.mem_get_info`` (``cudaMemGetInfo``; ``MemorySnapshot.measure`` and ``request_memory`` in
``vllm/v1/worker``, 0.12 - 0.19). That total is smaller than the "Total" nvidia-smi prints (the twin's catalogue
``GpuSpec.memory_bytes``): the driver keeps part of the memory out of CUDA's view.

What CUDA reports, read off vLLM's own start-up line "Free memory on device (free/total GiB) on startup is less
than desired GPU memory utilization (u, u x total GiB)", quoted in public logs of different machines:

* H100 SXM 80 GB: 79.14 - 79.35 GiB across eleven quoted lines (driver-dependent), median **79.19 GiB**
  (nvidia-smi: 81,559 MiB = 79.65 GiB; 0.46 GiB less);
* B200: **178.35 GiB** in every quoted line (nvidia-smi: 183,359 MiB = 179.06 GiB; 0.71 GiB less).

A GPU not listed keeps its catalogue figure (no reading: the prior is "no difference"). Applied by
``twin.hardware.kv_sizing.kv_pool_breakdown(cuda_total=True)``; docs/fidelity.md, "Round 15: memory outside the KV
cache".
"""

from __future__ import annotations

from twin.hardware.gpus import GpuSpec

GIB = 2**30
# GPU catalogue name -> the total cudaMemGetInfo reports (bytes), from vLLM's start-up lines (module docstring)
CUDA_TOTAL_GIB: dict[str, float] = {
    "H100-SXM": 79.19,
    "B200": 178.35,
}


def cuda_total_bytes(gpu: GpuSpec) -> int:
    """The device total vLLM's memory profile sees for ``gpu``: CUDA's where read, else the catalogue's."""
    gib = CUDA_TOTAL_GIB.get(gpu.name)
    if gib is None:
        return int(gpu.memory_bytes)
    return min(int(gpu.memory_bytes), round(gib * GIB))


def moe_workspace_bytes(model, layout, tokens: int, activation_bytes: int) -> int:
    """The forward phase's peak in a MoE layer of the profile run at ``tokens`` tokens, per GPU: the residual and
    normed input (2 x hidden per token) and the fused-MoE kernel's two workspaces per routed slot (tokens x top_k
    slots; vLLM 0.17 - 0.19's modular Triton experts, ``TritonExperts.workspace_shapes``: workspace13 = slots x
    max(N / 2, K), workspace2 = slots x max(N, K), N = the gate-up output width per GPU (2 x the expert width over
    the GPUs that split each expert: tp x dp without expert parallelism, 1 with it), K = hidden), both in the
    activation dtype. The FlashInfer CUTLASS and TRT-LLM experts hold the same order per slot inside the kernel
    (permuted input, both GEMMs' outputs). Shared experts run beside them as a dense MLP (3 x width per token)."""
    split = 1 if layout.enable_expert_parallel else layout.moe_shards
    width = -(-model.moe_intermediate_size // split)                # the expert width per GPU (N / 2)
    k = model.hidden_size
    slots = tokens * model.num_experts_per_tok
    shared = 3 * -(-model.shared_expert_width // layout.tp) if model.shared_expert_width else 0
    per_token = 2 * k + shared
    return activation_bytes * (tokens * per_token + slots * (max(width, k) + max(2 * width, k)))


# The non-torch increase vLLM charges (cuBLAS handles, lazily loaded kernels, NCCL's runtime-connected buffers),
# read off the one vLLM KV-pool figure in the ground truth: Llama-2-7B TP 1 on an H100 resolved 7,463 blocks of
# 16 tokens at 0.9 (max_num_seqs 128, 2,048 batched tokens); with CUDA's 79.19 GiB total, the twin's weights
# (12.55 GiB) and profile peak (0.157 GiB), that leaves 0.25 GiB (0.21 - 0.40 over CUDA's quoted totals), where
# the twin's default runtime reserve is 1 GiB; vLLM's own logged "non-torch forward increase memory" reads 0.02 -
# 0.61 GiB in the public start-up lines found. A TP 1 reading for ``kv_pool_breakdown(runtime_reserve_bytes=...)``,
# not a default (a TP 4 server reads ~1 GiB: docs/fidelity.md, "Round 15: memory outside the KV cache").
NON_TORCH_RESERVE_BYTES = round(0.25 * GIB)
