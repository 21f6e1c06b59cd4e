"""A held-out eager MoE floor from kernel launches (issue 33, round 9; docs/fidelity.md "Round 9: host-time priors
from kernel launches").

An eager prompt step's host time is the CPU's time to issue the forward pass (``twin.cost.eager_steps``): every
op the layer calls from Python (the dispatcher, the compiled graph's wrapper or a custom op's binding, then
``cudaLaunchKernel``) costs host time whether its kernel is small or large. So a layer's floor is (host-dispatched
ops per layer) x (host time per op), and the host time per op is the CPU's, the same on any GPU it drives: read
on one generation, in seconds per op, it carries to another. This module states the op counts per decoder layer
and turns a fold's per-layer host reading into a prior for the MoE layers' extra (``eager_moe_layer_host_s``) on a
generation whose own reading the fold holds out (the B200-held-out fold: 0 before).

The counts (host-dispatched ops of one decoder layer in an eager prompt step, TP > 1, counted from the vLLM model
code and each expert path's Python entry point; not instrumented, so +/- 1-2 per layer; an op whose C++ binding
launches several kernels counts once: its extra launches cost the driver's few microseconds, not a Python call):

* a dense GQA layer with FP8 weights (``llama.py`` ``LlamaDecoderLayer``, vLLM 0.10.2, per-tensor FP8):
  attention 9 (fused_add_rms_norm, scaled_fp8_quant, cutlass_scaled_mm qkv, rotary_embedding,
  reshape_and_cache_flash, the attention kernel, scaled_fp8_quant, cutlass_scaled_mm o_proj, all-reduce) + MLP 7
  (fused_add_rms_norm, quant, gate_up GEMM, silu_and_mul, quant, down GEMM, all-reduce) = **16**: the layer of the
  per-layer readings (H100 0.92 ms, B200 0.84 ms), so **57.5 us per op** on H100 (52.5 on B200);
* MiniMax-M2.5 FP8, Triton block-FP8 MoE (``minimax_m2.py``; the March B200 rows: ``VLLM_USE_FLASHINFER_MOE_FP8=0
  VLLM_MOE_USE_DEEP_GEMM=0``; ``fused_moe.fused_experts_impl``): attention 9 + the TP query / key RMSNorm
  (``MiniMaxText01RMSNormTP.forward_qk``: two variance reductions, their all-reduce, the normalisation) 4; MoE 14
  (fused_add_rms_norm, the FP32 router's cast and GEMM, sigmoid + bias top-k and renormalisation 3,
  moe_align_block_size, per_token_group_quant_fp8, the w13 Triton GEMM, silu_and_mul, per_token_group_quant_fp8,
  the w2 Triton GEMM, moe_sum, all-reduce) = **27**;
* Kimi-K2.5 INT4, Marlin W4A16 MoE (``deepseek_v2.py`` MLA + ``fused_marlin_moe``; v0.15.1): MLA prefill 12
  (fused_add_rms_norm, fused_qkv_a_proj, q_a_layernorm, kv_a_layernorm, q_b_proj, rotary_embedding,
  concat_and_cache_mla, kv_b_proj, the k_nope / k_pe concat, the attention kernel, o_proj, all-reduce; 16-bit, no
  quant ops) + MoE 14 (fused_add_rms_norm, router GEMM, grouped_topk, moe_align_block_size, Marlin w13, silu_and_mul,
  Marlin w2, moe_sum, the shared expert's gate_up / silu_and_mul / down, the routed scale + shared add, all-reduce)
  = **26**;
* Kimi-K2.5 NVFP4, FlashInfer CUTLASS MoE (v0.17.0; ``flashinfer.fused_moe.cutlass_fused_moe``: one Python call
  whose C++ side launches the permute, grouped GEMMs, activation and finalize kernels): MLA 12 + MoE 12
  (fused_add_rms_norm, router GEMM, grouped_topk, fp4 activation quant, cutlass_fused_moe, the shared expert's
  quant / gate_up / silu_and_mul / quant / down, the shared add, all-reduce) = **24**. Round 18 (docs/fidelity.md
  "Round 18: Kimi-K2.5 NVFP4's eager floor with B200 held out"): v0.17.0 picks FlashInfer's TRT-LLM-gen fused MoE
  for this path (``oracle/nvfp4.py`` tries it first), whose MoE half counts 12 as well, so the count stands; an
  eager step with decodes beside the prompt adds MLA ops (``twin.fitting.mla_mixed_step``, opt-in);
* gpt-oss-120b MXFP4, FlashInfer TRT-LLM-gen MoE (v0.15.1; routing inside the kernel; the all-reduce fused with the
  next RMSNorm): attention 7 + MoE 4 = **11**, fewer than the dense FP8 layer: no extra;
* a path without an entry: vLLM's generic Triton ``fused_moe`` on a GQA layer (attention 9; MoE 12: the MiniMax
  count less the FP32 cast and with one top-k op) = **21**.

A MoE layer's extra over the dense layer is ``(ops - 16) x per-op host time`` (at least 0), given as
``eager_moe_layer_host_s@<generation>`` (the generic count) and ``@<generation>+experts_<format>`` (each path above)
where the fold resets the generation's MoE floor. Checked against every reading (benchmarks/eager_floor_by_
generation.py --launches; the docs section): it holds for the Triton FP8 and Marlin INT4 paths and not for the
FlashInfer NVFP4 one (read 1.50 ms per MoE layer against 0.46 predicted), nor for the H100 MiniMax FP8 rows
(v0.18.0: their whole layer reads <= 0.91 ms, 27 ops at 57.5 us would be 1.55 ms).
"""

from __future__ import annotations

from collections.abc import Callable

from twin.cost.eager_path_floors import DENSE_LAYER_OPS, MARLIN_INT4_LAYER_OPS, counted_floor_s, counted_keys

GENERIC_MOE_LAYER_OPS = 21     # vLLM's generic Triton fused_moe on a GQA layer: a path without an entry
# (GPU generation, routed experts' format family) -> (host-dispatched ops per MoE decoder layer, the path counted)
PATH_LAYER_OPS: dict[tuple[str, str], tuple[int, str]] = {
    ("blackwell", "fp8"): (27, "MiniMax-M2.5, Triton block-FP8 fused_moe (March v0.17.0 rows)"),
    # one definition of the count (twin.cost.eager_path_floors; round 16: its opt-in floor of its own)
    ("blackwell", "int4"): (MARLIN_INT4_LAYER_OPS, "Kimi-K2.5 MLA, Marlin W4A16 fused_marlin_moe (v0.15.1)"),
    # Kimi's count: its rows are the path's eager 1k ones (MiniMax NVFP4's layer, ~22 ops, runs 8k GPU-bound steps)
    ("blackwell", "nvfp4"): (24, "Kimi-K2.5 MLA, FlashInfer TRT-LLM-gen fused MoE (v0.17.0; round 9: CUTLASS)"),
    ("blackwell", "mxfp4"): (11, "gpt-oss-120b, FlashInfer TRT-LLM-gen MXFP4 MoE (v0.15.1)"),
    ("hopper", "fp8"): (27, "MiniMax-M2.5, block-FP8 MoE (v0.18.0, H100)"),
}
MOE_FLOOR = "eager_moe_layer_host_s"
PER_LAYER = "eager_layer_host_s"


def per_op_s(per_layer_s: float) -> float:
    """Host time per host-dispatched op (s), from a host time per dense decoder layer (``DENSE_LAYER_OPS`` ops)."""
    return per_layer_s / DENSE_LAYER_OPS


def moe_extra_s(per_layer_s: float, layer_ops: int) -> float:
    """A MoE layer's host time beyond the dense layer's (s): its extra ops at the per-op time, at least 0."""
    return counted_floor_s(layer_ops, per_layer_s)


def moe_floor_prior_s(per_layer_s: float) -> float:
    """The stated prior of ``eager_moe_layer_host_s@<generation>`` given that generation's per-layer host prior:
    the generic Triton fused_moe layer's extra ops (a path without its own count)."""
    return moe_extra_s(per_layer_s, GENERIC_MOE_LAYER_OPS)


def path_floor_priors(fixed: dict[str, float], per_layer_prior_s: Callable[[str], float]) -> dict[str, float]:
    """The expert paths' MoE floor priors (fit key -> s) for every generation whose ``eager_moe_layer_host_s@<gen>``
    the fold resets (a key of ``fixed``): each counted path's extra ops at the per-op time of
    ``per_layer_prior_s(gen)`` (that generation's per-layer host prior). Keys the fold already holds stay."""
    out: dict[str, float] = {}
    for (gen, fmt), (ops, _) in PATH_LAYER_OPS.items():
        key = f"{MOE_FLOOR}@{gen}+experts_{fmt}"
        if f"{MOE_FLOOR}@{gen}" in fixed and key not in fixed:
            out[key] = moe_extra_s(per_layer_prior_s(gen), ops)
    # an embedded count (twin.cost.eager_path_floors: a GQA layer's, round 14; an expert path's, round 16) that the
    # fold resets: the same count at the fold's per-layer prior (its stated prior, HOST, would give the generic count)
    for key, (gen, ops) in counted_keys().items():
        if key in fixed:
            out[key] = moe_extra_s(per_layer_prior_s(gen), ops)
    return out


def _b200_llama_rows(case, _deployment) -> bool:
    from twin.fitting.silicon import model_family
    row = getattr(case, "row", None)
    return row is not None and row.system == "b200_sxm" and model_family(row.model_path) == "llama"


COUNT_EVIDENCE: tuple[str, Callable] = ("a launch count times the B200 Llama rows' per-layer value", _b200_llama_rows)
# the embedded counts' evidence (twin.fitting.provenance_evidence.DECLARED_EVIDENCE): a count times the generation's
# per-layer value, so the rows that value was read off; no MiniMax (round 14) or Kimi (round 16) row is read
EVIDENCE: dict[str, tuple[str, Callable]] = {
    key: COUNT_EVIDENCE for key, (gen, _) in counted_keys().items() if gen == "blackwell"}

