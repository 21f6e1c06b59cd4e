"""The routed experts' kernel path by GPU generation AND expert format: embedded defaults of the terms that hold
on one (generation, expert format) pair only (issue 33, round 5: Hopper, gpt-oss-120b), MoE models only.

Why a pair: vLLM picks the fused-MoE kernel by the experts' format and by the GPU's compute capability, so the same
FP8 checkpoint runs different grouped GEMMs on Hopper and Blackwell. For block-scaled FP8 experts (128 x 128
weight blocks, per-token-group activation scales, as MiniMax-M2.5 ships them) vLLM's FP8 MoE oracle
(``vllm/model_executor/layers/fused_moe/oracle/fp8.py``) ranks the backends per platform: on SM90 DeepGEMM is
preferred over FlashInfer CUTLASS since vllm-project/vllm#34260 (merged 2026-02-10, fixing #34249, where an
H100 EP8 FP8 server had picked FlashInfer CUTLASS), and later releases move Triton to the front for TP and
FlashInfer CUTLASS for EP on SM90 block FP8; DeepGEMM's entry (``TritonOrDeepGemmExperts``) falls back to
Triton's ``fused_moe`` for shapes DeepGEMM does not take. On Blackwell FlashInfer's kernels come first. Which of
these v0.18.0 ran on the H100 MiniMax rows is not pinned here (the release's oracle was not read at its tag);
what the rows show is the rate their prefill reached (docs/fidelity.md, "Round 5: Hopper").

Terms (roofline keywords, model units): ``moe_expert_compute_efficiency`` (fraction of the dense GEMMs' achieved
FLOP rate the routed experts' grouped GEMMs reach; ``explain()`` shows the extra time as
``moe_expert_compute_extra_s``, seconds per step) and ``moe_layer_overhead_s`` (seconds per MoE layer per step,
``twin.cost.kernel_path``; ``explain()``'s ``moe_layer_overhead_s``), and, on a path that fuses its all-reduces,
``fused_allreduce_latency_s`` (s per all-reduce). A pair without an entry takes the expert format's value
(``twin.cost.default_terms.EXPERT_FORMAT_TERMS``) or the generation's, else the flat default.
"""

from __future__ import annotations

from twin.cost.generations import gpu_generation
from twin.cost.marlin_mxfp4 import MARLIN_MXFP4_HOPPER_TERMS
from twin.hardware.weight_formats import format_family

# (GPU generation, routed experts' format family) -> {roofline keyword: value}
GENERATION_EXPERT_TERMS: dict[tuple[str, str], dict[str, float]] = {
    # MiniMax-M2.5 FP8 on H100 (TP4 EP4, v0.18.0): how much more an 8k prompt's TTFT takes than a 1k one's at
    # CONC 4-16 (a difference, so a per-request offset cancels), fitted on one measurement date and tested on the
    # other (benchmarks/hopper_rows.py prefill-fit): 0.16 (fit 2026-03-27; held-out 03-28 pairs C = 4 / 8: -64 /
    # -67 % -> +10 / -4 %) and 0.15 (fit 03-28; 03-27 pairs C = 4 / 8 / 16: -83 / -65 / -63 % -> -45 / +6 / +5 %);
    # 0.155 on both. Refit in round 6 with MiniMax's FP32 router GEMM priced apart (twin.cost.router_gemm, 2.4 us
    # per token on H100 at vLLM's default precision, which the 0.155 had absorbed): 0.185 (fit 03-27; held-out
    # 03-28 C = 4 / 8: +10 / -4 %), 0.175 (fit 03-28; 03-27 C = 8 / 16: +4 / +3 %), 0.18 on both (docs/fidelity.md
    # "Round 6: MiniMax-M2.5 prompt steps"). Dense Llama-3.1-70B FP8 on the same GPU (GQA attention with 128-wide
    # heads, two all-reduces per layer, the same prompt lengths) shows no such slope: the excess is in the MoE layers.
    # moe_layer_overhead_s: MiniMax-M2.5 H100's decode (TPOT) beside the roofline, 16 us per MoE layer per step
    # fitted on its OSL-8k rows (C 4-32: -8.3 % -> -0.4 %), held out on its 1k/1k rows (-7.1 % -> -0.7 %) and
    # 8k/1k rows (C <= 16: -9.7 % -> -2.3 %). The same rows ran ``cudagraph_mode: PIECEWISE`` (attention between
    # graph pieces, one split per layer; vllm-project/vllm#25444 measured PIECEWISE at 4.07 req/s against 5.98 for
    # FULL_AND_PIECEWISE on an FP8 MoE on one H100), which one model cannot tell apart from the expert path's
    # fixed time: a Hopper FP8 MoE server on full CUDA graphs may spend less.
    # expert_path_request_s (twin.cost.expert_path_request, round 11): the light-load TTFT these rows miss at 1k and
    # 8k alike, 26.15 ms per request (median of the 12 TP 4 rows at CONC <= 8, benchmarks/expert_request_reading.py);
    # the B200 reading below, scaled by the FP8 tensor rates, predicts 25.8 ms (-1.3 %)
    ("hopper", "fp8"): {"moe_expert_compute_efficiency": 0.18, "moe_layer_overhead_s": 16e-6,
                        "expert_path_request_s": 26.15e-3},
    # MiniMax-M2.5 FP8 on B200 (vLLM 0.19.0's default FP8 MoE, 1k and 8k prompts): the same term, 11.35 ms per request
    # (median of the 16 TP 4 CSV rows at CONC <= 8; the same model's NVFP4 path misses -0.4 ms there); predicted from
    # the H100 reading by the FP8 tensor rates: 11.5 ms (+1.3 %). Held out by GPU in both directions
    # (twin.fitting.expert_request_prior; docs/fidelity.md "Round 11: the bench client and MoE prompt time on B200")
    ("blackwell", "fp8"): {"expert_path_request_s": 11.35e-3},
    # NOT embedded on this path (round 8, docs/fidelity.md "Round 8: MiniMax-M2.5"): ("blackwell", "fp8") with
    # moe_prompt_stream_efficiency 0.5 and layer_token_decode_share 0 (twin.cost.prompt_experts, decode_tokens),
    # fitted together on the B200 MiniMax FP8 rows and held out by TP, ISL / OSL and load band (MiniMax TTFT 15.5 %
    # -> 8.5 % at the defaults), but with it the family folds' Kimi-held-out refit of eager_moe_layer_host_s@blackwell
    # falls 1.08 -> 0.43 ms and held-out Kimi TTFT goes 11.8 % -> 25.4 %. Nor (round 8b, "Round 8: the Blackwell MoE
    # eager floor by expert path") with that floor scoped to this path as well: the floor per MoE layer does follow
    # the expert path (light-load 1k rows beyond 0.84 ms per layer: MiniMax FP8 0.61 ms, 0.39 with the pair; Kimi
    # INT4 0.72, NVFP4 1.50), but with MiniMax FP8's own value (0.39 with the pair, 0.61 without) the Kimi fold's
    # floor is read off the MiniMax NVFP4 / gpt-oss 8k steps alone (0.43 +/- 0.59, 0.09 +/- 0.47 ms) and held-out
    # Kimi TTFT goes 11.2 % -> 23.8 % / 26.7 % (family TTFT mean 9.2 % -> 10.6 % / 10.5 %): the Kimi fold's 1.1 ms
    # on main is read off MiniMax FP8's rows (where it also stands in for prompt time the twin misses), and no
    # other family's rows read the floor of Kimi's paths.
    # gpt-oss-120b's B200 MXFP4 path (v0.15.1, FlashInfer TRTLLM-gen MoE): its fused all-reduce + RMSNorm, 11 us
    # per all-reduce, held out by ISL/OSL and by TP (twin.cost.mxfp4_path; docs/fidelity.md "Round 5: gpt-oss-120b")
    ("blackwell", "mxfp4"): {"fused_allreduce_latency_s": 11.0e-6},
    # gpt-oss-120b's H100 MXFP4 path (v0.18.0, VLLM_MXFP4_USE_MARLIN=1: Marlin W4A16 MoE, twin.cost.marlin_mxfp4):
    # the experts' FLOPs at 0.35 of the dense bf16 rate and 0.15 us per token per decoder layer that TP does not
    # split, with Marlin's padded token blocks (twin.cost.marlin_blocks) in place; picked on a grid with each TP,
    # prompt length and load band held out in turn; its fused all-reduce + RMSNorm at 18 us (decode; held out by
    # request shape and TP) (benchmarks/gptoss_h100_prefill.py; docs/fidelity.md "Round 6")
    ("hopper", "mxfp4"): MARLIN_MXFP4_HOPPER_TERMS,
}


def generation_expert_term(gpu, model, formats, name: str) -> float | None:
    """The embedded value of ``name`` for this GPU's generation and the MoE model's routed-expert format, or
    None (no entry, or a dense model)."""
    if not getattr(model, "is_moe", False):
        return None
    key = (gpu_generation(gpu), format_family(formats.routed_experts))
    return GENERATION_EXPERT_TERMS.get(key, {}).get(name)


def scoped_values() -> dict[str, float]:
    """The table as fit parameters: ``name@<generation>+experts_<format>`` (``twin.fitting.scoped``)."""
    return {f"{name}@{gen}+experts_{fmt}": v for (gen, fmt), terms in GENERATION_EXPERT_TERMS.items()
            for name, v in terms.items()}
