"""The held-out prior of an expert path's per-request time on a GPU generation (``expert_path_request_s``, issue 33,
round 11; ``twin.cost.expert_path_request``; docs/fidelity.md "Round 11: the bench client and MoE prompt time on
B200").

A generation whose own reading a fold holds out takes another generation's reading of the SAME expert format,
scaled by the two GPUs' dense FP8 tensor rates (the catalog's datasheet figures; B200 / H100 = 2.27; their HBM
bandwidths give 2.39). An empirical rule, tested rather than tuned on the one pair there is: the block-FP8 readings
(MiniMax-M2.5 FP8, 26.15 ms per request on H100, 11.35 ms on B200) predict each other within 1.3 % this way
(``benchmarks/expert_request_reading.py``); what work it scales with is not pinned. Where no other generation's
reading of the format is kept (the family fold holding MiniMax out, the silicon-held-out source fold) nothing is set:
the term stays at its stated prior 0."""

from __future__ import annotations

from twin.cost.generation_experts import GENERATION_EXPERT_TERMS
from twin.fitting.expert_path_prior import geometric_mean
from twin.fitting.provenance import RESET
from twin.hardware.catalog import resolve_gpu

TERM = "expert_path_request_s"
RATE_DTYPE = "fp8"
# the catalog GPU whose datasheet rate stands for a generation (the data's GPUs)
GENERATION_GPU = {"hopper": "H100-SXM", "blackwell": "B200"}


def rate_ratio(source_gpu: str, target_gpu: str) -> float:
    """The factor from a reading on ``source_gpu`` to ``target_gpu``: the ratio of their dense FP8 tensor rates
    (source / target; how much longer a fixed amount of tensor work takes on the target)."""
    return resolve_gpu(source_gpu).flops(RATE_DTYPE) / resolve_gpu(target_gpu).flops(RATE_DTYPE)


def key(generation: str, fmt: str) -> str:
    return f"{TERM}@{generation}+experts_{fmt}"


def expert_request_prior(plan, table: dict | None = None) -> dict[str, float]:
    """``expert_path_request_s@<gen>+experts_<fmt>`` for every embedded entry of the term that ``plan``
    (``provenance.FoldPlan``) resets: the geometric mean of the same format's entries on other generations that the
    plan keeps, each scaled by ``rate_ratio``; {} where none is kept. ``table``: ``GENERATION_EXPERT_TERMS``."""
    table = GENERATION_EXPERT_TERMS if table is None else table
    values = {(g, f): t[TERM] for (g, f), t in table.items() if TERM in t and g in GENERATION_GPU}
    out: dict[str, float] = {}
    for (gen, fmt) in values:
        if plan.actions.get(key(gen, fmt), (None, None))[1] != RESET:
            continue
        kept = [v * rate_ratio(GENERATION_GPU[g], GENERATION_GPU[gen]) for (g, f), v in values.items()
                if f == fmt and g != gen and key(g, f) not in plan.actions]
        if kept:
            out[key(gen, fmt)] = geometric_mean(kept)
    return out
