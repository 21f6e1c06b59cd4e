"""An expert path's eager MoE floor that one attention architecture pays and another does not (issue 33, round 14;
docs/fidelity.md "Round 14: the MoE eager floor per family").

``twin.cost.eager_steps`` prices a step no CUDA graph covers at ``eager_layer_host_s x layers +
eager_moe_layer_host_s x MoE layers`` (the host's time to issue the forward pass). Blackwell's embedded MoE extra
(1.15 ms per MoE layer, ``default_terms.GENERATION_TERMS``) was read off the March Kimi-K2.5 and MiniMax-M2.5
rows; round 13 found MiniMax's NVFP4 layer on B200 (GQA attention, FlashInfer's fused MoE) pays about its launch
count instead: 22 host-dispatched ops per decoder layer (GQA attention 9, the TP query / key RMSNorm 4, MoE 9:
fused_add_rms_norm, the FP32 router's cast and GEMM, sigmoid + bias top-k and renormalisation 3, the FP4 activation
quant, FlashInfer's fused MoE call, the all-reduce; counted from vLLM's ``minimax_m2.py``), so 22 - 16 = 6 ops
beyond the 16-op dense layer of the per-layer reading, at its per-op time (0.84 ms / 16): 0.315 ms, read ~0.36
on the nightly NVFP4 rows' eager 1k prompt steps. Kimi-K2.5's NVFP4 layer (MLA, a shared expert) reads 1.50 ms
on the same expert format, so the count is scoped to GQA layers (``@blackwell+gqa+experts_nvfp4``,
``twin.fitting.scoped``) and Kimi keeps the generation's value.

The value is a count times the B200 Llama rows' per-layer time: no MiniMax row is read, so its evidence is those
Llama rows (``twin.fitting.provenance``), and a fold holding them out prices it at the same count times its own
per-layer prior (``twin.fitting.launch_prior.scope_floor_prior_s``).

Round 16 (docs/fidelity.md "Round 16: Kimi-K2.5 INT4's Marlin eager floor"): an expert path that only one attention
architecture runs in the data can take its own count keyed on the format alone (``@<generation>+experts_<format>``,
``EXPERT_PATH_LAYER_OPS``). The Marlin W4A16 path's (``fused_marlin_moe``; only Kimi-K2.5 INT4 runs it, MLA, B200,
vLLM 0.15.1): 26 host-dispatched ops per decoder layer (``MARLIN_INT4_LAYER_OPS``, counted in
``twin.fitting.launch_prior``), 10 beyond the dense layer, 0.525 ms per MoE layer at 0.84 ms / 16 per op, where it
takes the generation's 1.15 ms (its rows read 0.72, round 14). Tried held out and NOT embedded (the table is empty):
``benchmarks/kimi_int4_floor.py`` puts it in.
"""

from __future__ import annotations

from twin.cost.generations import gpu_generation
from twin.hardware.weight_formats import format_family

NAME = "eager_moe_layer_host_s"
DENSE_LAYER_OPS = 16          # a dense GQA decoder layer with FP8 weights: the per-layer readings' layer
# (GPU generation, routed experts' format family) of a GQA MoE layer -> host-dispatched ops per decoder layer
GQA_PATH_LAYER_OPS: dict[tuple[str, str], int] = {("blackwell", "nvfp4"): 22}
# host-dispatched ops per decoder layer of Kimi-K2.5's MLA layer on the Marlin W4A16 MoE path (round 16)
MARLIN_INT4_LAYER_OPS = 26
# (GPU generation, routed experts' format family) -> host-dispatched ops per decoder layer of an expert path that
# only one attention architecture runs in the data, so keyed on the format alone; embedded: none (round 16's Marlin
# count, ("blackwell", "int4"): MARLIN_INT4_LAYER_OPS, is opt-in: benchmarks/kimi_int4_floor.py)
EXPERT_PATH_LAYER_OPS: dict[tuple[str, str], int] = {}


def counted_floor_s(layer_ops: int, per_layer_s: float) -> float:
    """A MoE layer's host time beyond the dense layer's (s): its extra ops at ``per_layer_s / 16`` per op, >= 0."""
    return max(0, layer_ops - DENSE_LAYER_OPS) * per_layer_s / DENSE_LAYER_OPS


def scope_of(generation: str, fmt: str) -> str:
    return f"{generation}+gqa+experts_{fmt}"


def path_scope_of(generation: str, fmt: str) -> str:
    """The fit scope of an ``EXPERT_PATH_LAYER_OPS`` count (any attention)."""
    return f"{generation}+experts_{fmt}"


def gqa_path_floor_s(gpu, model, formats, per_layer_s: float) -> float | None:
    """The counted ``eager_moe_layer_host_s`` of a GQA MoE model on this GPU's generation and routed-expert format
    (``per_layer_s``: the generation's embedded ``eager_layer_host_s``), or None (no count: MLA, dense, another
    path)."""
    if not getattr(model, "is_moe", False) or getattr(model, "is_mla", False) or formats is None:
        return None
    ops = GQA_PATH_LAYER_OPS.get((gpu_generation(gpu), format_family(formats.routed_experts)))
    return None if ops is None else counted_floor_s(ops, per_layer_s)


def path_floor_s(gpu, model, formats, per_layer_s: float) -> float | None:
    """The counted ``eager_moe_layer_host_s`` of a MoE model on this GPU's generation and routed-expert format: the
    GQA layer's count (``gqa_path_floor_s``), else the expert path's (``EXPERT_PATH_LAYER_OPS``), else None."""
    if (gqa := gqa_path_floor_s(gpu, model, formats, per_layer_s)) is not None:
        return gqa
    if not getattr(model, "is_moe", False) or formats is None:
        return None
    ops = EXPERT_PATH_LAYER_OPS.get((gpu_generation(gpu), format_family(formats.routed_experts)))
    return None if ops is None else counted_floor_s(ops, per_layer_s)


def counted_keys() -> dict[str, tuple[str, int]]:
    """Every count as its fit key -> (generation, ops per decoder layer): the GQA layers' and the expert paths'."""
    out = {f"{NAME}@{scope_of(gen, fmt)}": (gen, ops) for (gen, fmt), ops in GQA_PATH_LAYER_OPS.items()}
    return out | {f"{NAME}@{path_scope_of(gen, fmt)}": (gen, ops) for (gen, fmt), ops in EXPERT_PATH_LAYER_OPS.items()}


def scoped_values(per_layer_s_of) -> dict[str, float]:
    """The counts as fit keys (``eager_moe_layer_host_s@<generation>+gqa+experts_<format>``,
    ``...@<generation>+experts_<format>``) -> s, given ``per_layer_s_of(generation)``, the generation's embedded
    per-layer host time."""
    return {key: counted_floor_s(ops, per_layer_s_of(gen)) for key, (gen, ops) in counted_keys().items()}


KEYS: tuple[str, ...] = tuple(counted_keys())


def embedded_values(generation_terms: dict[str, dict[str, float]]) -> dict[str, float]:
    """The counts as embedded (fit key -> s), at each generation's embedded per-layer host time in
    ``generation_terms`` (``twin.cost.default_terms.GENERATION_TERMS``); a count of 0 s is no entry."""
    values = scoped_values(lambda gen: generation_terms.get(gen, {}).get("eager_layer_host_s", 0.0))
    return {k: v for k, v in values.items() if v > 0}
