"""The paged KV cache: one tensor ``[layers, num_blocks, 2, block_size, kv_heads, head_dim]`` addressed by block
tables (the block ids the serving core's KV cache manager gave each sequence, in order).

Token position ``p`` of a sequence lives in block ``block_table[p // block_size]`` at offset ``p % block_size``.
Block 0 is the reserved null block: it is never written (a write that would land there is an error) and it pads
block tables, so gathers of padded tables read it and the attention mask hides it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

NULL_BLOCK_ID = 0


class PagedKVCache:
    def __init__(self, num_layers: int, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int,
                 *, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> None:
        if num_blocks < 2:
            raise ValueError(f"num_blocks must be >= 2 (block 0 is the reserved null block), got {num_blocks}")
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        self.num_layers, self.num_blocks, self.block_size = num_layers, num_blocks, block_size
        self.num_kv_heads, self.head_dim = num_kv_heads, head_dim
        self.dtype, self.device = dtype, torch.device(device)
        # zero-initialised so the null block holds finite values (it is read, masked, when tables are padded)
        self.kv = torch.zeros(num_layers, num_blocks, 2, block_size, num_kv_heads, head_dim,
                              dtype=dtype, device=self.device)

    @staticmethod
    def bytes_per_block(num_layers: int, block_size: int, num_kv_heads: int, head_dim: int,
                        dtype: torch.dtype) -> int:
        elem = torch.empty((), dtype=dtype).element_size()
        return 2 * num_layers * block_size * num_kv_heads * head_dim * elem

    @property
    def nbytes(self) -> int:
        return self.kv.numel() * self.kv.element_size()

    def layer(self, n: int) -> torch.Tensor:
        """Layer ``n``'s view ``[num_blocks, 2, block_size, kv_heads, head_dim]``."""
        return self.kv[n]

    # ---- addressing -----------------------------------------------------------------------------------
    def block_table_tensor(self, block_tables: Sequence[Sequence[int]], num_blocks: int | None = None) -> torch.Tensor:
        """Pad block tables with the null block into a CPU ``long`` tensor ``[num_seqs, width]`` (width =
        ``num_blocks`` or the longest table), checking every id is a valid block."""
        width = num_blocks if num_blocks is not None else max((len(bt) for bt in block_tables), default=0)
        out = torch.full((len(block_tables), max(width, 1)), NULL_BLOCK_ID, dtype=torch.long)
        for i, bt in enumerate(block_tables):
            row = bt[:width]
            if len(row):
                out[i, :len(row)] = torch.as_tensor(row, dtype=torch.long)
        if out.numel() and (int(out.min()) < 0 or int(out.max()) >= self.num_blocks):
            raise ValueError(f"block table holds a block id outside [0, {self.num_blocks})")
        return out

    def slot_mapping(self, block_table: torch.Tensor, seq_index: torch.Tensor,
                     positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(block id, offset) of each token, vectorised: token j of the flattened batch belongs to sequence
        ``seq_index[j]`` at ``positions[j]``. All CPU tensors; raises if a token would land in the null block
        or past its table."""
        col = torch.div(positions, self.block_size, rounding_mode="floor")
        if positions.numel() and int(col.max()) >= block_table.shape[1]:
            raise ValueError("block table too short for the positions being written")
        block_ids = block_table[seq_index, col]
        if positions.numel() and bool((block_ids == NULL_BLOCK_ID).any()):
            bad = int(torch.nonzero(block_ids == NULL_BLOCK_ID)[0, 0])
            raise ValueError(f"token at position {int(positions[bad])} of sequence {int(seq_index[bad])} maps to "
                             f"the null block 0 (block table missing or too short)")
        return block_ids, positions - col * self.block_size

    # ---- data movement --------------------------------------------------------------------------------
    def write(self, layer: int, block_ids: torch.Tensor, offsets: torch.Tensor,
              k: torch.Tensor, v: torch.Tensor) -> None:
        """Scatter new tokens' K and V ``[T, kv_heads, head_dim]`` into their slots (one index_put_ each)."""
        cache = self.kv[layer]
        cache[:, 0].index_put_((block_ids, offsets), k)
        cache[:, 1].index_put_((block_ids, offsets), v)

    def gather(self, layer: int, block_table: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of whole blocks for a batch of tables ``[B, nb]`` (on the cache's device), laid out for
        attention: ``[B, kv_heads, nb * block_size, head_dim]`` each."""
        cache = self.kv[layer]
        b, nb = block_table.shape
        k = cache[:, 0][block_table].view(b, nb * self.block_size, self.num_kv_heads, self.head_dim)
        v = cache[:, 1][block_table].view(b, nb * self.block_size, self.num_kv_heads, self.head_dim)
        return k.transpose(1, 2), v.transpose(1, 2)
