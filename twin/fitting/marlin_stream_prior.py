"""The held-out prior of the Marlin W4A16 MoE path's decode weight-stream rate: the other generation's Marlin stream
rate carried at equal bytes per SM per second (issue 33, round 15; docs/fidelity.md "Round 15: Kimi-K2.5's Marlin
stream and MLA layer priors").

Two expert paths in the data run vLLM's Marlin MoE kernel (``twin.fitting.expert_path_prior.MARLIN_PATHS``):
Kimi-K2.5's INT4 experts on B200 and gpt-oss-120b's MXFP4 experts on H100. Their decode streams each touched
expert's 4-bit weights through the same kernel code (``csrc/moe/marlin_moe_wna16``): every thread block copies its
B tiles from global to shared memory with ``cp.async`` through a fixed pipeline (``pipe_stages`` = 4 stages of one
thread_k x thread_n tile each, 128 x 128 4-bit weights and their scales at one token block), and vLLM launches
``sms x blocks_per_sm`` blocks, the blocks per SM capped by the SM's register file and shared memory
(``determine_exec_config``): 64 K registers and 228 KB of shared memory per SM on both Hopper (SM90) and Blackwell
(SM100). So the bytes a Marlin kernel keeps in flight per SM do not grow with a generation's HBM bandwidth, and by
Little's law (rate = bytes in flight / memory latency) neither does its stream rate per SM, unlike the dense GEMMs
(TMA on Hopper and Blackwell), which the twin runs at the generation's achieved fraction of the datasheet bandwidth
(``memory_efficiency``). Per SM the dense rate doubles from H100 (3.35 TB/s over 132 SMs: 25.4 GB/s) to B200
(8 TB/s over 148 SMs: 54.1 GB/s); a kernel that holds its bytes in flight does not.

The prior: where a fold holds a Marlin path's rows out (its ``moe_expert_efficiency`` reset to the flat 1, the
dense rate), the other Marlin paths whose rows it keeps give their stream rate per SM (their efficiency x their
generation's dense rate per SM, at the fold's fitted ``memory_efficiency`` of that generation), carried as is to
the held-out path's generation:

    efficiency = min(1, e_other x (me_other x BW_other / SMs_other) / (me_target x BW_target / SMs_target))

(geometric mean over the other paths; BW and SMs of the GPU each path's rows ran on, ``REFERENCE_GPU``). In this
data that is gpt-oss-120b's H100 Marlin path, which streams at the dense rate (no stream term: its decode rows are
fitted without one, efficiency 1), carried to Kimi-K2.5 INT4 on B200: ~0.47-0.50 of B200's dense rate at the
folds' memory efficiencies (Kimi's own rows read 0.618 beside a 38 us fixed time per MoE layer; not used). Where
the fold holds the Hopper Marlin rows out too (its compute-efficiency key reset: the silicon source fold, the
gpt-oss and H100 folds), no kept path speaks and the flat prior stays. Assumptions, stated: the loaded memory
latency is the same on HBM3 (H100) and HBM3e (B200) (only the latency ratio would move the carry), and both paths'
shapes get the same blocks per SM (``determine_exec_config`` also lowers the count for a small ``prob_n / thread_n x
prob_m x top_k``; the compiled kernels' register counts were not read). The path's fixed
time per MoE layer (``moe_layer_overhead_s@experts_int4``) has no such carry (the Hopper path reads none) and stays
at its prior 0.
"""

from __future__ import annotations

from twin.fitting.expert_path_prior import geometric_mean
from twin.fitting.provenance import RESET, embedded_start

STREAM = "moe_expert_efficiency"
# Marlin W4A16 paths: stream-rate key -> (GPU generation of its rows, the key whose reset marks its rows held out)
MARLIN_STREAM_PATHS: dict[str, tuple[str, str]] = {
    "moe_expert_efficiency@experts_int4": ("blackwell", "moe_expert_compute_efficiency@experts_int4"),
    "moe_expert_efficiency@hopper+experts_mxfp4": ("hopper", "moe_expert_compute_efficiency@hopper+experts_mxfp4"),
}
# the GPU each generation's Marlin rows ran on: (datasheet HBM bandwidth, bytes/s; streaming multiprocessors)
# H100 SXM5: 3.35 TB/s, 132 SMs (NVIDIA H100 datasheet / Hopper whitepaper); B200: 8 TB/s, 148 SMs (DGX B200
# datasheet per GPU / Blackwell architecture technical brief)
REFERENCE_GPU: dict[str, tuple[float, int]] = {"hopper": (3.35e12, 132), "blackwell": (8.0e12, 148)}


def dense_rate_per_sm(generation: str, params: dict[str, float]) -> float:
    """Bytes per second per SM of the dense weight streams on ``generation``'s reference GPU at the fold's
    ``memory_efficiency`` of that generation (its scoped value, else the unscoped one)."""
    bandwidth, sms = REFERENCE_GPU[generation]
    efficiency = params.get(f"memory_efficiency@{generation}", params["memory_efficiency"])
    return efficiency * bandwidth / sms


def carried_stream_efficiency(value: float, measured_on: str, predicted_on: str, params: dict[str, float]) -> float:
    """A Marlin path's stream efficiency read on ``measured_on``, as a fraction of ``predicted_on``'s dense rate:
    equal bytes per SM per second, at most 1 (the dense rate)."""
    return min(1.0, value * dense_rate_per_sm(measured_on, params) / dense_rate_per_sm(predicted_on, params))


def marlin_stream_prior(plan, params: dict[str, float]) -> dict[str, float]:
    """{stream-rate key: prior} for each Marlin path whose ``moe_expert_efficiency`` the fold's ``plan`` resets,
    carried from the Marlin paths whose rows the fold keeps (at their embedded stream efficiencies: the flat 1, the
    dense rate, where none is embedded); {} where no other path is kept. ``params``: the fold's fitted parameters
    (``memory_efficiency`` and its generation-scoped values)."""
    embedded = embedded_start(("memory_efficiency", *MARLIN_STREAM_PATHS))
    params = embedded | params      # not fitted (--no-refit): the embedded value
    out: dict[str, float] = {}
    for key, (generation, _) in MARLIN_STREAM_PATHS.items():
        if plan.actions.get(key, (None, None))[1] != RESET:
            continue
        kept = [carried_stream_efficiency(embedded.get(other, 1.0), gen, generation, params)
                for other, (gen, marker) in MARLIN_STREAM_PATHS.items()
                if other != key and marker not in plan.actions and other not in plan.actions]
        if kept:
            out[key] = geometric_mean(kept)
    return out
