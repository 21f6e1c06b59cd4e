"""vLLM V1's KV block pool: every block of a replica, the free queue (``twin.core.free_block_queue``) and the
hash -> block map of the prefix cache."""

from __future__ import annotations

from collections.abc import Iterable

from twin.core.free_block_queue import PRIVATE_HASH, FreeBlockQueue, KVCacheBlock, PrivateRun, link_run


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
        self._blocks: list[KVCacheBlock] = []
        self.free_block_queue = FreeBlockQueue(store=self._blocks, num_fresh=num_gpu_blocks)
        self.null_block: KVCacheBlock | None = None
        if reserve_null_block:
            self.null_block = self.free_block_queue.popleft()
            self.null_block.is_null = True
        self.num_usable_blocks = num_gpu_blocks - (1 if reserve_null_block else 0)
        # hash -> block; a second block with the same hash (no dedup in V1) goes to _duplicates
        self.cached_block_hash_to_block: dict[int, KVCacheBlock] = {}
        self._duplicates: dict[int, list[KVCacheBlock]] = {}
        self.num_evictions = 0

    @property
    def blocks(self) -> list[KVCacheBlock]:
        """Every block object, by id (makes the ones not used yet; for inspection, not the hot path)."""
        self.free_block_queue.materialize(self.num_gpu_blocks - 1)
        return self._blocks

    # ---- lookups --------------------------------------------------------------------------------------
    def get_cached_block(self, block_hash: int) -> KVCacheBlock | None:
        return self.cached_block_hash_to_block.get(block_hash)

    def get_num_free_blocks(self) -> int:
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        return 1.0 - self.free_block_queue.num_free_blocks / self.num_usable_blocks

    # ---- allocation -----------------------------------------------------------------------------------
    def get_new_blocks(self, num_blocks: int) -> list[KVCacheBlock]:
        queue = self.free_block_queue
        if num_blocks > queue.num_free_blocks:
            raise ValueError(f"cannot get {num_blocks} free blocks, {queue.num_free_blocks} free")
        # popleft inlined (this runs for every block of every request): the taken blocks are cut from the head
        # of the list in one go; never-used ids are taken as a range
        out: list[KVCacheBlock] = []
        head, fresh = queue.head, queue.fresh
        num_fresh = num_private_evicted = 0
        need = num_blocks
        block = head.next_free
        while need:
            if block.block_id < 0:
                if block is fresh:
                    head.next_free = fresh
                    fresh.prev_free = head
                    new = queue.pop_fresh_n(need)   # counts its blocks off the free queue
                    for b in new:
                        b.ref_cnt = 1
                    out += new
                    num_fresh += len(new)
                    need -= len(new)
                    block = head.next_free
                    continue
                # a private run: its first blocks, evicted (the run's PRIVATE_HASH is theirs no more)
                run_blocks, start = block.blocks, block.start
                end = start + need
                if end < len(run_blocks):
                    taken = run_blocks[start:end]
                    block.start = end
                else:
                    taken = run_blocks[start:] if start else run_blocks
                    nxt = block.next_free
                    block.prev_free = block.next_free = None
                    block = nxt
                for b in taken:
                    b.ref_cnt = 1
                out += taken
                num_private_evicted += len(taken)
                need -= len(taken)
                continue
            nxt = block.next_free
            block.prev_free = block.next_free = None
            if block.block_hash is not None:
                self._evict(block)
            block.ref_cnt += 1
            out.append(block)
            need -= 1
            block = nxt
        head.next_free = block
        block.prev_free = head
        queue.num_free_blocks -= num_blocks - num_fresh
        self.num_evictions += num_private_evicted
        return out

    def touch(self, blocks: Iterable[KVCacheBlock]) -> None:
        """A prefix hit takes these blocks: out of the free queue if idle, one more reference."""
        queue = self.free_block_queue
        for block in blocks:
            if block.ref_cnt == 0 and not block.is_null:
                queue.remove(block)
            block.ref_cnt += 1

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock], then_private: list[KVCacheBlock] | None = None,
                    then_blocks: Iterable[KVCacheBlock] = ()) -> None:
        """Drop one reference from each block; blocks reaching 0 join the free queue in the given order. With
        ``then_private`` (full blocks that only their request could name, held by it alone, never registered,
        in the order freed), those drop their reference and join next as one private run (which carries their
        ``PRIVATE_HASH``), and ``then_blocks`` after them."""
        queue = self.free_block_queue
        to_head: list[KVCacheBlock] | None = [] if self.free_unhashed_to_head else None
        tail = queue.tail
        last, num_appended = self._append_freed(ordered_blocks, tail.prev_free, to_head)
        if then_private:
            for block in then_private:
                block.ref_cnt -= 1
            last = link_run(last, then_private)
            num_appended += len(then_private)
            last, num_then = self._append_freed(then_blocks, last, to_head)
            num_appended += num_then
        last.next_free = tail
        tail.prev_free = last
        queue.num_free_blocks += num_appended
        if to_head:
            queue.prepend_n(to_head)

    @staticmethod
    def _append_freed(ordered_blocks: Iterable[KVCacheBlock], last: KVCacheBlock | PrivateRun,
                      to_head: list[KVCacheBlock] | None) -> tuple[KVCacheBlock | PrivateRun, int]:
        """``free_blocks``'s work on ``ordered_blocks``: the queue's append inlined, each freed block linked after
        ``last`` (the caller closes the chain), private blocks freed one after another as one run, unhashed ones
        to ``to_head`` when it is a list. Returns the new last node and the number of blocks linked."""
        num_appended = 0
        private: list[KVCacheBlock] = []
        for block in ordered_blocks:
            block.ref_cnt -= 1
            if block.ref_cnt == 0 and not block.is_null:
                block_hash = block.block_hash
                if block_hash is PRIVATE_HASH:     # its hash is the run's from now on (PrivateRun)
                    block.block_hash = None
                    private.append(block)
                elif to_head is not None and block_hash is None:
                    to_head.append(block)
                else:
                    if private:
                        last = link_run(last, private)
                        num_appended += len(private)
                        private = []
                    last.next_free = block
                    block.prev_free = last
                    last = block
                    num_appended += 1
        if private:
            last = link_run(last, private)
            num_appended += len(private)
        return last, num_appended

    # ---- the prefix cache -----------------------------------------------------------------------------
    def cache_block(self, block: KVCacheBlock, block_hash: int) -> None:
        self.cache_blocks((block,), (block_hash,))

    def cache_blocks(self, blocks: Iterable[KVCacheBlock], block_hashes: Iterable[int]) -> None:
        """``cache_block`` each block that carries no hash yet or ``PRIVATE_HASH`` (a prefix hit's blocks keep
        theirs)."""
        register = self.cached_block_hash_to_block.setdefault
        for block, block_hash in zip(blocks, block_hashes):
            if block.block_hash is None or block.block_hash is PRIVATE_HASH:
                block.block_hash = block_hash
                if register(block_hash, block) is not block:
                    self._duplicates.setdefault(block_hash, []).append(block)

    def mark_private(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Register full blocks that no other request can name: they carry ``PRIVATE_HASH`` instead of a
        hash in the map. Eviction counts them as any cached block; ``cache_blocks`` gives them their real hash
        when their request is preempted (the only lookup that could find them), so every lookup, hit and
        eviction is as if they had been registered when they filled. (A request never preempted does not
        mark its own: ``KVCacheManager`` counts them and frees them as one run, see ``free_blocks``.)"""
        for block in blocks:
            if block.block_hash is None:
                block.block_hash = PRIVATE_HASH

    def _evict(self, block: KVCacheBlock) -> None:
        block_hash = block.block_hash
        block.block_hash = None
        self.num_evictions += 1
        if block_hash is PRIVATE_HASH:
            return
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
        self.free_block_queue.link_private_runs()   # their blocks are private no more: linked one by one
        for block in self._blocks:  # blocks never used carry no hash
            block.block_hash = None
        self.cached_block_hash_to_block.clear()
        self._duplicates.clear()
        return True
