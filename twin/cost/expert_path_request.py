"""A per-request time of an expert kernel path: ``expert_path_request_s`` (seconds per request, on one (generation,
expert format) path; issue 33, round 11; docs/fidelity.md "Round 11: the bench client and MoE prompt time on B200").

What the rows show (``benchmarks/expert_request_reading.py``, the embedded defaults of round 10, light load): on
the block-FP8 expert path the TTFT misses a time that does NOT grow with the prompt: MiniMax-M2.5 FP8 on B200 (vLLM
0.19.0) +11.9 ms at 1k and +10.9 ms at 8k (TP 4), on H100 (0.18.0) +26.1 / +26.3 ms (TP 4 EP 4), while the same
model's NVFP4 path on the same release and GPU misses -0.4 ms (TP >= 4) and gpt-oss's MXFP4 paths 0.9 / 2.5 ms, with
the same bench client. A client's request path does not see the weight format, a per-token time would grow 8x from
1k to 8k, and the eager host floor cannot bind an 8k step whose GPU time is 150-200 ms. Nor is it GPU time in the
steps: charged to every step with a prompt in it (tried, round 11), it over-charges the loaded rows' TPOT (C >= 64:
+4 to +14 points, where a prompt joins every few decode steps), which the rows do not show. So it is a time per
request that does not hold up the engine's other sequences, and the twin charges it where such time goes: on the
request path (``request_path_s``, beside the client's own; ``twin.sim.replica``), for every request of a deployment
on the path. Which work it is, is not pinned (it differs between two checkpoints of one model on one release).

Its size follows the GPU generation: H100 / B200 = 2.30, against 2.27 for the two GPUs' dense FP8 tensor rates, so
either generation's reading predicts the other's within 1.3 % when scaled by them (the cross-generation rule a fold
uses when it holds one out, ``twin.fitting.expert_request_prior``: an empirical rule, tested on this one pair).

Prior 0; embedded per path in ``twin.cost.generation_experts``; on an MLA model's expert path the table of
``twin.cost.mla_request`` (round 12: Kimi-K2.5 NVFP4's 20.9 ms is a reading, not embedded). Nothing per step changes
(the hot path is untouched).
"""

from __future__ import annotations

from twin.cost.default_terms import embedded
from twin.cost.marlin_blocks import install as install_marlin_blocks
from twin.cost.mla_request import mla_request_s
from twin.cost.param_checks import check_nonneg

TERM = "expert_path_request_s"


def path_request_s(gpu, model, formats, given: float | None) -> float:
    """``given``, or the embedded value for this deployment (an MLA model's expert path, ``twin.cost.mla_request``;
    the (generation, expert format) table; else 0; 0 on a dense model); a one-line error for a negative or
    non-numeric value."""
    given = mla_request_s(model, formats) if given is None else given
    value = check_nonneg(TERM, embedded(gpu, model, formats, expert_path_request_s=given)[TERM])
    return value if getattr(model, "is_moe", False) else 0.0


def install(cost, given: float | None) -> None:
    """Give a roofline ``cost`` Marlin's padded rows (``twin.cost.marlin_blocks``) and this term: ``expert_path_
    request_s`` (s per request) added to its ``request_path_s`` (the simulator's per-request delay before the engine
    core). Installed before the eager floor, as Marlin's rows must be."""
    install_marlin_blocks(cost)
    extra = cost.expert_path_request_s = path_request_s(cost.gpu, cost.model, cost.weight_formats, given)
    cost.request_path_s += extra
