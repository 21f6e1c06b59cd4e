"""Deterministic token identity for synthetic prompts.

Requests that carry synthetic segments instead of token ids get token ids per segment: a counter-based
SplitMix64 stream seeded by the segment's key, so two requests sharing a segment share tokens, and hence KV,
exactly where the prefix cache says they do, and any slice is computed directly and equals the same slice of
the whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def segment_seed(key: Hashable) -> int:
    """A 64-bit seed from a segment key: blake2b of ``repr(key)``, independent of PYTHONHASHSEED."""
    return int.from_bytes(hashlib.blake2b(repr(key).encode("utf-8"), digest_size=8).digest(), "little")


def segment_token_ids(key: Hashable, start: int, end: int, vocab_size: int) -> np.ndarray:
    """Tokens ``[start, end)`` of the segment named ``key``: a counter-based SplitMix64 stream seeded by
    :func:`segment_seed`, so any slice is computed directly and equals the same slice of the whole."""
    counter = np.arange(start + 1, end + 1, dtype=np.uint64)
    z = np.uint64(segment_seed(key)) + counter * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    z = z ^ (z >> np.uint64(31))
    return (z % np.uint64(vocab_size)).astype(np.int64)


def synthetic_token_ids(segments: Sequence[tuple[Hashable, int]], start: int, end: int,
                        vocab_size: int) -> list[int]:
    """Token ids at positions ``[start, end)`` of a prompt made of ``(segment_key, num_tokens)`` pieces."""
    out: list[np.ndarray] = []
    seg_start = 0
    for key, n in segments:
        seg_end = seg_start + n
        lo, hi = max(start, seg_start), min(end, seg_end)
        if lo < hi:
            out.append(segment_token_ids(key, lo - seg_start, hi - seg_start, vocab_size))
        if seg_end >= end:
            break
        seg_start = seg_end
    ids = np.concatenate(out).tolist() if out else []
    if len(ids) != end - start:
        raise ValueError(f"segments cover fewer than {end} tokens (positions [{start}, {end}) asked)")
    return ids


def request_token_ids(request: Any, start: int, end: int, vocab_size: int) -> list[int]:
    """Token ids at positions ``[start, end)`` of a ``twin.core.request.Request``'s sequence (prompt, outputs, drafts).

    Real-token requests: ``prompt_token_ids + output_token_ids + spec_token_ids``; positions past those (draft
    slots the twin counted but did not name) get synthetic ids of the request's output segment. Segment requests:
    synthetic ids of their segments, the last of which is the open-ended output segment, so a later turn whose
    prompt holds ``(output_segment_key(id), n)`` sees the same tokens this request's outputs were computed with.
    """
    from twin.core.request import output_segment_key

    segments = getattr(request, "segments", None)
    if segments is not None:
        return synthetic_token_ids(segments, start, end, vocab_size)
    ids = list(request.prompt_token_ids) + list(request.output_token_ids or ()) + list(request.spec_token_ids)
    have = ids[start:end]
    if len(have) < end - start:
        lo = max(start, len(ids))
        fill = segment_token_ids(output_segment_key(request.request_id), lo - request.num_prompt_tokens,
                                 end - request.num_prompt_tokens, vocab_size).tolist()
        have = have + fill
    return have
