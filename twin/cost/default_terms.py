"""Embedded defaults of the roofline's fitted terms that depend on the deployment beyond the two efficiencies of
``twin.cost.generations``: by GPU generation (the per-token and per-layer costs, the all-reduce latency) and by
weight format (the quantized GEMMs' rate). A generation or format without its own value takes the roofline's
flat default (``twin.cost.roofline``). Values, standard errors and identification: ``GENERATION_TERMS`` below
and docs/fidelity.md ("Round 4: the fit on whole runs")."""

from __future__ import annotations

from twin.cost.generations import gpu_generation
from twin.hardware.catalog import GpuSpec

# generation -> {roofline keyword: value in model units (s, fractions)}
GENERATION_TERMS: dict[str, dict[str, float]] = {}
# weight format of any linear layer group (the fit's ``@int4``, ``@fp8`` scopes) -> quant_weight_efficiency;
# the first format in this order that a checkpoint uses sets it
FORMAT_QUANT_EFFICIENCY: dict[str, float] = {}
LINEAR_GROUPS = ("attention", "dense_mlp", "routed_experts", "shared_experts")


def generation_term(gpu: GpuSpec | str, name: str, fallback: float) -> float:
    """The embedded default of ``name`` on ``gpu``'s generation, else ``fallback``."""
    return GENERATION_TERMS.get(gpu_generation(gpu), {}).get(name, fallback)


def quant_efficiency_default(formats) -> float:
    """The embedded ``quant_weight_efficiency`` for a checkpoint's ``WeightFormats`` (1 = a 16-bit GEMM's rate)."""
    used = {str(getattr(formats, g)).split("-")[0] for g in LINEAR_GROUPS}
    for fmt, value in FORMAT_QUANT_EFFICIENCY.items():
        if fmt in used:
            return value
    return 1.0
