"""vLLM V1's KV block pool: preallocated blocks, an O(1) doubly linked free queue, and the hash -> block map
of the prefix cache.

The free queue holds never-used blocks and cached blocks whose ref count fell to 0. Its head is the LRU end:
new blocks are popped from the head (evicting a cached block's hash on the way), freed blocks go to the tail.
"""

from __future__ import annotations

from collections.abc import Iterable


class KVCacheBlock:
    __slots__ = ("block_id", "ref_cnt", "block_hash", "prev_free", "next_free", "is_null")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        self.block_hash: int | None = None
        self.prev_free: KVCacheBlock | None = None
        self.next_free: KVCacheBlock | None = None
        self.is_null = False

    def __repr__(self) -> str:
        return f"KVCacheBlock(id={self.block_id}, ref_cnt={self.ref_cnt}, hashed={self.block_hash is not None})"


class FreeBlockQueue:
    """Doubly linked list of free blocks through the blocks' own pointers, with sentinel head and tail."""

    __slots__ = ("num_free_blocks", "_head", "_tail")

    def __init__(self, blocks: Iterable[KVCacheBlock]) -> None:
        self._head = KVCacheBlock(-1)
        self._tail = KVCacheBlock(-2)
        self._head.next_free = self._tail
        self._tail.prev_free = self._head
        self.num_free_blocks = 0
        for block in blocks:
            self.append(block)

    def popleft(self) -> KVCacheBlock:
        block = self._head.next_free
        if block is self._tail:
            raise ValueError("no free blocks")
        self.remove(block)
        return block

    def remove(self, block: KVCacheBlock) -> None:
        prev, nxt = block.prev_free, block.next_free
        if prev is None or nxt is None:
            raise ValueError(f"block {block.block_id} is not in the free queue")
        prev.next_free = nxt
        nxt.prev_free = prev
        block.prev_free = block.next_free = None
        self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        last = self._tail.prev_free
        last.next_free = block
        block.prev_free = last
        block.next_free = self._tail
        self._tail.prev_free = block
        self.num_free_blocks += 1

    def appendleft(self, block: KVCacheBlock) -> None:
        first = self._head.next_free
        first.prev_free = block
        block.next_free = first
        block.prev_free = self._head
        self._head.next_free = block
        self.num_free_blocks += 1

    def prepend_n(self, blocks: list[KVCacheBlock]) -> None:
        """Put ``blocks`` at the head as a group, in order: ``blocks[0]`` becomes the head."""
        for block in reversed(blocks):
            self.appendleft(block)

    def block_ids(self) -> list[int]:
        ids, block = [], self._head.next_free
        while block is not self._tail:
            ids.append(block.block_id)
            block = block.next_free
        return ids


class BlockPool:
    """All KV blocks of one replica, the free queue and the prefix-cache map.

    ``reserve_null_block`` (vLLM >= 0.8) takes block 0 out of circulation as the padding block.
    ``free_unhashed_to_head`` (version-dependent, default off) puts the freed blocks that carry no hash at the
    head of the free queue as one group, in the order freed, so they are reused before any cached block is
    evicted (vLLM's ``prepend_n``); hashed blocks still go to the tail.
    """

    def __init__(self, num_gpu_blocks: int, enable_caching: bool = True, *, reserve_null_block: bool = True,
                 free_unhashed_to_head: bool = False) -> None:
        if num_gpu_blocks < 2:
            raise ValueError(f"num_gpu_blocks must be >= 2, got {num_gpu_blocks}")
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.free_unhashed_to_head = free_unhashed_to_head
        self.blocks = [KVCacheBlock(i) for i in range(num_gpu_blocks)]
        self.free_block_queue = FreeBlockQueue(self.blocks)
        self.null_block: KVCacheBlock | None = None
        if reserve_null_block:
            self.null_block = self.free_block_queue.popleft()
            self.null_block.is_null = True
        self.num_usable_blocks = num_gpu_blocks - (1 if reserve_null_block else 0)
        # hash -> block; a second block with the same hash (no dedup in V1) goes to _duplicates
        self.cached_block_hash_to_block: dict[int, KVCacheBlock] = {}
        self._duplicates: dict[int, list[KVCacheBlock]] = {}
        self.num_evictions = 0

    # ---- lookups --------------------------------------------------------------------------------------
    def get_cached_block(self, block_hash: int) -> KVCacheBlock | None:
        return self.cached_block_hash_to_block.get(block_hash)

    def get_num_free_blocks(self) -> int:
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        return 1.0 - self.free_block_queue.num_free_blocks / self.num_usable_blocks

    # ---- allocation -----------------------------------------------------------------------------------
    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        if num_blocks > self.free_block_queue.num_free_blocks:
            raise ValueError(f"cannot get {num_blocks} free blocks, {self.free_block_queue.num_free_blocks} free")
        queue = self.free_block_queue
        out = []
        for _ in range(num_blocks):
            block = queue.popleft()
            if block.block_hash is not None:
                self._evict(block)
            block.ref_cnt += 1
            out.append(block)
        return out

    def touch(self, blocks: Iterable[KVCacheBlock]) -> None:
        """A prefix hit takes these blocks: out of the free queue if idle, one more reference."""
        queue = self.free_block_queue
        for block in blocks:
            if block.ref_cnt == 0 and not block.is_null:
                queue.remove(block)
            block.ref_cnt += 1

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """Drop one reference from each block; blocks reaching 0 join the free queue in the given order."""
        queue = self.free_block_queue
        to_head: list[KVCacheBlock] | None = [] if self.free_unhashed_to_head else None
        for block in ordered_blocks:
            block.ref_cnt -= 1
            if block.ref_cnt == 0 and not block.is_null:
                if to_head is not None and block.block_hash is None:
                    to_head.append(block)
                else:
                    queue.append(block)
        if to_head:
            queue.prepend_n(to_head)

    # ---- the prefix cache -----------------------------------------------------------------------------
    def cache_block(self, block: KVCacheBlock, block_hash: int) -> None:
        block.block_hash = block_hash
        existing = self.cached_block_hash_to_block.get(block_hash)
        if existing is None:
            self.cached_block_hash_to_block[block_hash] = block
        else:
            self._duplicates.setdefault(block_hash, []).append(block)

    def _evict(self, block: KVCacheBlock) -> None:
        block_hash = block.block_hash
        block.block_hash = None
        self.num_evictions += 1
        if self.cached_block_hash_to_block.get(block_hash) is block:
            dups = self._duplicates.get(block_hash)
            if dups:
                self.cached_block_hash_to_block[block_hash] = dups.pop(0)
                if not dups:
                    del self._duplicates[block_hash]
            else:
                del self.cached_block_hash_to_block[block_hash]
        else:
            dups = self._duplicates[block_hash]
            dups.remove(block)
            if not dups:
                del self._duplicates[block_hash]

    def reset_prefix_cache(self) -> bool:
        """Forget every cached hash; only possible when no block is in use (as vLLM)."""
        if self.free_block_queue.num_free_blocks != self.num_usable_blocks:
            return False
        for block in self.blocks:
            block.block_hash = None
        self.cached_block_hash_to_block.clear()
        self._duplicates.clear()
        return True
