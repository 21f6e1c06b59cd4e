"""vLLM's serving semantics by release: which behaviour each modelled release has, as scheduler knob defaults.

A scenario's ``server.vllm_version`` picks a row; any knob the scenario sets explicitly overrides it. The core
never asks for a version: it reads knobs, and this module is the one place that maps releases onto them.
docs/vllm_versions.md has the table with the PR and release of each change; in short:

* ``async_scheduling``: on from 0.14 (v0.14.0 release notes, #27614);
* ``scheduler_reserve_full_isl`` (admit only when the whole prompt fits the free blocks): from 0.19 (#37307);
* ``free_unhashed_blocks_to_head`` (vLLM's ``prepend_n`` of unhashed freed blocks): from 0.19 (release not
  pinned exactly);
* ``prefix_cache_stats_at_admission`` (counters once per admitted request): from 0.28 (#48860);
* ``pad_spec_decode_first_step`` (a fully cached prompt joins an all-decode batch padded to 1 + k): from 0.28
  (#45237);
* ``vllm serve``'s default ``max_num_batched_tokens`` on >= 70 GiB GPUs other than A100: 8192, 16384 from 0.28
  (#51726). The ``LLM`` class: 16384 there; 2048 (serve) / 8192 (LLM) on other GPUs; ``max_num_seqs`` 1024 /
  256 for both.
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
    pad_spec_decode_first_step: bool
    serve_large_gpu_max_num_batched_tokens: int


VLLM_RELEASES: dict[str, VllmRelease] = {
    "0.11": VllmRelease(False, False, False, False, False, 8192),
    "0.14": VllmRelease(True, False, False, False, False, 8192),
    "0.19": VllmRelease(True, True, True, False, False, 8192),
    "0.28": VllmRelease(True, True, True, True, True, 16384),
}
NEWEST_VLLM_VERSION = "0.28"

# the scheduler knobs a release sets (ServerConfig leaves them None to mean "the release's default")
VERSIONED_KNOBS = ("async_scheduling", "scheduler_reserve_full_isl", "free_unhashed_blocks_to_head",
                   "prefix_cache_stats_at_admission", "pad_spec_decode_first_step")


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
