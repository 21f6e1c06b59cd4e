"""Work per scheduled token per decoder layer that tensor parallelism does not split: ``layer_token_overhead_s``.

What it stands for: time a step spends on each of its tokens in each decoder layer beyond the roofline's GEMMs,
attention and collectives, and that every TP rank repeats in full (the per-token, per-layer kernels around the
GEMMs: norms, rotary, activation quantisation, MoE routing and token permutation, the residual stream, and the
small-kernel tails of a mixed prefill step that runs outside the decode CUDA graphs). Units: seconds per token
per layer (reported in us); the step pays ``layer_token_overhead_s x num_hidden_layers x scheduled tokens``.

Prior 0 (the pure roofline). Why it exists (issue 33, docs/fidelity.md 'Round 4: where the light-load TTFT
goes'): at CONC = 4 on B200 the measured TTFT grows with the prompt by 5-25 us per token more than the twin's,
nearly the same at TP1 and TP8, and per decoder layer the four families land close together (median 0.16 us
gpt-oss-120b, 0.18 Llama-3.1-70B, 0.23 MiniMax-M2.5, 0.15 Kimi-K2.5) where per token alone they spread 2.5x.
The term folds into the roofline's per-token coefficient, so the step-time hot path is unchanged; ``explain()``
shows it as its own part (``layer_token_overhead_s``), apart from the flat ``per_token_overhead_s``.

What it is (round 9, ``benchmarks/layer_token_reading.py``; docs/fidelity.md "Round 9: Blackwell's per-token prompt
cost"): split over TP, the B200 rows' missing prompt time is a GEMM share (an achieved fraction of the datasheet of
0.38-0.40, H100 0.45) plus a part TP does not divide, 0.15-0.21 us per layer on the dense Llama-3.1-70B (H100:
0.016) and 0.15-0.3 us on every MoE path of either generation (H100 gpt-oss 0.195): a fold without the generation's
rows gives its MoE paths the other generation's MoE reading (``twin.fitting.moe_token_prior``).
"""

from __future__ import annotations

from twin.cost.param_checks import check_nonneg


def layer_token_terms(layer_token_overhead_s: float, model) -> tuple[float, float]:
    """(the checked per-layer value, its cost per scheduled token of a step: times the model's decoder layers),
    in seconds; a one-line error naming the field when the value is negative or not a finite number."""
    v = check_nonneg("layer_token_overhead_s", layer_token_overhead_s)
    return v, v * model.num_hidden_layers


def explain_token_parts(parts: dict[str, float], per_token_overhead_s: float, layer_tokens_s: float,
                        tokens: int) -> None:
    """Move the per-token costs out of ``parts["overhead_s"]`` into their own parts (only those that are set):
    ``per_token_overhead_s`` (flat) and ``layer_token_overhead_s`` (per layer, summed over the layers)."""
    for key, k in (("per_token_overhead_s", per_token_overhead_s), ("layer_token_overhead_s", layer_tokens_s)):
        if k:
            parts[key] = k * tokens
            parts["overhead_s"] -= parts[key]
