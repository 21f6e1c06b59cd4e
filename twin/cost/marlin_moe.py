"""INT4 W4A16 routed experts on vLLM's Marlin MoE kernel path (Kimi-K2.5's INT4 checkpoint; issue 33, round 5;
docs/fidelity.md "Round 5: Kimi-K2.5").

Facts (vLLM source of the release the Kimi-K2.5 INT4 rows ran, v0.15.1, and the InferenceX launch scripts):

* The checkpoint (``moonshotai/Kimi-K2.5``, compressed-tensors ``pack-quantized``) stores the routed experts as
  INT4, group 32, symmetric (one bf16 scale per 32 weights, no zero point: 0.5 + 2 / 32 bytes per weight, which
  ``twin.hardware.quant`` already counts in the streamed bytes); attention, the shared expert, the dense first
  layer and the LM head stay bf16. vLLM loads such experts with ``CompressedTensorsWNA16MarlinMoEMethod``, whose
  ``apply`` runs ``fused_marlin_moe``: routing (top-8 of 384), the Marlin token alignment, a Marlin grouped GEMM
  for gate/up, SiLU-and-mul, a Marlin grouped GEMM for down, and the top-k sum; activations stay bf16 and each
  weight tile is dequantised in registers, so the FLOPs run on bf16 tensor cores (``COMPUTE_DTYPE["int4"]``),
  through Marlin's warp-level ``mma.sync`` MMAs (the Ampere instruction the kernel was written for), not
  Blackwell's ``tcgen05`` MMAs that vLLM's dense bf16 / FP8 / FP4 GEMMs use on B200.
* ``VLLM_USE_FLASHINFER_MOE_INT4=1`` (FlashInfer's TRT-LLM-gen MxInt4 x bf16 MoE, SM100 only) is set by
  InferenceX's ``kimik2.5_int4_b200.sh`` from 79ea3651a (2026-03-24). vLLM PR #39315 (2026-04-08, "FlashInfer
  MXINT4 MoE crashes, missing do_finalize") states that the flag "has been unusable in vLLM since v0.15.1"
  (FlashInfer 0.6.4 changed the fused-MoE interface) and that, once fixed, 1k/1k runs ~4 % faster with it. So a
  v0.15.1 server that served ran Marlin, and either way the two paths differ by a few per cent.
* Tensor parallelism without expert parallelism (every Kimi INT4 row: TP8, no ``--enable-expert-parallel``):
  each rank holds all 384 experts at ``moe_intermediate_size`` / 8 = 256 columns, so per expert the gate/up GEMM
  is N = 512 by K = 7168 and the down GEMM N = 7168 by K = 256: short-K, narrow tiles far from either roofline.

What the twin charges on this path (three terms of ``twin.cost.moe_terms`` / ``twin.cost.kernel_path``, embedded
for the ``int4`` expert format in ``twin.cost.default_terms.EXPERT_FORMAT_TERMS``), fitted on the Kimi-K2.5
INT4 B200 rows with other configurations held out (``benchmarks/kimi_int4_fit.py``: decode on the 1k/1k rows,
prefill on TTFT(8k/1k) - TTFT(1k/1k) at C = 4; held out: every 1k/8k row and the 8k/1k rows at C >= 8):

* ``moe_layer_overhead_s`` 42.7 +/- 9.1 us per MoE layer per step: the path's fixed time (its ~6 kernels per
  layer, the alignment and the short-K down GEMM's minimum duration), 2.6 ms per step over Kimi's 60 MoE layers;
* ``moe_expert_efficiency`` 0.418 +/- 0.025: the experts' weight streams at 41.8 % of the dense streams' rate
  (decode);
* ``moe_expert_compute_efficiency`` 0.206: the expert GEMMs' FLOPs at 20.6 % of the dense bf16 GEMMs' rate
  (prefill; ~0.28 PFLOP/s per B200 at the Blackwell compute efficiency 0.6); set exactly by one TTFT
  difference, so these rows give it no standard error.

Round 7 (docs/fidelity.md "Round 7: Kimi-K2.5 and unseen expert kernel paths"): the same kernel pads every
expert's (token, expert) pairs to whole token blocks (``twin.cost.marlin_blocks``, now on for INT4 experts), and
the terms were refitted by the same procedure with the blocks in the prompt steps and the other terms as embedded
since round 5 (the Blackwell per-token cost and eager floors): ``a`` 51.6 +/- 5.9 us, ``e`` 0.620 +/- 0.036,
``c`` 0.171 (0.141 without the blocks: the blocks hold a fifth of the prompt steps' extra time); held out (the
same 9 runs), TTFT 15.2 % (-0.8 %) -> 4.0 % (+3.0 %), TPOT 2.9 % (+1.8 %) -> 4.4 % (-4.4 %) against round 5's
values under today's other terms (``a`` and ``e`` are not moved by the blocks: pure decodes are not charged; they
move because the terms embedded since round 5 changed the decode residual they are read off).

Round 5's held-out figures (9 distinct runs; priors -> fitted, MLA's replicated down projections in both, twin.hardware.
mla_replicated): TPOT -38.6 % -> +1.9 % (median |error| 2.2 %), E2E -38.7 % -> +1.2 %, throughput +63.1 % ->
-1.2 %, TTFT -51.0 % -> -21.7 % (what is left at light load is a per-request intercept, not the expert path).
Measured on B200 only; the terms belong to the kernel path (Marlin runs the same ``mma.sync`` code on Hopper and
Ampere), so they apply to every INT4 expert deployment until a fit on another GPU says otherwise. Part of the
fixed time may be Kimi's rather than Marlin's (its NVFP4 rows miss ~20 us per layer at C = 4 too): a term for
that would take its share out of this one (docs/fidelity.md "Round 5: Kimi-K2.5").

Round 8 (docs/fidelity.md "Round 8: Kimi-K2.5"): that term now exists (``twin.cost.mla_decode``, 13.2 us per
decoder layer on MLA models, read off the Kimi NVFP4 rows with TP / date / shape held out), and the same
procedure with it on gives ``a`` 38.2 +/- 5.4 us (51.6 - 13.4: the MLA time, 0.80 ms per step, came out of the
fixed time whole), ``e`` 0.618 +/- 0.033, ``c`` 0.171; the held-out runs' figures are unchanged (TTFT 4.0 %
(+3.0 %), TPOT 4.4 % (-4.4 %)): the step is split differently, not costed differently.
"""

from __future__ import annotations

# routed-expert format family -> roofline keyword -> value (model units), read by twin.cost.default_terms
# round 7: refitted with Marlin's padded token blocks on (twin.cost.marlin_blocks) by the same held-out procedure;
# round 8: refitted by it again with MLA's fixed time per layer on (twin.cost.mla_decode: 13.2 us x 61 layers)
MARLIN_W4A16_MOE_TERMS: dict[str, float] = {
    "moe_layer_overhead_s": 38.2e-6,           # s per MoE layer per step (round 5: 42.7e-6; round 7: 51.6e-6)
    "moe_expert_efficiency": 0.618,            # fraction of the dense weight streams' rate (round 5: 0.418; 7: 0.620)
    "moe_expert_compute_efficiency": 0.171,    # fraction of the dense bf16 GEMMs' FLOP rate (round 5: 0.206)
}

