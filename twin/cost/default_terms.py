"""Embedded defaults of the roofline's fitted terms that depend on the deployment beyond the two efficiencies of
``twin.cost.generations``: by GPU generation (the per-token and per-layer costs, the all-reduce latencies), by
weight format (the quantized GEMMs' rate) and by the routed experts' format (the MoE expert kernel path: its FLOP
efficiency and fixed time per MoE layer, ``twin.cost.kernel_path``). A generation or format without its own
value takes the roofline's flat default (``FLAT_DEFAULTS``). Values, standard errors and identification: the
tables below and docs/fidelity.md ("Round 4: the fit on whole runs")."""

from __future__ import annotations

from twin.cost.eager_path_floors import NAME as EAGER_MOE_FLOOR, path_floor_s
from twin.cost.generation_experts import generation_expert_term
from twin.cost.generations import gpu_generation
from twin.cost.marlin_moe import MARLIN_W4A16_MOE_TERMS
from twin.cost.mla_decode import mla_term
from twin.cost.moe_terms import (DEFAULT_MOE_ACTIVE_EXPERT_SHARE, DEFAULT_MOE_EXPERT_COMPUTE_EFFICIENCY,
                                 DEFAULT_MOE_EXPERT_EFFICIENCY)
from twin.hardware.catalog import GpuSpec
from twin.hardware.weight_formats import format_family

# generation -> {roofline keyword: value in model units (s, fractions)}
GENERATION_TERMS: dict[str, dict[str, float]] = {
    # prefill and decode time per scheduled token per decoder layer that TP does not split (twin.cost.layer_tokens):
    # 0.2 us read off the C = 4 prompt slopes of the B200 rows (four families, TP 1-8, vLLM 0.10-0.19), 0.18-0.21
    # with each family held out (docs/fidelity.md, "Round 4: where the light-load TTFT goes"); Hopper's dense rows
    # show none, so Hopper keeps 0. Not identified for other generations: they keep the flat 0.
    # host time of a forward pass no CUDA graph covers (twin.cost.eager_steps; the graphs' limits are launch
    # facts): 0.84 ms per decoder layer from the B200 Llama rows' 1k prompt steps under FULL_DECODE_ONLY (a floor
    # that does not move with TP: 0.86 at TP 1-2, 0.84-0.87 at TP 4-8), 1.15 ms more per MoE layer from the March
    # Kimi-K2.5 and MiniMax-M2.5 rows (held out by family: 0.87 without Kimi, 1.31 without MiniMax; docs/fidelity.md
    # "Round 5: the per-request TTFT intercept"). Hopper keeps 0 here, although its light-load 1k rows show the same
    # host time (0.92 ms per layer, round 7/8): the calibrate workflow's synthetic H100 runs were made without it;
    # a fold without B200 rows takes that reading for Blackwell (twin.fitting.provenance.HOST_READINGS, host_prior).
    # the link part of one all-reduce, so that a step with no collective (TP 1) still pays the rest of the fitted
    # latency per layer (twin.cost.unsharded_decode): 6 us, the increment per all-reduce of the gpt-oss and
    # MiniMax NVFP4 B200 TP pairs over their TP 1 rows (5.5 / 7.0 us, benchmarks/tp1_decode.py); Hopper has none
    "blackwell": {"layer_token_overhead_s": 0.2e-6, "eager_layer_host_s": 0.84e-3, "eager_moe_layer_host_s": 1.15e-3,
                  "unsharded_allreduce_link_s": 6e-6},
}
# weight format of any linear layer group (the fit's ``@int4``, ``@fp8`` scopes) -> quant_weight_efficiency;
# the first format in this order that a checkpoint uses sets it
FORMAT_QUANT_EFFICIENCY: dict[str, float] = {}
# routed experts' format (base name: ``int4-g32-sym`` -> ``int4``) -> {roofline keyword: value}, MoE models only
EXPERT_FORMAT_TERMS: dict[str, dict[str, float]] = {
    # INT4 W4A16 experts on vLLM's Marlin MoE (Kimi-K2.5 INT4, B200): fitted with other configurations held out,
    # twin.cost.marlin_moe (docs/fidelity.md "Round 5: Kimi-K2.5"); refitted in round 7 with Marlin's padded token
    # blocks on (twin.cost.marlin_blocks). Held out by family, a fold pools them from the other expert paths'
    # values (twin.fitting.expert_path_prior)
    "int4": MARLIN_W4A16_MOE_TERMS,
    # NOT embedded (round 12, docs/fidelity.md "Round 12: gpt-oss's loaded B200 rows"): "mxfp4" with
    # moe_active_expert_share 0.75 (twin.cost.moe_terms; read off the B200 gpt-oss rows, twin.fitting.routing_prior):
    # in-sample gpt-oss B200 TPOT at CONC >= 32 17.7 % -> 9.3 %, but the H100-held-out fold's refit of the shared
    # terms then leaves its H100 rows slower (E2E 5.4 % -> 7.0 %, TPOT 6.2 % -> 6.9 %); round 13: mostly through the
    # Blackwell bandwidth fraction that fold carries to Hopper, which the data show to be per generation
}
# the engine core's CPU time per sequence per step that a server without async scheduling exposes
# (twin.cost.sync_host; prior 0): fitted on the Qwen3-32B H100 TP8 rows (vLLM 0.12.0, the data's only sync decode
# rows), held out on its TP2 / TP4 rows (docs/fidelity.md "Round 6: decode per sequence (issue 33)")
SYNC_HOST_TERMS: dict[str, float] = {"sync_seq_host_s": 45e-6}
# (GPU generation, KV cache format) -> {roofline keyword: value}: paged decode attention's KV read rate where it is
# not the weights' (twin.cost.kv_attention; prior: memory_efficiency). FP8 KV on Hopper runs FlashAttention 3's FP8
# kernel (vLLM: FP8 KV only on FA3 + SM90); picked on the Llama-3.1-70B FP8 H100 rows with each TP, ISL/OSL pair
# and load band held out (docs/fidelity.md "Round 7: Llama decode and gpt-oss held out (issue 33)")
KV_FORMAT_TERMS: dict[tuple[str, str], dict[str, float]] = {("hopper", "fp8"): {"kv_memory_efficiency": 0.3}}
# the link part of one all-reduce (twin.cost.unsharded_decode) where no generation entry says: 1 s, longer than any
# all-reduce latency the twin charges (fitted range 0-100 us, the PCIe prior 77 us), so that max(L - link, 0) = 0:
# the whole latency is link and a TP 1 step pays nothing extra (Hopper's behaviour). Its stated prior too: a fold
# holding out the rows Blackwell's 6 us was read off resets it to this (twin.fitting.link_prior: no physical fact
# gives a better one)
NO_FLOOR_LINK_S = 1.0
# the roofline's flat defaults of the terms resolved here (where no table above has a value)
FLAT_DEFAULTS = {"per_token_overhead_s": 0.0, "layer_overhead_s": 0.0, "fused_allreduce_latency_s": None,
                 "layer_token_overhead_s": 0.0, "layer_token_decode_share": 1.0,    # twin.cost.decode_tokens: prior 1
                 "moe_expert_compute_efficiency": DEFAULT_MOE_EXPERT_COMPUTE_EFFICIENCY, "moe_layer_overhead_s": 0.0,
                 "moe_expert_efficiency": DEFAULT_MOE_EXPERT_EFFICIENCY, "moe_prompt_stream_efficiency": 1.0,
                 "moe_active_expert_share": DEFAULT_MOE_ACTIVE_EXPERT_SHARE,      # twin.cost.moe_terms: prior 1
                 "expert_path_request_s": 0.0,    # twin.cost.expert_path_request: prior 0
                 "eager_layer_host_s": 0.0, "eager_moe_layer_host_s": 0.0,      # twin.cost.eager_steps: priors 0
                 "unsharded_allreduce_link_s": NO_FLOOR_LINK_S}                 # twin.cost.unsharded_decode


def generation_term(gpu: GpuSpec | str, name: str, fallback: float) -> float:
    """The embedded default of ``name`` on ``gpu``'s generation, else ``fallback``."""
    return GENERATION_TERMS.get(gpu_generation(gpu), {}).get(name, fallback)


def quant_efficiency_default(formats) -> float:
    """The embedded ``quant_weight_efficiency`` for a checkpoint's ``WeightFormats`` (1 = a 16-bit GEMM's rate)."""
    used = formats.linear_families
    for fmt, value in FORMAT_QUANT_EFFICIENCY.items():
        if fmt in used:
            return value
    return 1.0


def expert_format_term(model, formats, name: str, fallback: float) -> float:
    """The embedded default of ``name`` for a MoE model's routed-expert format, else ``fallback``."""
    if not getattr(model, "is_moe", False):
        return fallback
    return EXPERT_FORMAT_TERMS.get(format_family(formats.routed_experts), {}).get(name, fallback)


def embedded(gpu: GpuSpec, model, formats, **given: float | None) -> dict[str, float | None]:
    """``given`` with each None replaced by its embedded default on this deployment: the expert format's, the
    attention architecture's (MLA), the generation's, the format's (``quant_weight_efficiency``), else the flat
    default."""
    out: dict[str, float | None] = {}
    for name, value in given.items():
        if value is not None:
            out[name] = value
        elif name == "quant_weight_efficiency":
            out[name] = quant_efficiency_default(formats)
        elif name == EAGER_MOE_FLOOR and (counted := path_floor_s(
                gpu, model, formats, generation_term(gpu, "eager_layer_host_s", 0.0))) is not None:
            out[name] = counted       # a counted floor of its expert path / GQA layer (twin.cost.eager_path_floors)
        elif (on_path := generation_expert_term(gpu, model, formats, name)) is not None:
            out[name] = on_path       # the (generation, expert format) kernel path's (twin.cost.generation_experts)
        elif name.startswith("moe_"):
            out[name] = expert_format_term(model, formats, name, FLAT_DEFAULTS[name])
        elif (on_mla := mla_term(model, name)) is not None:
            out[name] = on_mla        # an MLA model's (twin.cost.mla_decode.MLA_TERMS)
        else:
            out[name] = generation_term(gpu, name, FLAT_DEFAULTS[name])
    return out
