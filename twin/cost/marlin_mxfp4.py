"""MXFP4 experts on vLLM's Marlin MoE kernel on Hopper (gpt-oss-120b's H100 rows; issue 33, round 6;
docs/fidelity.md "Round 6: gpt-oss-120b and Llama prompt steps").

Facts (InferenceX ``benchmarks/single_node/gptoss_fp4_h100.sh`` at cec542a9a, vLLM v0.18.0; vLLM's
``fused_moe/oracle/mxfp4.py`` and ``fused_marlin_moe.py``):

* The script exports ``VLLM_MXFP4_USE_MARLIN=1``; vLLM's MXFP4 oracle then returns the ``MARLIN`` backend
  (``MarlinExperts``) before walking its priority list (which on SM90 would try OpenAI's Triton ``matmul_ogs``
  kernels first). Marlin is W4A16: the E2M1 weights and their E8M0 scales are dequantised to bf16 in registers
  and multiplied with warp-level ``mma.sync`` (the Ampere instruction the kernel is written for), not Hopper's
  ``wgmma``; Hopper has no FP4 tensor rate. So the experts' FLOPs run below the dense bf16 GEMMs' rate
  (cuBLAS / CUTLASS on ``wgmma``), and each weight tile is dequantised once per token block.
* For Marlin, vLLM rounds the experts' shapes up (``mxfp4_round_up_hidden_size_and_intermediate_size``, read at
  a 2026 main commit, not pinned to the v0.18.0 tag): the intermediate size to a multiple of 128 per rank
  (1,440 -> 1,536 at TP2, 720 -> 768 at TP4, 360 -> 384 at TP8: +6.7 % each) and the hidden size to 256 (2,880 ->
  3,072, +6.7 %): ~14 % more MMA work than the checkpoint's shapes, part of the efficiency below.
* Token blocks: ``twin.cost.marlin_blocks`` (a 1k prompt step pays ~50 % padded rows, an 8k one ~12 %).
* The rows' prompt steps: ``max_num_batched_tokens`` 8192 and ``max-cudagraph-capture-size`` 2048 with vLLM
  0.18's default ``FULL_AND_PIECEWISE``, so a 1k prompt step is graphed (piecewise) and an 8k one eager; the
  eager floor on Hopper stays 0 (Blackwell's 0.84 + 1.15 ms per layer would put an 8k step of gpt-oss at >= 72
  ms; its GPU time is 110-250 ms at TP 8-2 with the values below, so the floor could not show).

Three values of existing terms for the (hopper, mxfp4) pair (``twin.cost.generation_experts``), with their priors:

* ``moe_expert_compute_efficiency`` 0.35 (prior 1: the dense rate): the experts' FLOPs at 0.35 of the dense
  bf16 GEMMs' achieved rate (0.6 x 989 TFLOP/s), i.e. ~210 TFLOP/s per H100 for the checkpoint's FLOPs: the
  ``mma.sync`` path, the in-register dequantisation per token block and the padded shapes above.
  ``explain()``: ``moe_expert_compute_extra_s``.
* ``layer_token_overhead_s`` 0.15 us per token per decoder layer (prior 0 on Hopper): time per scheduled token
  that TP does not split (``twin.cost.layer_tokens``; ``explain()``: ``layer_token_overhead_s``). The rows'
  8k-minus-1k prompt slope at C = 4 is 28.7 / 18.9 / 13.4 us per token at TP 2 / 4 / 8, ~25 us x GPU that TP
  divides plus ~5.6 us it does not. Dense Llama-3.1-70B FP8 on the same GPU shows no such part (its slopes are
  within -7..+1 % of the twin's at TP 2-8), so it belongs to this path's MoE layers (routing, the token sort and
  alignment, the per-pair gather and top-k sum over the full hidden size on every rank); gpt-oss's own B200 rows
  gave 0.155 us per token per layer (round 4) for the same quantity on another kernel path.

* ``fused_allreduce_latency_s`` 18 us per all-reduce (prior: the unfused latency, 24.7 us): these v0.18.0 servers
  fuse the all-reduce with RMSNorm (vLLM's default from 0.18 at TP > 1 on Hopper / Blackwell,
  ``twin.cost.kernel_path``), and their decode steps (1k/8k rows, C <= 8) are 0.3-0.45 ms shorter than the twin's
  at the unfused latency at every TP (72 all-reduces per step: ~5-6 us each); the B200 MXFP4 path's fused one is
  11 us (``twin.cost.mxfp4_path``). Picked on a grid (16 / 18 / 20 us) on the 1k/8k rows' TPOT; held out by shape
  and by TP, the TPOT of the held-out rows goes from +7..+12 % to -4..+6 %. Kept to this path like the B200 one:
  MiniMax-M2.5's H100 rows (also fused) carry a fitted per-MoE-layer time read at the unfused latency.

The first two were picked on a grid (efficiency 0.25-0.4 x 0-0.2 us) with each TP, each prompt length and each load band
held out in turn (``benchmarks/gptoss_h100_prefill.py``): every fold picked 0.3-0.35 / 0.1-0.15 us and the
held-out TTFT went from -47..-61 % to -3.6..+4.8 % (docs/fidelity.md). One measurement date (2026-03-27), one
release, one model: a Hopper MXFP4 server on the Triton path (without the flag) or another model is not covered
by evidence.
"""

from __future__ import annotations

# roofline keyword -> value (model units), the (hopper, mxfp4) entry of twin.cost.generation_experts
MARLIN_MXFP4_HOPPER_TERMS: dict[str, float] = {
    "moe_expert_compute_efficiency": 0.35,     # fraction of the dense bf16 GEMMs' FLOP rate (prefill)
    "layer_token_overhead_s": 0.15e-6,         # s per scheduled token per decoder layer, every TP rank
    "fused_allreduce_latency_s": 18e-6,        # s per fused all-reduce + RMSNorm (decode; see above)
}
