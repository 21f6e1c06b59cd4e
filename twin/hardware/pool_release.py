"""What vLLM's start-up profile holds for its dummy sampler, release by release (the KV pool's sampler reserve).

vLLM V1's ``profile_run`` ends with ``_dummy_sampler_run``: min(max_num_seqs, max_num_batched_tokens) logit rows of
the vocabulary, sampled with ``top_k`` = vocab - 1 and ``top_p`` = 0.9, beside the forward's output hidden states.
Its torch peak is charged to the activation reserve (``twin.hardware.kv_sizing``), and how large it is depends on
which top-k / top-p path the release takes on CUDA (read from each release's source distribution on PyPI,
``vllm/v1/sample/ops/topk_topp_sampler.py`` and ``vllm/envs.py``):

* up to 0.11.0: FlashInfer's sampler whenever FlashInfer is installed (``VLLM_USE_FLASHINFER_SAMPLER`` unset is
  taken as on; vLLM's container images ship FlashInfer): ``flashinfer``;
* 0.11.1 - 0.16: FlashInfer's sampler opt-in (vLLM PR #26859, October 2025), so the PyTorch path, which sorts
  every row: ``sort``;
* 0.17 - 0.20: ``apply_top_k_top_p`` dispatches to the Triton top-k / top-p kernels (PR #33538) for 8 rows or
  more, and sorts below that: ``triton``;
* from 0.21: FlashInfer's sampler on by default again (PR #40376; ``VLLM_USE_FLASHINFER_SAMPLER`` defaults to
  true in 0.21.0's ``envs.py``): ``flashinfer``.

Per logit, beside the model-dtype logits the forward produced (``activation bytes``), the sampler's peak holds:

* ``sort``: the fp32 copy of the logits (4 bytes) and the sort's own transients, 32 bytes: the sorted keys (4),
  the int64 indices (8), the int64 iota PyTorch's segmented sort starts from (8) and CUB's alternate key and value
  buffers (4 + 8). vLLM's own benchmark of the PyTorch path (``benchmarks/benchmark_topk_topp.py``, the table of
  PR #33538) reads 40 bytes per logit of peak over fp32 logits it holds twice (the input and its clone), i.e. 32
  beyond the logits being sorted; the top-k / top-p masks and the softmax that follow the sort hold less;
* ``flashinfer`` and ``triton``: the fp32 logits (4), their softmax (4) and the exponential noise (4) (FlashInfer:
  its masked logits in place of the noise). The Triton kernels also keep one cached fp32 row of the vocabulary
  per streaming multiprocessor (<= 0.12 GiB on a B200 at a 200k vocabulary), not counted here.

A release string is read to its patch level (0.11.0 and 0.11.1 differ); one without a patch level ("0.11", the
twin's representative releases) is read as its ``.0`` release; a nightly build as the newest behaviour.

Not the twin's default: ``twin.hardware.kv_sizing`` applies it only when given ``sampler_release``; the embedded
rule stays round 13's sort for every release, because held out (every silicon row run as the release its server
ran) this rule did not improve the figures (docs/fidelity.md, "Round 14: the KV pool by vLLM release").
"""

from __future__ import annotations

import re
from typing import Literal

SamplerPath = Literal["flashinfer", "sort", "triton"]

SORT_BYTES_PER_LOGIT = 4 + 32          # fp32 logits + keys 4, int64 indices 8, int64 iota 8, CUB alternates 4 + 8
NO_SORT_BYTES_PER_LOGIT = 4 + 4 + 4    # fp32 logits, softmax, exponential noise (FlashInfer: masked logits)
TRITON_MIN_ROWS = 8                    # fewer rows: apply_top_k_top_p sorts (0.17 - 0.20)

# (first release, path on CUDA), in release order
SAMPLER_PATH_FROM: tuple[tuple[tuple[int, int, int], SamplerPath], ...] = (
    ((0, 0, 0), "flashinfer"),
    ((0, 11, 1), "sort"),          # PR #26859
    ((0, 17, 0), "triton"),        # PR #33538
    ((0, 21, 0), "flashinfer"),    # PR #40376
)
NIGHTLY_KEY = (10**6, 0, 0)
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:(?:rc|a|b|\.post|\.dev)\d+)?(?:[-+][0-9a-z._-]+)?$")
_NIGHTLY = re.compile(r"^nightly(?:[-@][0-9a-z._-]+)?$")


def release_key(version: object) -> tuple[int, int, int]:
    """(major, minor, patch) of a vLLM release string (no patch level: 0); a nightly build is newer than every
    release. ValueError naming the forms allowed otherwise."""
    text = str(version).strip().lower()
    if _NIGHTLY.match(text):
        return NIGHTLY_KEY
    m = _RELEASE.match(text)
    if not m:
        raise ValueError(f"{version!r} is not a vLLM release string (e.g. 0.10.2, 0.19, v0.19.0-cu130, nightly)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def profile_sampler_path(version: object, rows: int) -> SamplerPath:
    """The top-k / top-p path vLLM ``version``'s dummy sampler takes on CUDA for ``rows`` logit rows."""
    key = release_key(version)
    path = [p for first, p in SAMPLER_PATH_FROM if first <= key][-1]
    if path == "triton" and rows < TRITON_MIN_ROWS:
        return "sort"
    return path


def sampler_bytes_per_logit(path: SamplerPath) -> int:
    """Bytes the dummy sampler's peak holds per logit beyond the model-dtype logits (module docstring)."""
    if path == "sort":
        return SORT_BYTES_PER_LOGIT
    if path in ("flashinfer", "triton"):
        return NO_SORT_BYTES_PER_LOGIT
    raise ValueError(f"sampler path {path!r}: one of flashinfer, sort, triton")
