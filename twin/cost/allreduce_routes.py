"""The bytes a tensor-parallel all-reduce moves per GPU by the route vLLM sends it on (issue 33, round 22; opt-in,
docs/fidelity.md "Round 22: gpt-oss-120b's H100 TP 8 prompts held out").

The roofline (``twin.cost.roofline``) prices every all-reduce as a ring: each GPU sends and receives
2 (tp - 1) / tp x the message over one direction of its link. vLLM (``vllm/distributed/device_communicators``,
with ``VLLM_ALLREDUCE_USE_SYMM_MEM`` on: 1 by default in the newer stored sources, 0 in older ones; the release that
turned it on is not pinned) sends a TP group's all-reduce down the first route that takes it: its custom all-reduce
below its 8 MiB buffer capped by ``CUSTOM_ALL_REDUCE_MAX_SIZES`` (sm_90 at TP 6 / 8: 512 / 256 KiB; sm_100: 1 MiB),
then torch symmetric memory below ``SYMM_MEM_ALL_REDUCE_MAX_SIZES`` (sm_90: 64 MiB; sm_100: 128 MiB at TP 6 / 8),
then NCCL. At the TP sizes of ``_WORLD_SIZES_MULTIMEM`` (sm_90: 4, 6, 8; sm_100: 6, 8) symmetric memory uses the
NVSwitch's multimem instructions: each rank reduces its 1/tp slice in the switch (``multimem.ld_reduce``) and stores
it to every GPU at once (``multimem.st``), so each GPU moves (1 + 1/tp) x the message each way instead of the
ring's 2 (tp - 1) / tp (1.125 vs 1.75 at TP 8).

At TP 6 / 8 that window (256 KiB-64 MiB on Hopper) holds every prompt-sized step of the data's models (gpt-oss-120b,
hidden 2880 in BF16: 46-11,650 tokens), and below it the latency term dominates, so the route is taken as the
deployment's for all its all-reduces. At TP 4 on Hopper the custom all-reduce keeps messages up to 8 MiB and
multimem takes only 8-32 MiB (gpt-oss: 1,456-5,825 tokens), so TP 4 stays a ring here. The link's efficiency is the
roofline's ``interconnect_efficiency`` (0.75, not fitted) either way: the same wires; no switch rate is stated.

``ENABLED`` False (the embedded state): every all-reduce is the ring, as before. A run sets it with
``twin.fitting.switches`` (``switched(multimem_allreduce=True)``), which carries it to the worker processes too.
"""

from __future__ import annotations

from twin.cost.generations import gpu_generation
from twin.hardware.catalog import GpuSpec

ENABLED = False       # opt-in (multimem_allreduce_trial.py switches it on for one run: twin.fitting.switches)
MULTIMEM_TP: dict[str, tuple[int, ...]] = {"hopper": (6, 8), "blackwell": (6, 8)}   # see the docstring
MIB = 1024 * 1024
CUSTOM_BUFFER_BYTES = 8 * MIB          # the custom all-reduce's buffer, capped by the table below
# vLLM's tables by generation and TP (sm_90 = hopper, sm_100 = blackwell), bytes per message
CUSTOM_MAX_BYTES = {"hopper": {2: 64 * MIB, 4: 32 * MIB, 6: MIB // 2, 8: MIB // 4},
                    "blackwell": {2: 2 * MIB, 4: 2 * MIB, 6: MIB, 8: MIB}}
SYMM_MEM_MAX_BYTES = {"hopper": {2: 64 * MIB, 4: 32 * MIB, 6: 64 * MIB, 8: 64 * MIB},
                      "blackwell": {2: 8 * MIB, 4: 32 * MIB, 6: 128 * MIB, 8: 128 * MIB}}
WORLD_SIZES_MULTIMEM = {"hopper": (4, 6, 8), "blackwell": (6, 8)}


def ring_factor(tp: int) -> float:
    """Message multiples each GPU sends (and receives) in a ring all-reduce over ``tp`` GPUs."""
    return 2.0 * (tp - 1) / tp


def multimem_factor(tp: int) -> float:
    """Message multiples each GPU moves each way in a multimem (NVSwitch) all-reduce over ``tp`` GPUs."""
    return 1.0 + 1.0 / tp


def takes_multimem(gpu: GpuSpec, tp: int) -> bool:
    """Whether ``gpu``'s TP group of ``tp`` sends its prompt-sized all-reduces through multimem (see above)."""
    switched = "nvlink" in gpu.interconnect.lower() and tp <= gpu.nvlink_domain_gpus
    return switched and tp in MULTIMEM_TP.get(gpu_generation(gpu), ())


def route_of(gpu: GpuSpec, tp: int, message_bytes: int) -> str:
    """The route vLLM sends one TP all-reduce of ``message_bytes`` on (a reading; symmetric memory on):
    ``custom`` (its custom all-reduce), ``multimem`` / ``two-shot`` (torch symmetric memory), ``nccl``; ``nccl``
    off an NVSwitch Hopper / Blackwell board or at a TP size the tables do not list."""
    gen = gpu_generation(gpu)
    if tp < 2 or message_bytes < 0:
        raise ValueError(f"route_of: tp {tp}, message {message_bytes} bytes: need tp >= 2 and bytes >= 0")
    if "nvlink" not in gpu.interconnect.lower() or tp not in CUSTOM_MAX_BYTES.get(gen, {}):
        return "nccl"
    if message_bytes < min(CUSTOM_BUFFER_BYTES, CUSTOM_MAX_BYTES[gen][tp]):
        return "custom"
    if message_bytes < SYMM_MEM_MAX_BYTES[gen][tp]:
        return "multimem" if tp in WORLD_SIZES_MULTIMEM[gen] else "two-shot"
    return "nccl"


def link_bytes_factor(gpu: GpuSpec, tp: int) -> float:
    """The message multiples the roofline charges one all-reduce per GPU: the ring's, or with ``ENABLED`` the
    multimem route's where ``takes_multimem``."""
    if ENABLED and takes_multimem(gpu, tp):
        return multimem_factor(tp)
    return ring_factor(tp)
