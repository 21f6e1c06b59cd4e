"""Mixture-of-experts arithmetic: how many experts a step's tokens touch, so how many expert weights it reads.

Each token of a MoE layer is routed to `top_k` of `num_experts` routed experts. Treating the routing as uniform
and independent across tokens, an expert is missed by one token with probability (1 - k/E), so by all T tokens of
a step with probability (1 - k/E)^T, and the expected number of distinct experts a layer runs is

    E_touched(T) = E x (1 - (1 - k/E)^T)

That is k for one token and tends to E for large batches: a decode step of a few sequences reads only a few
experts' weights; a large batch or a prefill chunk reads them all. The fused MoE kernel streams each touched
expert's weights once per step, so the routed-expert bytes read are E_touched(T) / E of the routed-expert bytes.
Shared experts (DeepSeek, Qwen2-MoE) and the router run for every token, like a dense MLP.

Real routing is not uniform (popular experts), which makes fewer distinct experts per step; the uniform rule
is the upper side of that, and matches a well-balanced (auxiliary-loss / bias balanced) model.
"""

from __future__ import annotations

from twin.errors import TwinInputError


def expected_experts_touched(num_experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct routed experts one MoE layer runs for `tokens` tokens (see the module docstring)."""
    if num_experts <= 0 or not (1 <= top_k <= num_experts):
        raise TwinInputError(f"num_experts_per_tok = {top_k}: must be in [1, num_experts = {num_experts}]")
    if tokens <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def touched_fraction(num_experts: int, top_k: int, tokens: int | None) -> float:
    """Share of the routed experts one layer reads for `tokens` tokens; None: all of them (the upper bound)."""
    if tokens is None:
        return 1.0
    return expected_experts_touched(num_experts, top_k, tokens) / num_experts
