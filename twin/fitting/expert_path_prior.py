"""The held-out prior of an expert kernel path's efficiency (``expert_path_prior``): for a Marlin path's FLOP
efficiency the OTHER Marlin paths' values, carried at equal FLOPs per SM clock (issue 33, round 8; docs/fidelity.md
"Round 8: Qwen3 and gpt-oss held out"), else every other path's values pooled (round 7).

Two expert kernel paths in the data run vLLM's ``fused_marlin_moe`` (W4A16: 4-bit weights dequantised to bf16 in
registers, multiplied with the warp-level ``mma.sync`` m16n8k16 the kernel was written for on Ampere):
Kimi-K2.5's INT4 experts on B200 (``twin.cost.marlin_moe``, ``EXPERT_FORMAT_TERMS["int4"]``) and gpt-oss-120b's
MXFP4 experts on H100 with ``VLLM_MXFP4_USE_MARLIN=1`` (``twin.cost.marlin_mxfp4``). Their
``moe_expert_compute_efficiency`` is a fraction of the DENSE bf16 GEMMs' rate on the row's GPU, and the dense
GEMMs use the generation's widest MMA: ``wgmma`` on Hopper, 4,096 dense bf16 FLOPs per SM per clock (H100 SXM:
132 SMs x 1.83 GHz x 4,096 = 989 TFLOP/s, the datasheet's dense figure), ``tcgen05.mma`` on Blackwell, 8,192
(twice Hopper's per SM; B200: 148 SMs x ~1.86 GHz x 8,192 = 2,250 TFLOP/s). Marlin issues neither: its
``mma.sync`` rate per SM per clock is taken as the same on both generations (the wide MMAs are what doubled the
per-SM peak; an assumption, no instruction microbenchmark was read). So one Marlin kernel's efficiency on
generation g is its efficiency on generation h times ``MMA_FLOPS_PER_SM_CLOCK[h] / MMA_FLOPS_PER_SM_CLOCK[g]``:
the fraction halves from Hopper to Blackwell while the absolute rate only follows the SM count and clock.

A fold holding one Marlin path out (its family's rows) resets its efficiency to the geometric mean of the other
Marlin paths' embedded values so converted (``marlin_path_prior``); with no other Marlin path kept it takes the
``mma.sync`` ceiling of its generation (Hopper: 2/3 of the dense rate, Blackwell 1/3, round 17,
``twin.fitting.mma_sync_prior``), else ``pooled_path_prior`` (every expert path; round 7). The other,
non-Marlin paths (block FP8 on Hopper) run ``wgmma`` kernels and stay out of this prior. Only the compute
efficiency (prefill FLOPs) is carried: the decode weight-stream rate and the fixed time per MoE layer follow the
kernel count, graph mode and bytes per weight of a server, not the MMA instruction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from twin.fitting.mma_sync_prior import MMA_FLOPS_PER_SM_CLOCK, mma_sync_ceiling
from twin.fitting.scoped import EXPERT_PREFIX, split

# the Marlin W4A16 paths' efficiency fit keys -> the GPU generation of the rows their value was read off (and that
# a fold holding them out predicts): Kimi-K2.5 INT4 (B200), gpt-oss-120b MXFP4 with VLLM_MXFP4_USE_MARLIN (H100)
MARLIN_PATHS: dict[str, str] = {"moe_expert_compute_efficiency@experts_int4": "blackwell",
                                "moe_expert_compute_efficiency@hopper+experts_mxfp4": "hopper"}


def geometric_mean(values: Sequence[float]) -> float:
    """The geometric mean of positive ``values`` (the pooling of the held-out priors: rates and times multiply)."""
    return math.prod(values) ** (1.0 / len(values))


def carried_efficiency(value: float, measured_on: str, predicted_on: str) -> float:
    """A Marlin path's efficiency read on generation ``measured_on``, as a fraction of ``predicted_on``'s dense
    rate: equal FLOPs per SM clock (``MMA_FLOPS_PER_SM_CLOCK``)."""
    return value * MMA_FLOPS_PER_SM_CLOCK[measured_on] / MMA_FLOPS_PER_SM_CLOCK[predicted_on]


def marlin_path_prior(parameter: str, entries: Sequence, held: Iterable[str] = ()) -> float | None:
    """The stated prior of Marlin path ``parameter`` whose evidence a fold holds out: the geometric mean of the
    other Marlin paths' embedded values (``entries``: ``provenance_entries.Entry``; not in ``held``) carried to its
    generation; None where ``parameter`` is not a Marlin path or no other one has a value."""
    if parameter not in MARLIN_PATHS:
        return None
    held = set(held)
    target = MARLIN_PATHS[parameter]
    values = [carried_efficiency(e.value, MARLIN_PATHS[e.parameter], target) for e in entries
              if e.parameter in MARLIN_PATHS and e.parameter != parameter and e.parameter not in held]
    return geometric_mean(values) if values else None


def pooled_path_prior(base: str, entries: Sequence, held: Iterable[str] = ()) -> float:
    """The stated prior of an expert kernel path's ``base`` efficiency whose evidence a fold holds out (issue 33,
    round 7): the geometric mean of the values the OTHER expert kernel paths embed for it (``entries`` whose scope
    names an expert format and whose parameter is not in ``held``), else the flat prior
    (``default_terms.FLAT_DEFAULTS``: no other path has a value).

    Why (docs/fidelity.md "Round 7: Kimi-K2.5 and unseen expert kernel paths"): every expert kernel path the data
    measured runs its grouped GEMMs below the dense GEMMs' rate (0.18-0.35 where a value is embedded), so the flat
    prior 1 (the dense rate) predicts an unseen path too fast by construction; the other paths' values are the
    hierarchical prior across paths, as ``INHERIT`` is across GPU generations. Only fitted values are pooled (a
    path without an entry has no measured value, only the flat prior)."""
    from twin.cost.default_terms import FLAT_DEFAULTS
    held = set(held)
    values = [e.value for e in entries if split(e.parameter)[0] == base and e.parameter not in held
              and EXPERT_PREFIX in (e.scope or "") and isinstance(e.value, float)]
    return geometric_mean(values) if values else FLAT_DEFAULTS[base]


def expert_path_prior(parameter: str, entries: Sequence, held: Iterable[str] = ()) -> float:
    """The stated prior of expert kernel path efficiency ``parameter`` whose evidence a fold holds out: the other
    Marlin paths' values carried to its generation (``marlin_path_prior``), else for a Marlin path the ceiling of
    its ``mma.sync`` on its generation (round 17, ``twin.fitting.mma_sync_prior``), else every other
    path's, pooled."""
    held = set(held)
    marlin = marlin_path_prior(parameter, entries, held)
    if marlin is None:
        marlin = mma_sync_ceiling(MARLIN_PATHS.get(parameter))
    return pooled_path_prior(split(parameter)[0], entries, held) if marlin is None else marlin
