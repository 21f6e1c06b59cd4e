"""vLLM V1's KV block pool: preallocated blocks, an O(1) doubly linked free queue, and the hash -> block map
of the prefix cache.

The free queue holds never-used blocks and cached blocks whose ref count fell to 0. Its head is the LRU end:
new blocks are popped from the head (evicting a cached block's hash on the way), freed blocks go to the tail.

vLLM preallocates every block object. Here the never-used blocks are one node of the queue that stands for
the ids not yet handed out, in id order, and a block object is made when its id is first popped: the same
queue order and the same ids, without building hundreds of thousands of objects per replica up front (a
cluster of many replicas, or a small block size, would otherwise cost seconds and gigabytes before the
first step).
"""

from __future__ import annotations

from collections.abc import Iterable


class _PrivateHash:
    """The hash of a full block that only its own request could ever look up (see ``BlockPool.mark_private``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "PRIVATE_HASH"


PRIVATE_HASH = _PrivateHash()


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


class PrivateRun:
    """Free blocks that carry ``PRIVATE_HASH``, freed one after another, as one node of the free queue: nobody
    can look them up, so they leave the queue only from its head, in order, and need not be linked one by one.
    The blocks ``blocks[start:]`` are in the queue; their own pointers stay None."""

    __slots__ = ("blocks", "start", "prev_free", "next_free")
    block_id = -4   # real blocks have ids >= 0: one comparison tells a node from a block

    def __init__(self, blocks: list[KVCacheBlock]) -> None:
        self.blocks = blocks
        self.start = 0
        self.prev_free: KVCacheBlock | PrivateRun | None = None
        self.next_free: KVCacheBlock | PrivateRun | None = None


class FreeBlockQueue:
    """Doubly linked list of free blocks through the blocks' own pointers, with sentinel head and tail; runs
    of private blocks freed together are one node (``PrivateRun``)."""

    __slots__ = ("num_free_blocks", "_head", "_tail", "_fresh", "_store", "_next_fresh", "_end_fresh")

    def __init__(self, blocks: Iterable[KVCacheBlock] = (), *, store: list[KVCacheBlock] | None = None,
                 num_fresh: int = 0) -> None:
        """The queue of ``blocks``; or, with ``store`` and ``num_fresh``, of the never-used blocks
        ``0 .. num_fresh - 1``, made on first use and kept in ``store`` (indexed by id)."""
        self._head = KVCacheBlock(-1)
        self._tail = KVCacheBlock(-2)
        self._head.next_free = self._tail
        self._tail.prev_free = self._head
        self.num_free_blocks = 0
        self._fresh = KVCacheBlock(-3)  # stands for the ids _next_fresh .. _end_fresh - 1 while in the list
        self._store = store if store is not None else []
        self._next_fresh = self._end_fresh = len(self._store)
        if num_fresh > 0:
            self._end_fresh = self._next_fresh + num_fresh
            self.append(self._fresh)
            self.num_free_blocks = num_fresh
        for block in blocks:
            self.append(block)

    def popleft(self) -> KVCacheBlock:
        block = self._head.next_free
        if block is self._tail:
            raise ValueError("no free blocks")
        if block is self._fresh:
            return self._pop_fresh()
        if block.block_id < 0:     # a private run: its first block
            run, block = block, block.blocks[block.start]
            run.start += 1
            if run.start == len(run.blocks):
                self._unlink(run)
            self.num_free_blocks -= 1
            return block
        self.remove(block)
        return block

    def _unlink(self, node: KVCacheBlock | PrivateRun) -> None:
        node.prev_free.next_free = node.next_free
        node.next_free.prev_free = node.prev_free
        node.prev_free = node.next_free = None

    def _pop_fresh(self) -> KVCacheBlock:
        return self.pop_fresh_n(1)[0]

    def pop_fresh_n(self, num_blocks: int) -> list[KVCacheBlock]:
        """Up to ``num_blocks`` never-used blocks, lowest ids first (the range must be at the head)."""
        first = self._next_fresh
        take = min(num_blocks, self._end_fresh - first)
        self._next_fresh = first + take
        if self._next_fresh == self._end_fresh:
            self.remove(self._fresh)  # counted one free block less
            self.num_free_blocks -= take - 1
        else:
            self.num_free_blocks -= take
        self.materialize(first + take - 1)
        return self._store[first:first + take]

    def materialize(self, block_id: int) -> KVCacheBlock:
        """The block object of ``block_id`` (made, with every lower id, on first use)."""
        store = self._store
        if len(store) <= block_id:
            store.extend(map(KVCacheBlock, range(len(store), block_id + 1)))
        return store[block_id]

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
            if block is self._fresh:
                ids.extend(range(self._next_fresh, self._end_fresh))
            elif block.block_id < 0:
                ids.extend(b.block_id for b in block.blocks[block.start:])
            else:
                ids.append(block.block_id)
            block = block.next_free
        return ids

    def link_private_runs(self) -> None:
        """Link every block of the private runs one by one, in place of its run (queue order unchanged)."""
        block = self._head.next_free
        while block is not self._tail:
            nxt = block.next_free
            if block.block_id < 0 and block is not self._fresh:
                last = block.prev_free
                self._unlink(block)
                for b in block.blocks[block.start:]:
                    last.next_free = b
                    b.prev_free = last
                    last = b
                last.next_free = nxt
                nxt.prev_free = last
            block = nxt


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
        head, fresh = queue._head, queue._fresh
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
                # a private run: its first blocks, evicted (their hash forgotten)
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
                    b.block_hash = None
                out += taken
                num_private_evicted += len(taken)
                need -= len(taken)
                continue
            nxt = block.next_free
            block.prev_free = block.next_free = None
            if block.block_hash is not None:
                if block.block_hash is PRIVATE_HASH:   # _evict inlined for the common case
                    block.block_hash = None
                    num_private_evicted += 1
                else:
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

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """Drop one reference from each block; blocks reaching 0 join the free queue in the given order."""
        queue = self.free_block_queue
        to_head: list[KVCacheBlock] | None = [] if self.free_unhashed_to_head else None
        # the queue's append inlined: link the freed blocks one after another, close the chain once; private
        # blocks freed one after another go to the tail as one run
        tail = queue._tail
        last = tail.prev_free
        num_appended = 0
        private: list[KVCacheBlock] = []
        for block in ordered_blocks:
            block.ref_cnt -= 1
            if block.ref_cnt == 0 and not block.is_null:
                block_hash = block.block_hash
                if block_hash is PRIVATE_HASH:
                    private.append(block)
                elif to_head is not None and block_hash is None:
                    to_head.append(block)
                else:
                    if private:
                        last = _link_run(last, private)
                        num_appended += len(private)
                        private = []
                    last.next_free = block
                    block.prev_free = last
                    last = block
                    num_appended += 1
        if private:
            last = _link_run(last, private)
            num_appended += len(private)
        last.next_free = tail
        tail.prev_free = last
        queue.num_free_blocks += num_appended
        if to_head:
            queue.prepend_n(to_head)

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
        eviction is as if they had been registered when they filled."""
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
        self.free_block_queue.link_private_runs()   # their blocks are private no more
        for block in self._blocks:  # blocks never used carry no hash
            block.block_hash = None
        self.cached_block_hash_to_block.clear()
        self._duplicates.clear()
        return True


def _link_run(last: KVCacheBlock | PrivateRun, blocks: list[KVCacheBlock]) -> PrivateRun:
    """Link a ``PrivateRun`` of ``blocks`` after ``last``; returns it (the caller closes the chain)."""
    run = PrivateRun(blocks)
    last.next_free = run
    run.prev_free = last
    return run
