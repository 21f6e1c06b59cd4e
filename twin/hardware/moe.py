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
is the upper side of that, and matches a well-balanced (auxiliary-loss / bias balanced) model. A narrower routing
is stated as an active share S of the experts the tokens draw from uniformly, E_touched = S E (1 - (1 - k/(S E))^T)
(S = 1: the rule above; issue 33, round 12: ``moe_active_expert_share``, twin.cost.moe_terms).
"""

from __future__ import annotations

from twin.errors import TwinInputError


def expected_experts_touched(num_experts: int, top_k: int, tokens: int, active_share: float = 1.0) -> float:
    """Expected distinct routed experts one MoE layer runs for `tokens` tokens (see the module docstring);
    ``active_share`` < 1: the tokens' routing draws uniformly from only that share of the experts (at least
    `top_k` of them), the narrower routing of ``moe_active_expert_share`` (twin.cost.moe_terms)."""
    if num_experts <= 0 or not (1 <= top_k <= num_experts):
        raise TwinInputError(f"num_experts_per_tok = {top_k}: must be in [1, num_experts = {num_experts}]")
    if not 0.0 < active_share <= 1.0:
        raise TwinInputError(f"moe_active_expert_share = {active_share!r}: must be in (0, 1]")
    if tokens <= 0:
        return 0.0
    active = max(active_share * num_experts, top_k)      # S = 1: all of them
    return active * (1.0 - (1.0 - top_k / active) ** tokens)


def touched_fraction(num_experts: int, top_k: int, tokens: int | None,
                     active_share: float = 1.0) -> float:
    """Share of the routed experts one layer reads for `tokens` tokens; None: all of them (the upper bound)."""
    if tokens is None:
        return 1.0
    return expected_experts_touched(num_experts, top_k, tokens, active_share) / num_experts
