"""vLLM's serving semantics by release: which behaviour each modelled release has, as scheduler knob defaults.

A scenario's ``server.vllm_version`` picks a row; any knob the scenario sets explicitly overrides it. The core
never asks for a version: it reads knobs, and this module is the one place that maps releases onto them.

| behaviour (knob)                                              | before   | from     | source |
|---------------------------------------------------------------|----------|----------|--------|
| async scheduling on by default (``async_scheduling``)         | off      | 0.14     | v0.14.0 release notes ("Async scheduling is now enabled by default", PR #27614); not for pipeline parallelism, the CPU backend or speculative methods other than EAGLE/MTP |
| admission only when the whole prompt fits the free blocks, not just its first chunk (``scheduler_reserve_full_isl``) | first chunk | 0.19 | PR #37307 (merged 2026-03-24, after the v0.18.0 cut); SchedulerConfig default True |
| freed blocks without a hash go to the free queue's head as a group, in release order; with caching off every freed block does (``free_unhashed_blocks_to_head``) | all to the tail | 0.19 | ``BlockPool.free_blocks`` ``prepend_n``/``append_n`` split (proposed in #33710, Feb 2026); release not pinned exactly, see below |
| prefix-cache counters recorded once, at admission, not on each retried lookup (``prefix_cache_stats_at_admission``) | every lookup | 0.28 | PR #48860 (merged 2026-07-16, fixes #43736) |
| ``vllm serve`` default ``max_num_batched_tokens`` on >= 70 GiB GPUs other than A100 | 8192 | 16384 | 0.28 | PR #51726 (merged 2026-08-10) |

Defaults of ``vllm serve`` vs the offline ``LLM`` class (``entrypoint``), on GPUs with >= 70 GiB that are not
A100 ("large") and on the others: ``max_num_batched_tokens`` 8192 (16384 from 0.28) / 2048 for ``serve``,
16384 / 8192 for ``LLM``; ``max_num_seqs`` 1024 / 256 for both (``EngineArgs._set_default_args``, PRs #12369 and
#17885; unchanged over the releases modelled). When only ``max_num_batched_tokens`` is given, the default
``max_num_seqs`` is clamped to it (``min(default, max_num_batched_tokens)``), in every release modelled.

Where a release is not pinned exactly (the free-queue split, and the 0.28 rows, whose first release lies
between 0.24 and 0.28), the row names the earliest modelled release known to have it; between PRs #48017 and
#51482 (mid 2026) main briefly appended freed blocks with caching off; that window is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Entrypoint = Literal["serve", "llm"]


@dataclass(frozen=True)
class VllmRelease:
    """The knob defaults of one modelled vLLM release."""

    async_scheduling: bool
    scheduler_reserve_full_isl: bool
    free_unhashed_blocks_to_head: bool
    prefix_cache_stats_at_admission: bool
    serve_large_gpu_max_num_batched_tokens: int


VLLM_RELEASES: dict[str, VllmRelease] = {
    "0.11": VllmRelease(False, False, False, False, 8192),
    "0.14": VllmRelease(True, False, False, False, 8192),
    "0.19": VllmRelease(True, True, True, False, 8192),
    "0.28": VllmRelease(True, True, True, True, 16384),
}
NEWEST_VLLM_VERSION = "0.28"

# the scheduler knobs a release sets (ServerConfig leaves them None to mean "the release's default")
VERSIONED_KNOBS = ("async_scheduling", "scheduler_reserve_full_isl", "free_unhashed_blocks_to_head",
                   "prefix_cache_stats_at_admission")


def vllm_release(version: str) -> VllmRelease:
    """The modelled release ``version`` ("0.19" or "0.19.1": the patch level is ignored); ValueError naming
    the modelled releases otherwise."""
    parts = str(version).strip().lstrip("v").split(".")
    key = ".".join(parts[:2])
    release = VLLM_RELEASES.get(key) if len(parts) >= 2 and all(p.isdigit() for p in parts) else None
    if release is None:
        raise ValueError(f"{version!r} is not a modelled vLLM release (modelled: {', '.join(VLLM_RELEASES)}; "
                         f"a patch level such as 0.19.1 maps to its minor release)")
    return release


def default_limits(version: str, large_gpu: bool, entrypoint: Entrypoint = "serve") -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM ``version`` picks when neither is given."""
    if not large_gpu:
        return (2048 if entrypoint == "serve" else 8192), 256
    if entrypoint == "serve":
        return vllm_release(version).serve_large_gpu_max_num_batched_tokens, 1024
    return 16384, 1024
