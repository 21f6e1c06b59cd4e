"""Mixture-of-experts GEMMs below dense efficiency: the routed experts' share of a step's linear work, so the
roofline can run it at ``moe_expert_efficiency`` of what dense GEMMs reach.

vLLM runs the routed experts of a MoE layer as one fused / grouped GEMM over the experts the step's tokens were
sent to. Against a dense GEMM of the same size it loses on both sides of the roofline: each expert is a small
GEMM (few tokens per expert, tiles padded, fewer CTAs per weight matrix, so its weight stream does not saturate
HBM), tokens must be permuted to and from expert order, and experts are not loaded evenly within a step (the
busiest expert's tiles set the kernel's tail). Two fractions of the dense GEMMs' achieved rate (dimensionless,
in (0, 1]; 1 is the pure roofline): ``moe_expert_efficiency`` for the experts' weight streams (decode: few
tokens per expert, bandwidth bound) and ``moe_expert_compute_efficiency`` for their FLOPs (prefill: tiles padded
to the tokens each expert got, imbalance). Prior 1 (no penalty) before a fit; fitted values in docs/fidelity.md.

A third term, ``moe_active_expert_share`` (dimensionless, in (0, 1]; prior 1), is the share of a layer's routed
experts its tokens' routing effectively draws from: a skewed routing (popular experts, tokens that route alike)
touches fewer distinct experts per step than the uniform rule, so a step of T tokens streams
``S E (1 - (1 - k / (S E))^T)`` experts' weights (``twin.hardware.moe``); a large batch still reads S of them, so
the saving is largest where the uniform rule says most experts are touched. A property of the model's router and of
the workload, not of the GPU; an embedded value goes per expert format (effectively per model) in
``twin.cost.default_terms.EXPERT_FORMAT_TERMS``. None is embedded: gpt-oss's 0.75, read off its B200 rows, was tried
and left out (docs/fidelity.md "Round 12: gpt-oss's loaded B200 rows").

Units: FLOPs per scheduled token and bytes per step, both per GPU (tensor parallelism splits each expert).
"""

from __future__ import annotations

from twin.hardware.catalog import ModelSpec, linear_weight_bytes
from twin.hardware.moe import touched_fraction

DEFAULT_MOE_EXPERT_EFFICIENCY = 1.0
DEFAULT_MOE_EXPERT_COMPUTE_EFFICIENCY = 1.0
DEFAULT_MOE_ACTIVE_EXPERT_SHARE = 1.0     # prior: every expert equally likely (twin.hardware.moe's uniform rule)


def routed_expert_flops_per_token(model: ModelSpec, tensor_parallel_size: int) -> float:
    """FLOPs one token's routed experts cost on one GPU: 2 x top_k x expert weights x MoE layers / tp."""
    if not model.is_moe:
        return 0.0
    return 2.0 * model.moe_layers * model.num_experts_per_tok * model.expert_params / tensor_parallel_size


def routed_expert_read_bytes(model: ModelSpec, weight_dtype: str, tensor_parallel_size: int, tokens: int,
                             active_share: float = DEFAULT_MOE_ACTIVE_EXPERT_SHARE) -> float:
    """Routed-expert weight bytes a step of ``tokens`` tokens streams on one GPU (the experts it touches, their
    routing drawn from ``active_share`` of them)."""
    if not model.is_moe or tokens <= 0:
        return 0.0
    share = touched_fraction(model.num_experts, model.num_experts_per_tok, tokens, active_share)
    return share * linear_weight_bytes(model.routed_expert_params, weight_dtype) / tensor_parallel_size


def extra_factor(moe_expert_efficiency: float) -> float:
    """How much longer than at dense efficiency the expert GEMMs take, minus one (0 at efficiency 1)."""
    return 1.0 / moe_expert_efficiency - 1.0
