"""A MoE layer's fixed GPU time in every step with a prompt in it: ``moe_prompt_layer_s`` (seconds per MoE layer per
such step, on one (generation, expert format) kernel path; issue 33, round 11; docs/fidelity.md "Round 11: the
bench client and MoE prompt time on B200").

What the rows show (``benchmarks/prompt_fixed_reading.py``, the embedded defaults of round 10): on the block-FP8
expert path the light-load TTFT misses a time that does NOT grow with the prompt: MiniMax-M2.5 FP8 on B200 (vLLM
0.19.0, graphed prompt steps) +11.9 ms at 1k and +10.9 ms at 8k (TP 4), on H100 (0.18.0) +26.1 / +26.3 ms (TP 4
EP 4), while the same model's NVFP4 path on the same release and GPU misses -0.4 ms (TP >= 4), gpt-oss's MXFP4 paths
0.9 / 2.5 ms. FP8 minus NVFP4 at one TP is TP-flat on B200 (TP 2 11.1 ms, TP 4 10.1 ms). A request-path time would not
see the weight format, a per-token one would grow 8x from 1k to 8k, and the eager host floor cannot bind an 8k step
whose GPU time is 150-200 ms: a fixed amount of GPU work per MoE layer in each prompt step. Its size follows the GPU:
H100 / B200 = 2.20, against 2.27 for their dense FP8 tensor rates (3.35 vs 8 TB/s of HBM: 2.39), so one GPU
generation's reading predicts the other's within 4 % (the cross-generation test that holds it out,
``twin.fitting.prompt_fixed_prior``). A lead for the work, not pinned at the rows' releases: vLLM's contiguous
grouped FP8 GEMM path (DeepGEMM, taken for steps of at least one 128-row block, so never for the decodes here)
sizes its permuted buffers, the activation and the quantisation between the GEMMs at M x top_k + E x (128 - 1) rows
(``DeepGemmExperts.workspace_shapes``), a fixed E x 127 rows beside the prompt's own (E = 256: 32,512 rows).

Pure decode steps are not charged (their TPOT is priced without it). It is GPU time: on a step no CUDA graph covers
the step takes the longer of (GPU time + this) and the eager host floor (installed before ``twin.cost.eager_steps``,
as ``twin.cost.marlin_blocks``). ``explain()``: ``moe_prompt_layer_s`` (the step's whole charge). Prior 0; embedded
per path in ``twin.cost.generation_experts``.
"""

from __future__ import annotations

from twin.cost.default_terms import embedded
from twin.cost.eager_steps import name_floor_share, prompt_step_array
from twin.cost.marlin_blocks import install as install_marlin_blocks
from twin.cost.param_checks import check_nonneg

TERM = "moe_prompt_layer_s"


def prompt_layer_s(gpu, model, formats, given: float | None) -> float:
    """``given``, or the embedded value for this deployment (the (generation, expert format) table, else 0); a
    one-line error for a negative or non-numeric value."""
    return check_nonneg(TERM, embedded(gpu, model, formats, moe_prompt_layer_s=given)[TERM])


def install(cost, given: float | None) -> None:
    """Give a roofline ``cost`` Marlin's padded rows (``twin.cost.marlin_blocks``) and this term: ``moe_prompt_
    fixed_s`` (s per prompt step), added to every step with a prompt in it, to the fit's arrays (beside Marlin's,
    before the eager floor) and to ``explain()``. At 0 or on a dense model nothing is wrapped."""
    install_marlin_blocks(cost)
    per_layer = cost.moe_prompt_layer_s = prompt_layer_s(cost.gpu, cost.model, cost.weight_formats, given)
    fixed = cost.moe_prompt_fixed_s = per_layer * cost.model.moe_layers if cost.model.is_moe else 0.0
    if not fixed:
        return
    sums, explain, marlin = cost.step_time_from_sums, cost.explain, cost.marlin_padding_array

    def step_time_from_sums(n_seqs: int, tokens: int, context: int, new_x_context: int, new_squared: int,
                            spec_tokens: int) -> float:
        t = sums(n_seqs, tokens, context, new_x_context, new_squared, spec_tokens)
        return t + fixed if tokens != n_seqs else t

    def gpu_extra_array(tokens, seqs):      # the roofline adds it to the fit's arrays before the eager floor
        add = prompt_step_array(tokens, seqs, lambda _tokens: fixed)
        return add if marlin is None else add + marlin(tokens, seqs)

    def explain_step(step) -> dict[str, float]:
        parts = explain(step)
        n_seqs, tokens = len(step.num_new_tokens), sum(step.num_new_tokens)
        if n_seqs and tokens != n_seqs:
            name_floor_share(parts, TERM, fixed)
        return parts

    cost.marlin_padding_array = gpu_extra_array
    cost.step_time_from_sums, cost.explain = step_time_from_sums, explain_step
