"""The held-out prior of the Marlin W4A16 MoE path's decode stream rate where a fold keeps NO Marlin path (issue 33,
round 18; docs/fidelity.md "Round 18: the silicon-held-out source fold's decode, term by term").

Round 15 (``twin.fitting.marlin_stream_prior``) carries a held-out Marlin path's stream rate from another Marlin
path the fold keeps, at equal bytes per SM per second: the kernel (``csrc/moe/marlin_moe_wna16``) keeps a fixed
number of bytes in flight per SM (``pipe_stages`` = 4 tiles per block, blocks per SM capped by the same 64 K
registers and 228 KB of shared memory per SM on SM90 and SM100), so by Little's law its rate per SM does not follow
a generation's HBM bandwidth per SM (H100 25.4 GB/s, B200 54.1 GB/s), while the dense TMA streams do. Where the fold
holds every Marlin path out (the silicon-held-out source fold: Kimi-K2.5 INT4 on B200 and gpt-oss-120b MXFP4 on H100
are both silicon rows), no kept path speaks and the path fell back to the flat 1: Blackwell's DENSE rate per SM,
twice what the kernel's in-flight bytes were sized for.

The prior here: the Marlin path streams at the dense rate per SM of the other generation the fold keeps (the
reference GPUs of ``marlin_stream_prior.REFERENCE_GPU``, at the fold's fitted ``memory_efficiency``), i.e. round
15's carry with the kept path's efficiency at 1. Assumed, not read off any row: Marlin (written for Ampere, where it
streams near peak at small batch) reaches a Hopper SM's dense share per SM and, its in-flight bytes fixed, no more
on a Blackwell SM; the same equal-latency and equal-blocks-per-SM assumptions as round 15. On Hopper the carried
rate is at least the dense one (min 1): only a Blackwell Marlin path moves. It is an estimate, not a bound: a kernel
whose in-flight bytes exceed what a Hopper SM's HBM share admits would stream faster on B200.
"""

from __future__ import annotations

from twin.fitting.marlin_stream_prior import MARLIN_STREAM_PATHS, REFERENCE_GPU, carried_stream_efficiency
from twin.fitting.provenance import RESET, embedded_start


def marlin_unkept_prior(plan, params: dict[str, float], carried: dict[str, float]) -> dict[str, float]:
    """{stream-rate key: prior} for each Marlin path whose ``moe_expert_efficiency`` the fold's ``plan`` resets and
    no kept Marlin path gave a value to (not in ``carried``, ``marlin_stream_prior``'s answer): the dense rate per SM
    of the other reference generation at the fold's ``memory_efficiency`` (its scoped value, else the unscoped one),
    as a fraction of the path's own generation's dense rate, at most 1; {} where every such path was carried."""
    params = embedded_start(("memory_efficiency",)) | params
    out: dict[str, float] = {}
    for key, (generation, _) in MARLIN_STREAM_PATHS.items():
        if key in carried or plan.actions.get(key, (None, None))[1] != RESET:
            continue
        others = [g for g in REFERENCE_GPU if g != generation]
        out[key] = min(carried_stream_efficiency(1.0, g, generation, params) for g in others)
    return out
