"""Costs set by the kernels a vLLM server runs rather than by the FLOPs and bytes: the all-reduce + RMSNorm
fusion of tensor parallelism and the fixed time of a MoE layer's expert kernel path (issue 33, round 4).

* **All-reduce fused with RMSNorm** (vLLM's ``compilation_config.pass_config.fuse_allreduce_rms``, before 0.12
  ``enable_fi_allreduce_fusion``): the compile pass replaces each tensor-parallel all-reduce that feeds an RMSNorm
  (with its residual add, optionally the next quantisation) by one FlashInfer / TensorRT-LLM kernel that does the
  exchange over NVLink and the norm in one launch (vLLM docs, "Fusion torch.compile passes": "All-reduce ->
  RMSNorm (+residual_add) (-> quant)", active at low token counts, on Hopper / Blackwell with TP > 1). Per layer
  both all-reduces (after attention, after the MLP / MoE) feed such a norm. The twin's unfused latency per
  all-reduce (24.7 us, fitted on H100 servers without the fusion) carries the separate all-reduce, the norm kernel
  and their synchronisation; a fused one costs ``fused_allreduce_latency_s``. Prior when not given: the unfused
  latency. NCCL's own latency model of a single-node NVLink all-reduce of a small message with its LL protocol
  (NVIDIA/nccl ``src/graph/tuning.cc``, ``baseLat`` 6.6 us + 2 (n - 1) NVLink hops x ``hwLat`` 0.6 us: 7.8 us at
  2 GPUs, 10.2 at 4, 15.0 at 8; ``nccl_ll_allreduce_latency_s``) prices the exchange alone, but the twin's
  per-all-reduce latency also carries per-layer time the fusion does not remove: at NCCL's figures the defaults'
  B200 TPOT went from -12 % to -31 % on Llama-3.1-70B (issue 33, round 4), and the joint fit on every 3rd silicon
  row gives 10.4 +/- 3.2 us fused against 12.2 +/- 6 us unfused on Blackwell (with 19 us per layer beside them):
  equal within their errors. So the fusion is priced apart only once a fit identifies its latency. Large
  messages (prefill chunks above FlashInfer's size limit) fall back to the unfused all-reduce in vLLM; the twin
  keeps the latency term fused for every step, since at those sizes the bytes term dominates.
  vLLM's default: off up to 0.14 (``OPTIMIZATION_LEVEL_02`` sets ``fuse_allreduce_rms: False``, API docs v0.12.0 /
  v0.14.1), on at -O2 for Hopper / Blackwell with TP > 1 by 0.18 (fusions design page, docs v0.18.2); 0.15-0.17
  are not pinned and taken as off (servers of those releases that fused passed the flag, as the InferenceX scripts
  for gpt-oss-120b and Kimi-K2.5 did).
* **MoE layer fixed time** (``moe_layer_overhead_s``, seconds per MoE layer per step): the expert kernel path's
  time that does not scale with the experts' FLOPs or bytes (router top-k, token alignment / permutation,
  activation quantisation, the grouped GEMMs' minimum duration, the combine), which CUDA graphs do not hide.
  It depends on the kernel path vLLM picks by the routed experts' format, so a fit sets it per format
  (``moe_layer_overhead_s@experts_fp8`` etc., ``twin.fitting.scoped``). Prior 0 (the pure roofline).
"""

from __future__ import annotations

from twin.cost.layer_tokens import explain_token_parts
from twin.cost.param_checks import check_nonneg
from twin.cost.router_gemm import explain_router

NCCL_LL_BASE_LATENCY_S = 6.6e-6       # NCCL tuning.cc baseLat, ring / LL
NCCL_NVLINK_HOP_LATENCY_S = 0.6e-6    # NCCL tuning.cc hwLat, NVLink / LL
FUSED_ALLREDUCE_GENERATIONS = ("hopper", "blackwell")    # FlashInfer's fused all-reduce: SM90 / SM100 family


def nccl_ll_allreduce_latency_s(tensor_parallel_size: int) -> float:
    """NCCL's latency model of one small all-reduce over ``tensor_parallel_size`` NVLink GPUs (the exchange alone;
    see the module docstring): LL ring 6.6 us + 2 (n - 1) x 0.6 us; 0 for one GPU."""
    n = tensor_parallel_size
    return 0.0 if n <= 1 else NCCL_LL_BASE_LATENCY_S + 2 * (n - 1) * NCCL_NVLINK_HOP_LATENCY_S


def fused_allreduce_latency(allreduce_latency_s: float, fused_allreduce_latency_s: float | None) -> float:
    """Latency of one all-reduce fused with RMSNorm: ``fused_allreduce_latency_s``, or the unfused latency when it
    is None (see the module docstring)."""
    if fused_allreduce_latency_s is None:
        return allreduce_latency_s
    return check_nonneg("fused_allreduce_latency_s", fused_allreduce_latency_s)


def fusion_default(vllm_version_key: tuple[int, int], generation: str, tensor_parallel_size: int) -> bool:
    """vLLM's default ``fuse_allreduce_rms`` (see the module docstring): on from 0.18 at -O2 on Hopper / Blackwell
    with TP > 1; off before."""
    return vllm_version_key >= (0, 18) and generation in FUSED_ALLREDUCE_GENERATIONS and tensor_parallel_size > 1


def explain_overhead_parts(parts: dict[str, float], per_token_overhead_s: float, layer_tokens_s: float,
                           tokens: int, moe_layer_overhead_step_s: float, router_token_s: float = 0.0) -> None:
    """Move the per-token costs (``twin.cost.layer_tokens.explain_token_parts``), the FP32 router's
    (``router_token_s``, s per token: ``twin.cost.router_gemm``) and the MoE layers' fixed time of a step
    (``moe_layer_overhead_step_s``: ``moe_layer_overhead_s`` x MoE layers, seconds) out of ``parts["overhead_s"]``
    into their own parts, only those that are set; the parts still add up."""
    explain_token_parts(parts, per_token_overhead_s, layer_tokens_s, tokens)
    explain_router(parts, router_token_s, tokens)
    if moe_layer_overhead_step_s:
        parts["moe_layer_overhead_s"] = moe_layer_overhead_step_s
        parts["overhead_s"] -= moe_layer_overhead_step_s


def explain_layer_overhead(parts: dict[str, float], cost_model) -> None:
    """Move the fixed time per decoder layer of a step (``layer_overhead_s`` x decoder layers, seconds; embedded
    for MLA models: ``twin.cost.mla_decode``) out of ``parts["overhead_s"]`` into ``parts["layer_overhead_s"]``,
    only when it is set; the parts still add up."""
    step_s = cost_model.layer_overhead_s * cost_model.model.num_hidden_layers
    if step_s:
        parts["layer_overhead_s"] = step_s
        parts["overhead_s"] -= step_s
