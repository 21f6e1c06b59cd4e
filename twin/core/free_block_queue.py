"""vLLM V1's free block queue: KV block objects and the O(1) doubly linked list of free blocks through them.

The free queue holds never-used blocks and cached blocks whose ref count fell to 0. Its head is the LRU end:
new blocks are popped from the head (evicting a cached block's hash on the way), freed blocks go to the tail.

vLLM preallocates every block object. Here the never-used blocks are one node of the queue that stands for
the ids not yet handed out, in id order, and a block object is made when its id is first popped: the same
queue order and the same ids, without building hundreds of thousands of objects per replica up front (a
cluster of many replicas, or a small block size, would otherwise cost seconds and gigabytes before the
first step). Private blocks freed together are one node too (``PrivateRun``).
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
    The blocks ``blocks[start:]`` are in the queue, each with ref count 0 like any free block (vLLM's
    ``ref_cnt == 0 <=> free`` holds on the objects); their links and their hash are the run's: their own
    pointers stay None and their ``block_hash`` None, the run standing for their ``PRIVATE_HASH`` (so that
    they pass from their request to the queue and on to the next request with one write each, their ref
    count). ``popleft`` writes the hash back to a block it takes out of a run; ``BlockPool.get_new_blocks``
    evicts the blocks it takes (ref count 1, no hash)."""

    __slots__ = ("blocks", "start", "prev_free", "next_free")
    block_id = -4   # real blocks have ids >= 0: one comparison tells a node from a block

    def __init__(self, blocks: list[KVCacheBlock]) -> None:
        self.blocks = blocks
        self.start = 0
        self.prev_free: KVCacheBlock | PrivateRun | None = None
        self.next_free: KVCacheBlock | PrivateRun | None = None


class FreeBlockQueue:
    """Doubly linked list of free blocks through the blocks' own pointers, with sentinel head and tail; runs
    of private blocks freed together are one node (``PrivateRun``).

    Public seams for the block pool's inlined pops and appends: ``head`` and ``tail`` are the sentinel nodes
    (``head.next_free`` is the LRU end, ``tail.prev_free`` the MRU end); ``fresh`` is the node standing for
    the never-used ids while any are left (its ``block_id`` is -3). A caller that relinks nodes between them
    keeps ``num_free_blocks`` right itself."""

    __slots__ = ("num_free_blocks", "head", "tail", "fresh", "_store", "_next_fresh", "_end_fresh")

    def __init__(self, blocks: Iterable[KVCacheBlock] = (), *, store: list[KVCacheBlock] | None = None,
                 num_fresh: int = 0) -> None:
        """The queue of ``blocks``; or, with ``store`` and ``num_fresh``, of the never-used blocks
        ``0 .. num_fresh - 1``, made on first use and kept in ``store`` (indexed by id)."""
        self.head = KVCacheBlock(-1)
        self.tail = KVCacheBlock(-2)
        self.head.next_free = self.tail
        self.tail.prev_free = self.head
        self.num_free_blocks = 0
        self.fresh = KVCacheBlock(-3)  # stands for the ids _next_fresh .. _end_fresh - 1 while in the list
        self._store = store if store is not None else []
        self._next_fresh = self._end_fresh = len(self._store)
        if num_fresh > 0:
            self._end_fresh = self._next_fresh + num_fresh
            self.append(self.fresh)
            self.num_free_blocks = num_fresh
        for block in blocks:
            self.append(block)

    def popleft(self) -> KVCacheBlock:
        block = self.head.next_free
        if block is self.tail:
            raise ValueError("no free blocks")
        if block is self.fresh:
            return self._pop_fresh()
        if block.block_id < 0:     # a private run: its first block
            run, block = block, block.blocks[block.start]
            run.start += 1
            if run.start == len(run.blocks):
                self._unlink(run)
            self.num_free_blocks -= 1
            block.block_hash = PRIVATE_HASH    # its state in the queue
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
            self.remove(self.fresh)  # counted one free block less
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
        self._link_between(self.tail.prev_free, block, self.tail)

    def appendleft(self, block: KVCacheBlock) -> None:
        self._link_between(self.head, block, self.head.next_free)

    def _link_between(self, prev: KVCacheBlock | PrivateRun, block: KVCacheBlock,
                      nxt: KVCacheBlock | PrivateRun) -> None:
        prev.next_free = block
        block.prev_free = prev
        block.next_free = nxt
        nxt.prev_free = block
        self.num_free_blocks += 1

    def prepend_n(self, blocks: list[KVCacheBlock]) -> None:
        """Put ``blocks`` at the head as a group, in order: ``blocks[0]`` becomes the head."""
        for block in reversed(blocks):
            self.appendleft(block)

    def block_ids(self) -> list[int]:
        ids, block = [], self.head.next_free
        while block is not self.tail:
            if block is self.fresh:
                ids.extend(range(self._next_fresh, self._end_fresh))
            elif block.block_id < 0:
                ids.extend(b.block_id for b in block.blocks[block.start:])
            else:
                ids.append(block.block_id)
            block = block.next_free
        return ids

    def link_private_runs(self) -> None:
        """Link every block of the private runs one by one, in place of its run (queue order unchanged)."""
        block = self.head.next_free
        while block is not self.tail:
            nxt = block.next_free
            if block.block_id < 0 and block is not self.fresh:
                last = block.prev_free
                self._unlink(block)
                for b in block.blocks[block.start:]:
                    last.next_free = b
                    b.prev_free = last
                    last = b
                last.next_free = nxt
                nxt.prev_free = last
            block = nxt


def link_run(last: KVCacheBlock | PrivateRun, blocks: list[KVCacheBlock]) -> PrivateRun:
    """Link a ``PrivateRun`` of ``blocks`` after ``last``; returns it (the caller closes the chain)."""
    run = PrivateRun(blocks)
    last.next_free = run
    run.prev_free = last
    return run
