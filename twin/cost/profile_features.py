"""What a calibrated profile is made of: the format's names, the features of a step its cost model is linear in,
and the padding of an engine's decode graphs (pure Python: the simulator's hot path and the fit share it)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from operator import add, mul

PROFILE_FORMAT = "twin-profile"
PROFILE_VERSION = 1
SUPPORTED_VERSIONS = (1,)

# coefficient names, in design-matrix order (seconds per unit of the feature)
FEATURE_NAMES: tuple[str, ...] = ("step", "seqs", "tokens", "tokens_over_knee", "attn_pairs", "kv_read_tokens",
                                  "padded_kv_tokens", "mixed_step")
FEATURE_UNITS: dict[str, str] = {
    "step": "s per step", "seqs": "s per sequence", "tokens": "s per scheduled token",
    "tokens_over_knee": "s per scheduled token beyond knee_tokens", "attn_pairs": "s per attention (query, key) pair",
    "kv_read_tokens": "s per KV token read", "padded_kv_tokens": "s per padded KV slot (seqs x longest)",
    "mixed_step": "s per step that is not a pure decode"}
# the step aggregates whose fitted [min, max] a profile records; the model checks each step against the max
RANGE_FIELDS: tuple[str, ...] = ("seqs", "tokens", "attn_pairs", "kv_read_tokens", "max_seq_len", "padded_kv_tokens")
MODEL_SHAPE_FIELDS: tuple[str, ...] = ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                       "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size")


DecodePadding = tuple[tuple[int, ...], int]        # (batch buckets, ascending; block size in tokens)


def batch_bucket(batch: int, buckets: Sequence[int]) -> int | None:
    """The smallest of ``buckets`` (ascending) holding ``batch`` sequences, or None if none does."""
    i = bisect_left(buckets, batch)
    return buckets[i] if i < len(buckets) else None


def blocks_bucket(blocks: int) -> int:
    """The next power of two of ``blocks`` (at least 1)."""
    return 1 << max(0, int(blocks) - 1).bit_length()


def decode_padded_slots(seqs: int, longest: int, padding: DecodePadding) -> int:
    """KV slots a padded decode graph reads: ``seqs`` rounded up to the next batch bucket, times the longest
    sequence's blocks rounded up to a power of two; ``seqs x longest`` past the largest bucket."""
    buckets, block_size = padding
    rows = batch_bucket(seqs, buckets)
    if rows is None:
        return seqs * longest
    return rows * blocks_bucket(-(-longest // block_size)) * block_size


def step_features(num_new_tokens: Sequence[int], num_computed_before: Sequence[int],
                  decode_padding: DecodePadding | None = None) -> tuple[int, int, float, int, int, int]:
    """``(seqs, tokens, attn_pairs, kv_read_tokens, max_seq_len, padded_kv_tokens)`` of a step (the order of
    ``RANGE_FIELDS``): the number of sequences, the scheduled tokens, the attention (query, key) pairs
    ``sum(n c + n(n+1)/2)``, the KV tokens attention reads ``sum(c + n)``, the longest sequence after the step
    ``max(c + n)``, and ``seqs x max(c + n)`` (a pure decode with ``decode_padding``: the graph's padded
    slots, :func:`decode_padded_slots`)."""
    nn, cc = num_new_tokens, num_computed_before
    seqs = len(nn)
    if not seqs:
        return 0, 0, 0.0, 0, 0, 0
    context = sum(cc)
    if nn.count(1) == seqs:                        # pure decode
        longest = max(cc) + 1
        padded = seqs * longest if decode_padding is None else decode_padded_slots(seqs, longest, decode_padding)
        return seqs, seqs, float(context + seqs), context + seqs, longest, padded
    tokens = sum(nn)
    pairs = sum(map(mul, nn, cc)) + 0.5 * (sum(map(mul, nn, nn)) + tokens)
    longest = max(map(add, nn, cc))
    return seqs, tokens, pairs, context + tokens, longest, seqs * longest
