"""What vLLM's kernels reach of a GPU's datasheet, by GPU generation.

The roofline turns datasheet peaks into achieved rates with two fractions: ``memory_efficiency`` (HBM bandwidth
the decode GEMMs' weight streams reach) and ``compute_efficiency`` (dense tensor peak large GEMMs reach). Both
depend on how mature the kernels are on an architecture, so each generation has its own default; a generation
no measurement here covers takes the Hopper value (the best-measured one) and says so (``identified``).

Fitted values (benchmarks/fit_defaults.py on ../shared/ground-truth; figures and standard errors in
docs/fidelity.md):
* Hopper (H100/H200/H20): memory 0.978 (+/- 0.04), from the inference-perf H100 runs; compute 0.6, the prior
  (bf16 GEMMs on H100 run at ~600-700 of 989 dense TFLOP/s, measured prefill MFU ~50-60 %).
* Blackwell (B200, ...) and every other generation: Hopper's fractions. The joint fit over the B200 silicon rows
  (``twin.fitting.joint``) finds bandwidth ~1.0 (weakly identified) and compute 0.24-0.58, but its held-out
  figures are no better than these defaults' (docs/fidelity.md), so they are not adopted.
"""

from __future__ import annotations

from twin.hardware.catalog import GpuSpec

# generation -> name fragments (lower case) of the catalog GPUs that belong to it
GENERATION_OF_NAME: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("blackwell", ("b200", "b300", "gb200", "gb300", "rtx-pro-6000", "rtx-5090", "b100")),
    ("hopper", ("h100", "h200", "h20", "gh200", "h800")),
    ("ampere", ("a100", "a10", "a30", "a40", "a800")),
    ("ada", ("l40", "l4", "rtx-4090", "rtx-6000-ada")),
    ("cdna3", ("mi300", "mi325")),
)
REFERENCE_GENERATION = "hopper"

# (memory_efficiency, compute_efficiency) per generation; a missing generation takes the reference's
GENERATION_DEFAULTS: dict[str, tuple[float, float]] = {
    "hopper": (0.978, 0.6),
}


def gpu_generation(gpu: GpuSpec | str) -> str:
    """The GPU's architecture generation (``hopper``, ``blackwell``, ``ampere``, ``ada``, ``cdna3``), ``cpu``
    for the CPU device, ``other`` when unknown."""
    if not isinstance(gpu, str) and getattr(gpu, "kind", "gpu") == "cpu":
        return "cpu"
    name = (gpu if isinstance(gpu, str) else gpu.name).lower()
    for generation, marks in GENERATION_OF_NAME:
        if any(name.startswith(m) for m in marks):
            return generation
    return "other"


def default_efficiencies(gpu: GpuSpec | str) -> tuple[float, float]:
    """(memory_efficiency, compute_efficiency) the roofline uses on ``gpu`` when none is given."""
    return GENERATION_DEFAULTS.get(gpu_generation(gpu), GENERATION_DEFAULTS[REFERENCE_GENERATION])
