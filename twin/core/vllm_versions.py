"""vLLM's serving semantics by release: which behaviour each vLLM release has, as scheduler knob defaults.

A scenario's ``server.vllm_version`` is any release string: ``"0.10.2"``, ``"0.16.0"``, ``"v0.19.0-cu130"`` (a
container tag), ``"0.11.1rc2"``, ``"nightly"`` or ``"nightly-<hash>"`` (the newest behaviours modelled). Each
behaviour is keyed by the release it appeared in (``BEHAVIOURS``); a release has every behaviour whose release
is not later than it. Any knob the scenario sets explicitly overrides it. The core never asks for a version:
it reads knobs, and this module is the one place that maps releases onto them. docs/vllm_versions.md has the
table with the PR and release of each change; in short:

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
* the default KV block size (``default_block_size``): 16, but MLA models take their attention backend's:
  FlashMLA (Hopper) 64, CUTLASS MLA (Blackwell) 128 until 0.11, FlashInfer/TRTLLM-gen MLA (Blackwell) 64 from
  0.12; sparse MLA (DeepSeek-V3.2) 64.

Releases before 0.8 ran the V0 engine by default and are not modelled.
"""

from __future__ import annotations

import functools
import re
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


# behaviour -> the first release that has it
BEHAVIOURS: dict[str, tuple[int, int]] = {
    "async_scheduling": (0, 14),
    "scheduler_reserve_full_isl": (0, 19),
    "free_unhashed_blocks_to_head": (0, 19),
    "prefix_cache_stats_at_admission": (0, 28),
    "pad_spec_decode_first_step": (0, 28),
    "serve_16k_batched_tokens": (0, 28),
    "blackwell_mla_block_64": (0, 12),
}
OLDEST_MODELLED = (0, 8)            # V1 engine by default
NIGHTLY = (10**6, 0)                # newer than every release: every behaviour modelled
NEWEST_VLLM_VERSION = "0.28"

# the scheduler knobs a release sets (ServerConfig leaves them None to mean "the release's default")
VERSIONED_KNOBS = ("async_scheduling", "scheduler_reserve_full_isl", "free_unhashed_blocks_to_head",
                   "prefix_cache_stats_at_admission", "pad_spec_decode_first_step")
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:(?:rc|a|b|\.post|\.dev)\d+)?(?:[-+][0-9a-z._-]+)?$")
_NIGHTLY = re.compile(r"^nightly(?:[-@][0-9a-z._-]+)?$")


def parse_vllm_version(version: object) -> tuple[int, int]:
    """(major, minor) of a release string, NIGHTLY for a nightly build; ValueError naming what is allowed."""
    text = str(version).strip().lower()
    if _NIGHTLY.match(text):
        return NIGHTLY
    m = _RELEASE.match(text)
    if m and (int(m.group(1)), int(m.group(2))) >= OLDEST_MODELLED:
        return int(m.group(1)), int(m.group(2))
    shown = repr(version)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."      # a 10 MB string stays one readable line
    raise ValueError(f"{shown} is not a modelled vLLM release (modelled: releases from 0.8, the V1 engine, "
                     f"e.g. 0.10.2, 0.16.0, v0.19.0-cu130, or nightly / nightly-<hash>; representative rows: "
                     f"0.11, 0.14, 0.19, 0.28)")


def has_behaviour(version: object, behaviour: str) -> bool:
    """Whether vLLM ``version`` has ``behaviour`` (a key of ``BEHAVIOURS``)."""
    return parse_vllm_version(version) >= BEHAVIOURS[behaviour]


def _release_of(key: tuple[int, int]) -> VllmRelease:
    on = {b: key >= since for b, since in BEHAVIOURS.items()}
    return VllmRelease(on["async_scheduling"], on["scheduler_reserve_full_isl"], on["free_unhashed_blocks_to_head"],
                       on["prefix_cache_stats_at_admission"], on["pad_spec_decode_first_step"],
                       16384 if on["serve_16k_batched_tokens"] else 8192)


# one representative release per distinct row of knob defaults (what changed between them is in BEHAVIOURS)
VLLM_RELEASES: dict[str, VllmRelease] = {v: _release_of(tuple(map(int, v.split("."))))
                                         for v in ("0.11", "0.14", "0.19", "0.28")}


@functools.lru_cache(maxsize=256)
def vllm_release(version: str) -> VllmRelease:
    """The knob defaults of vLLM ``version`` (any release string, see the module docstring); the patch level
    does not matter. ValueError naming what is allowed otherwise."""
    release = _release_of(parse_vllm_version(version))
    for representative in VLLM_RELEASES.values():
        if representative == release:
            return representative
    return release


def default_block_size(version: str, model_is_mla: bool, sparse_attention: bool, blackwell: bool) -> int:
    """The KV block size vLLM ``version`` uses when ``--block-size`` is not given: 16, or the size the MLA
    attention backend forces (FlashMLA 64 on Hopper; CUTLASS MLA 128 on Blackwell until 0.11, 64 from 0.12;
    sparse MLA 64)."""
    if not model_is_mla:
        return 16
    if sparse_attention or not blackwell:
        return 64
    return 64 if has_behaviour(version, "blackwell_mla_block_64") else 128


def default_limits(version: str, large_gpu: bool, entrypoint: Entrypoint = "serve") -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM ``version`` picks when neither is given."""
    if not large_gpu:
        return (2048 if entrypoint == "serve" else 8192), 256
    if entrypoint == "serve":
        return vllm_release(version).serve_large_gpu_max_num_batched_tokens, 1024
    return 16384, 1024
