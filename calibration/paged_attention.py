"""Attention over the paged KV cache for one step: write the step's new K/V into their slots, then attend
group by group.

Sequences are grouped by similar (query length, context length) so that padding stays bounded; each group's KV
is gathered from the cache into a padded batch and handled by one ``scaled_dot_product_attention`` call with a
causal-with-offset mask (grouped-query heads folded into the query length, so KV is never repeated). A long
prefill from position 0 runs alone with ``is_causal`` and no gather. :class:`AttentionGroup` is what the
runner's host-side planning produces; :class:`PagedAttention` is the callback the model calls per layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from calibration.model import ModelShape
from calibration.paged_kv import PagedKVCache


def set_cudnn_attention(enabled: bool) -> bool:
    """Allow or forbid PyTorch's cuDNN backend of ``scaled_dot_product_attention`` (process-wide); returns the
    previous setting. The engine forbids it on a GPU: cuDNN plans each new attention shape on first use (the
    GPU run's first-use check measures what that costs), and a serving engine meets a new prefill length
    nearly every step, where vLLM's attention kernels take any length as it comes. A no-op (False) where this
    PyTorch has no such switch."""
    backends = torch.backends.cuda
    if not hasattr(backends, "enable_cudnn_sdp"):
        return False
    previous = bool(backends.cudnn_sdp_enabled())
    backends.enable_cudnn_sdp(bool(enabled))
    return previous


@dataclass
class AttentionGroup:
    causal: bool
    tok_lo: int = 0                       # causal: the sequence's token range in the flat batch
    tok_hi: int = 0
    q_index: torch.Tensor | None = None   # masked: [G, Qmax] flat token index per (seq, query row), pads -> 0
    mask: torch.Tensor | None = None      # masked: [G, 1, g * Qmax, L] bool, True = attend
    block_table: torch.Tensor | None = None   # masked: [G, nb]
    src: torch.Tensor | None = None       # masked: valid rows of the [G * Qmax] output ...
    dst: torch.Tensor | None = None       # ... and their flat token indices
    identity: bool = False                # masked: the group is the whole batch, in order, unpadded


class PagedAttention:
    """The attention callback for one step: writes the new K/V, then attends group by group."""

    def __init__(self, cache: PagedKVCache, shape: ModelShape, groups: list[AttentionGroup], block_ids: torch.Tensor,
                 offsets: torch.Tensor, num_tokens: int) -> None:
        self.cache, self.groups, self.block_ids, self.offsets = cache, groups, block_ids, offsets
        self.num_tokens = num_tokens
        self.nh, self.nkv, self.d = shape.num_attention_heads, shape.num_key_value_heads, shape.head_dim
        self.g = shape.num_queries_per_kv

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        self.cache.write(layer, self.block_ids, self.offsets, k, v)
        nh, nkv, g, d = self.nh, self.nkv, self.g, self.d
        out: torch.Tensor | None = None
        for grp in self.groups:
            if grp.causal:
                lo, hi = grp.tok_lo, grp.tok_hi
                o = F.scaled_dot_product_attention(q[lo:hi].transpose(0, 1)[None], k[lo:hi].transpose(0, 1)[None],
                                                   v[lo:hi].transpose(0, 1)[None], is_causal=True, enable_gqa=True)
                o = o[0].transpose(0, 1).reshape(hi - lo, nh * d)
                if len(self.groups) == 1:
                    return o
                if out is None:
                    out = q.new_empty(self.num_tokens, nh * d)
                out[lo:hi] = o
                continue
            gsz, qmax = grp.q_index.shape
            qg = q[grp.q_index].view(gsz, qmax, nkv, g, d).permute(0, 2, 3, 1, 4).reshape(gsz, nkv, g * qmax, d)
            kg, vg = self.cache.gather(layer, grp.block_table)
            o = F.scaled_dot_product_attention(qg, kg, vg, attn_mask=grp.mask)
            o = o.view(gsz, nkv, g, qmax, d).permute(0, 3, 1, 2, 4).reshape(gsz * qmax, nh * d)
            if grp.identity:
                return o
            if out is None:
                out = q.new_empty(self.num_tokens, nh * d)
            out.index_copy_(0, grp.dst, o.index_select(0, grp.src))
        return out
