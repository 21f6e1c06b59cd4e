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
own rows read 0.35: its grouped tiles and in-register dequantisation cost more), read off no serving row. Blackwell
has no stated figure here (its ``mma.sync`` rate against ``tcgen05.mma`` was not found), so its Marlin path keeps
the pooled fallback.
"""

from __future__ import annotations

# generation -> the share of its widest dense MMA's peak that mma.sync reaches (see above)
MMA_SYNC_SHARE: dict[str, float] = {"hopper": 2.0 / 3.0}


def mma_sync_ceiling(generation: str | None) -> float | None:
    """The instruction-ceiling prior of a Marlin path's efficiency on GPU ``generation`` (the one its rows ran on,
    ``expert_path_prior.MARLIN_PATHS``), or None (no Marlin path, or no stated share for the generation)."""
    return None if generation is None else MMA_SYNC_SHARE.get(generation)
