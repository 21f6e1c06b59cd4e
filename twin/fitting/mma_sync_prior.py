"""The held-out prior of a Hopper Marlin expert path's FLOP efficiency where a fold keeps no other Marlin path's value:
the ceiling of the instruction the kernel issues (issue 33, round 17; docs/fidelity.md "Round 17: the silicon-held-out
source fold's TTFT, term by term").

Which fold needs it: a fold that holds out gpt-oss-120b's H100 MXFP4 rows (``VLLM_MXFP4_USE_MARLIN=1``: vLLM's
``fused_marlin_moe``, W4A16) takes the other Marlin path's value carried between generations
(``expert_path_prior.marlin_path_prior``: Kimi-K2.5 INT4 on B200). Where that path is held out too (the source fold
that holds every silicon row out) the pooled fallback finds no kept expert path at all and returned the flat prior 1:
the dense GEMMs' rate, which the kernel cannot reach on Hopper.

The stated quantity: Marlin multiplies with the warp-level ``mma.sync`` (the Ampere instruction it was written for),
not Hopper's ``wgmma`` that the dense GEMMs and the twin's ``compute_efficiency`` stand for, and "without the wgmma
instruction, the older mma.sync instruction can only reach about 2/3 the peak throughput of Hopper Tensor Cores"
(the FlashAttention-3 authors' PyTorch blog post, July 2024, footnote 1, citing Luo et al., "Benchmarking and
Dissecting the Nvidia Hopper GPU Architecture", arXiv 2402.13499). The same post measures one kernel family across
the switch: FlashAttention-2 (``mma.sync``) 350 TFLOP/s against 540-570 for its first ``wgmma`` + TMA rewrite on
H100 (0.61-0.65). So the prior is 2/3 of the dense rate: an upper bound on what the path reaches (the Marlin path's
own rows read 0.35: its grouped tiles and in-register dequantisation cost more), read off no serving row.

Blackwell has no published figure of its own; the prior there follows from round 8's stated assumption that
``expert_path_prior`` already carries Marlin paths between generations by: ``mma.sync`` runs at the same FLOPs per
SM per clock on both generations while the widest dense MMA doubles (``MMA_FLOPS_PER_SM_CLOCK``), so the same
instruction reaches 2/3 x 4,096 / 8,192 = 1/3 of Blackwell's dense rate (the silicon source fold's Kimi-K2.5 INT4
path, which fell back to the flat 1 there).
"""

from __future__ import annotations

# dense bf16 tensor-core FLOPs per SM per clock of the generation's widest MMA (``wgmma`` on Hopper, ``tcgen05.mma``
# on Blackwell; the datasheets' dense peaks over SM count and clock; ``expert_path_prior`` explains the use)
MMA_FLOPS_PER_SM_CLOCK: dict[str, int] = {"hopper": 4096, "blackwell": 8192}
# the published share of Hopper's dense peak that mma.sync reaches (see above)
HOPPER_MMA_SYNC_SHARE = 2.0 / 3.0


def mma_sync_ceiling(generation: str | None) -> float | None:
    """The instruction-ceiling prior of a Marlin path's efficiency on GPU ``generation`` (the one its rows ran on,
    ``expert_path_prior.MARLIN_PATHS``): Hopper's published share carried at equal ``mma.sync`` FLOPs per SM clock;
    None for no generation or one without a stated MMA width."""
    if generation not in MMA_FLOPS_PER_SM_CLOCK:
        return None
    return HOPPER_MMA_SYNC_SHARE * MMA_FLOPS_PER_SM_CLOCK["hopper"] / MMA_FLOPS_PER_SM_CLOCK[generation]
