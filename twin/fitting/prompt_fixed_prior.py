"""The held-out prior of an expert path's fixed prompt time on a GPU generation (``moe_prompt_layer_s``, issue 33,
round 11; ``twin.cost.prompt_moe_fixed``; docs/fidelity.md "Round 11: the bench client and MoE prompt time on B200").

The term is GPU work of a fixed size per MoE layer in each prompt step, so the time it takes scales with the GPU: a
generation whose own reading a fold holds out takes another generation's reading of the SAME expert format, scaled
by the two GPUs' dense FP8 tensor rates (the catalog's datasheet figures; B200 / H100 = 2.27; their HBM bandwidths
give 2.39). Tested, not tuned: the block-FP8 readings (MiniMax-M2.5 FP8, 0.42 ms per MoE layer on H100, 0.183 ms
on B200) predict each other within 1-2 % this way (``benchmarks/prompt_fixed_reading.py``). Where no other
generation's reading of the format is kept (the family fold holding MiniMax out, the silicon-held-out source fold)
nothing is set: the term stays at its stated prior 0."""

from __future__ import annotations

from twin.cost.generation_experts import GENERATION_EXPERT_TERMS
from twin.fitting.provenance import RESET
from twin.hardware.catalog import resolve_gpu

TERM = "moe_prompt_layer_s"
RATE_DTYPE = "fp8"
# the catalog GPU whose datasheet rate stands for a generation (the data's GPUs)
GENERATION_GPU = {"hopper": "H100-SXM", "blackwell": "B200"}


def rate_ratio(source_gpu: str, target_gpu: str) -> float:
    """How much longer a fixed amount of tensor work takes on ``target_gpu`` than on ``source_gpu``: the ratio of
    their dense FP8 tensor rates (source / target)."""
    return resolve_gpu(source_gpu).flops(RATE_DTYPE) / resolve_gpu(target_gpu).flops(RATE_DTYPE)


def key(generation: str, fmt: str) -> str:
    return f"{TERM}@{generation}+experts_{fmt}"


def prompt_fixed_prior(plan, table: dict | None = None) -> dict[str, float]:
    """``moe_prompt_layer_s@<gen>+experts_<fmt>`` for every embedded entry of the term that ``plan``
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
            product = 1.0
            for v in kept:
                product *= v
            out[key(gen, fmt)] = product ** (1.0 / len(kept))
    return out
