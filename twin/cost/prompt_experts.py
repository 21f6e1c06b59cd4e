"""The routed experts' weight stream in steps that carry a prompt: ``moe_prompt_stream_efficiency`` (issue 33,
round 7: MiniMax-M2.5's light-load 1k-prompt gap; docs/fidelity.md "Round 7: MiniMax-M2.5 (issue 33)").

What it prices: a prompt step of a MoE model touches (nearly) every routed expert with a few dozen tokens each
(a 1k-token MiniMax-M2.5 step: 256 experts, top-8, ~32 tokens per expert). The roofline takes such a step as
``max(FLOPs / rate, weights / bandwidth)``: at 32 tokens per expert the experts' weights bind, read at the decode
steps' rate. vLLM runs those GEMMs with the kernels' prompt-sized tiles (the fused-MoE kernels pick their token
tile by the step's tokens per expert), which need not stream the weights at the decode kernels' rate.
``moe_prompt_stream_efficiency`` (dimensionless, in (0, 1]) is the fraction of the decode weight-stream rate the
routed experts reach in a step with a prompt in it (any step whose tokens exceed its sequences):

    moe_prompt_stream_extra_s = (1 / efficiency - 1) x routed-expert bytes the step touches / bandwidth

seconds per such step, on the weights' side (the step's touched experts, ``twin.cost.moe_terms``; the bandwidth
the roofline streams weights at). Pure decode steps are not charged. ``explain()``: ``moe_prompt_stream_extra_s``.

Prior: 1 (no extra; the decode rate). Round 7 fitted it on the rows that call for it (MiniMax-M2.5 at CONC <= 16,
FP8 on B200 and H100) and held it out by TP, GPU, ISL and OSL, but alone it over-charged the rows at CONC >= 32
(TPOT +5 points). Round 8 found the load dependence on the decode side: those rows' decode tokens do not pay
Blackwell's per-token-per-layer cost (``twin.cost.decode_tokens``); fitted together (0.5 and share 0) they hold out
by TP, ISL / OSL and load band, but are not embedded: the family folds' refit of the eager MoE host floor leans on
the gap they explain (docs/fidelity.md "Round 8: MiniMax-M2.5"). It stays at its prior; a fit may set it per
(generation, expert format) scope (``moe_prompt_stream_efficiency@blackwell+experts_fp8``).
"""

from __future__ import annotations

import functools

from twin.cost.default_terms import FLAT_DEFAULTS, embedded
from twin.cost.eager_steps import name_floor_share, prompt_step_array
from twin.cost.moe_terms import routed_expert_read_bytes
from twin.cost.param_checks import check_fraction

DEFAULT_MOE_PROMPT_STREAM_EFFICIENCY = FLAT_DEFAULTS["moe_prompt_stream_efficiency"]   # the prior: 1, the decode rate


def prompt_stream_extra_s(model, routed_format: str, moe_shards: int, tokens: int, bandwidth_bytes_per_s: float,
                          efficiency: float) -> float:
    """Seconds a step of ``tokens`` tokens with a prompt in it spends beyond the decode rate streaming the routed
    experts it touches on one GPU (0 at efficiency 1 or for a dense model)."""
    check_fraction("moe_prompt_stream_efficiency", efficiency)
    if efficiency == 1.0 or not model.is_moe or tokens <= 0:
        return 0.0
    return (1.0 / efficiency - 1.0) * routed_expert_read_bytes(model, routed_format, moe_shards, tokens) \
        / bandwidth_bytes_per_s


def prompt_stream_efficiency(gpu, model, formats, given: float | None) -> float:
    """``given``, or the embedded value for this deployment (``twin.cost.default_terms.embedded``: the (generation,
    expert format) table, else the prior 1)."""
    value = embedded(gpu, model, formats, moe_prompt_stream_efficiency=given)["moe_prompt_stream_efficiency"]
    return check_fraction("moe_prompt_stream_efficiency", value)


def install(cost, given: float | None, bandwidth_bytes_per_s: float) -> None:
    """Give a roofline ``cost`` the term (``given``, None: embedded): ``prompt_stream_s(tokens)`` and step-time
    methods that add it to every step with a prompt in it; at the prior (1) or on a dense model nothing is wrapped
    (the hot path is untouched)."""
    efficiency = cost.moe_prompt_stream_efficiency = prompt_stream_efficiency(cost.gpu, cost.model,
                                                                              cost.weight_formats, given)
    cost.prompt_stream_s = None
    if efficiency == 1.0 or not cost.model.is_moe:
        return
    model, fmt, shards, dp = cost.model, cost.weight_formats.routed_experts, cost.layout.moe_shards, cost.layout.dp

    @functools.lru_cache(maxsize=8192)
    def extra_s(tokens: int) -> float:      # every DP rank's tokens reach the experts' GPUs, as in the roofline
        return prompt_stream_extra_s(model, fmt, shards, tokens * dp, bandwidth_bytes_per_s, efficiency)

    sums, arrays, explain = cost.step_time_from_sums, cost.step_times_s, cost.explain

    def step_time_from_sums(n_seqs: int, tokens: int, context: int, new_x_context: int, new_squared: int,
                            spec_tokens: int) -> float:
        t = sums(n_seqs, tokens, context, new_x_context, new_squared, spec_tokens)
        return t + extra_s(tokens) if tokens != n_seqs else t

    def step_times_s(tokens, seqs, logits, context, pairs):
        return arrays(tokens, seqs, logits, context, pairs) + prompt_step_array(tokens, seqs, extra_s)

    def explain_step(step) -> dict[str, float]:
        parts = explain(step)
        n_seqs, tokens = len(step.num_new_tokens), sum(step.num_new_tokens)
        extra = extra_s(tokens) if n_seqs and tokens != n_seqs else 0.0
        if extra:      # a floored step's catch-all part holds it (total beyond the GPU parts): name it
            name_floor_share(parts, "moe_prompt_stream_extra_s", extra)
        return parts

    cost.prompt_stream_s = extra_s
    cost.step_time_from_sums, cost.step_times_s, cost.explain = step_time_from_sums, step_times_s, explain_step
