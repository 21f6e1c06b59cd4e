"""BlockPool and FreeBlockQueue: exact block ids, ref counts, free-queue order, eviction and duplicates."""

from __future__ import annotations

import pytest

from twin.core.block_pool import BlockPool
from twin.core.free_block_queue import FreeBlockQueue, KVCacheBlock


def free_ids(pool: BlockPool) -> list[int]:
    return pool.free_block_queue.block_ids()


# ---- free queue ---------------------------------------------------------------------------------------
def test_free_queue_order_and_ops():
    blocks = [KVCacheBlock(i) for i in range(5)]
    q = FreeBlockQueue(blocks)
    assert q.block_ids() == [0, 1, 2, 3, 4]
    assert q.num_free_blocks == 5
    assert q.popleft() is blocks[0]
    q.remove(blocks[2])
    assert q.block_ids() == [1, 3, 4]
    q.append(blocks[0])
    q.appendleft(blocks[2])
    assert q.block_ids() == [2, 1, 3, 4, 0]
    assert q.num_free_blocks == 5
    assert blocks[2].prev_free is not None and blocks[0].next_free is not None


def test_free_queue_errors():
    blocks = [KVCacheBlock(i) for i in range(2)]
    q = FreeBlockQueue(blocks)
    b = q.popleft()
    with pytest.raises(ValueError):
        q.remove(b)  # not in the queue any more
    q.popleft()
    with pytest.raises(ValueError):
        q.popleft()
    assert q.num_free_blocks == 0
    assert q.block_ids() == []


# ---- the null block -----------------------------------------------------------------------------------
def test_null_block_reserved():
    pool = BlockPool(11)
    assert pool.null_block is pool.blocks[0]
    assert pool.null_block.is_null
    assert pool.num_usable_blocks == 10
    assert pool.get_num_free_blocks() == 10
    assert free_ids(pool) == list(range(1, 11))
    got = pool.get_new_blocks(10)
    assert [b.block_id for b in got] == list(range(1, 11))
    assert 0 not in [b.block_id for b in got]
    with pytest.raises(ValueError):
        pool.get_new_blocks(1)


def test_no_null_block():
    pool = BlockPool(4, reserve_null_block=False)
    assert pool.null_block is None
    assert pool.num_usable_blocks == 4
    assert free_ids(pool) == [0, 1, 2, 3]


def test_too_few_blocks():
    with pytest.raises(ValueError):
        BlockPool(1)


# ---- allocate / free ----------------------------------------------------------------------------------
def test_allocate_pops_from_head_in_id_order():
    pool = BlockPool(11)
    a = pool.get_new_blocks(3)
    b = pool.get_new_blocks(2)
    assert [x.block_id for x in a] == [1, 2, 3]
    assert [x.block_id for x in b] == [4, 5]
    assert all(x.ref_cnt == 1 for x in a + b)
    assert free_ids(pool) == [6, 7, 8, 9, 10]
    assert pool.get_num_free_blocks() == 5


def test_allocate_more_than_free_raises_and_takes_nothing():
    pool = BlockPool(5)
    pool.get_new_blocks(2)
    with pytest.raises(ValueError):
        pool.get_new_blocks(3)
    assert free_ids(pool) == [3, 4]


def test_free_in_given_order_to_tail():
    pool = BlockPool(11)
    a = pool.get_new_blocks(4)  # 1 2 3 4
    pool.free_blocks(reversed(a))
    assert free_ids(pool) == [5, 6, 7, 8, 9, 10, 4, 3, 2, 1]
    assert all(x.ref_cnt == 0 for x in a)
    # the next allocation takes never-used blocks first (LRU end = head)
    assert [x.block_id for x in pool.get_new_blocks(7)] == [5, 6, 7, 8, 9, 10, 4]


def test_shared_block_freed_only_at_zero():
    pool = BlockPool(6)
    a = pool.get_new_blocks(2)  # 1, 2
    pool.touch([a[0]])  # a second holder of block 1
    assert [x.ref_cnt for x in a] == [2, 1]
    pool.free_blocks(reversed(a))
    assert [x.ref_cnt for x in a] == [1, 0]
    assert free_ids(pool) == [3, 4, 5, 2]
    pool.free_blocks([a[0]])
    assert a[0].ref_cnt == 0
    assert free_ids(pool) == [3, 4, 5, 2, 1]


def test_touch_removes_idle_hit_from_queue():
    pool = BlockPool(6)
    a = pool.get_new_blocks(3)  # 1, 2, 3
    pool.cache_block(a[1], 111)
    pool.free_blocks(reversed(a))
    assert free_ids(pool) == [4, 5, 3, 2, 1]
    hit = pool.get_cached_block(111)
    assert hit is a[1]
    pool.touch([hit])
    assert hit.ref_cnt == 1
    assert free_ids(pool) == [4, 5, 3, 1]
    assert pool.get_num_free_blocks() == 4
    # touching a block already in use only adds a reference
    pool.touch([hit])
    assert hit.ref_cnt == 2
    assert free_ids(pool) == [4, 5, 3, 1]


def test_usage():
    pool = BlockPool(11)
    assert pool.get_usage() == 0.0
    a = pool.get_new_blocks(4)
    assert pool.get_usage() == pytest.approx(0.4)
    pool.cache_block(a[0], 7)
    pool.free_blocks(reversed(a))
    # a cached block with ref_cnt 0 counts as free
    assert pool.get_usage() == 0.0
    pool.get_new_blocks(10)
    assert pool.get_usage() == 1.0


# ---- the prefix cache ---------------------------------------------------------------------------------
def test_eviction_when_popped():
    pool = BlockPool(4)  # usable 1, 2, 3
    a = pool.get_new_blocks(3)
    for blk, h in zip(a, (10, 20, 30)):
        pool.cache_block(blk, h)
    pool.free_blocks(reversed(a))  # queue: 3, 2, 1
    assert free_ids(pool) == [3, 2, 1]
    assert pool.num_evictions == 0
    [b] = pool.get_new_blocks(1)
    assert b.block_id == 3
    assert b.block_hash is None
    assert pool.get_cached_block(30) is None
    assert pool.get_cached_block(20) is a[1]
    assert pool.get_cached_block(10) is a[0]
    assert pool.num_evictions == 1
    assert set(pool.cached_block_hash_to_block) == {10, 20}


def test_unhashed_pop_is_not_an_eviction():
    pool = BlockPool(4)
    a = pool.get_new_blocks(3)
    pool.free_blocks(a)
    pool.get_new_blocks(3)
    assert pool.num_evictions == 0


def test_duplicate_hash_eviction_keeps_other_findable():
    pool = BlockPool(6)
    a = pool.get_new_blocks(2)  # 1, 2: the same content computed twice (no dedup in V1)
    pool.cache_block(a[0], 42)
    pool.cache_block(a[1], 42)
    assert pool.get_cached_block(42) is a[0]
    assert pool._duplicates[42] == [a[1]]
    pool.free_blocks([a[0], a[1]])  # queue: 3 4 5 1 2
    pool.get_new_blocks(4)  # 3, 4, 5, then 1 (evicted: the map falls back to block 2)
    assert a[0].block_hash is None
    assert pool.get_cached_block(42) is a[1]
    assert 42 not in pool._duplicates
    assert pool.num_evictions == 1
    pool.get_new_blocks(1)  # block 2: the last copy goes
    assert pool.get_cached_block(42) is None
    assert pool.num_evictions == 2


def test_duplicate_evicted_first_keeps_primary():
    pool = BlockPool(6)
    a = pool.get_new_blocks(2)  # 1, 2
    pool.cache_block(a[0], 42)
    pool.cache_block(a[1], 42)
    pool.free_blocks([a[1], a[0]])  # queue: 3 4 5 2 1
    pool.get_new_blocks(4)  # 3 4 5 2: the duplicate is evicted
    assert a[1].block_hash is None
    assert pool.get_cached_block(42) is a[0]
    assert 42 not in pool._duplicates
    assert pool.num_evictions == 1


def test_three_copies():
    pool = BlockPool(5)
    a = pool.get_new_blocks(3)  # 1, 2, 3
    for blk in a:
        pool.cache_block(blk, 9)
    pool.free_blocks([a[1], a[0], a[2]])  # queue: 4 2 1 3
    pool.get_new_blocks(2)  # 4, then 2 (a duplicate)
    assert pool.get_cached_block(9) is a[0]
    assert pool._duplicates[9] == [a[2]]
    pool.get_new_blocks(1)  # 1 (the primary): falls back to 3
    assert pool.get_cached_block(9) is a[2]
    assert 9 not in pool._duplicates
    assert pool.num_evictions == 2


def test_free_unhashed_to_head_knob():
    pool = BlockPool(6, free_unhashed_to_head=True)
    a = pool.get_new_blocks(3)  # 1 2 3
    pool.cache_block(a[0], 5)
    # freed in the order 3 2 1: the unhashed 3 and 2 go to the head as a group, in that order (vLLM's
    # prepend_n); the hashed 1 goes to the tail
    pool.free_blocks(reversed(a))
    assert free_ids(pool) == [3, 2, 4, 5, 1]


def test_reset_prefix_cache():
    pool = BlockPool(4)
    a = pool.get_new_blocks(2)
    pool.cache_block(a[0], 1)
    assert not pool.reset_prefix_cache()  # blocks in use
    assert pool.get_cached_block(1) is a[0]
    pool.free_blocks(a)
    assert pool.reset_prefix_cache()
    assert pool.get_cached_block(1) is None
    assert a[0].block_hash is None
    assert pool.cached_block_hash_to_block == {}


def test_never_used_blocks_are_made_on_first_use_in_id_order():
    pool = BlockPool(10_000_000, reserve_null_block=True, free_unhashed_to_head=True)
    assert len(pool._blocks) == 1 and pool.get_num_free_blocks() == 9_999_999  # only the null block exists
    a = pool.get_new_blocks(3)
    assert [b.block_id for b in a] == [1, 2, 3] and len(pool._blocks) == 4
    pool.free_blocks([a[1]])                      # unhashed, to the head: before the never-used ids
    a[2].block_hash = 7
    pool.cached_block_hash_to_block[7] = a[2]
    pool.free_blocks([a[2]])                      # hashed: to the tail, after them
    ids = pool.free_block_queue.block_ids()
    assert ids[:3] == [2, 4, 5] and ids[-2:] == [9_999_999, 3] and len(ids) == pool.get_num_free_blocks()
    assert [b.block_id for b in pool.get_new_blocks(3)] == [2, 4, 5]


def test_the_last_never_used_block_leaves_the_queue():
    pool = BlockPool(4, reserve_null_block=False)
    blocks = pool.get_new_blocks(4)
    assert [b.block_id for b in blocks] == [0, 1, 2, 3] and pool.get_num_free_blocks() == 0
    assert pool.free_block_queue.block_ids() == []
    pool.free_blocks(reversed(blocks))
    assert pool.free_block_queue.block_ids() == [3, 2, 1, 0] and pool.blocks == blocks


def test_get_new_blocks_spans_freed_then_never_used_then_freed():
    pool = BlockPool(10, free_unhashed_to_head=False)
    a = pool.get_new_blocks(3)                     # 1 2 3; never-used left: 4 .. 9
    pool.cache_block(a[0], 5)
    pool.free_blocks(reversed(a))                  # to the tail, behind the never-used range: 3 2 1
    b = pool.get_new_blocks(2)                     # 4 5 from the range
    pool.free_blocks([b[1]])                       # 5 to the tail
    q = pool.free_block_queue
    assert q.block_ids() == [6, 7, 8, 9, 3, 2, 1, 5] and q.num_free_blocks == 8
    got = pool.get_new_blocks(7)
    assert [x.block_id for x in got] == [6, 7, 8, 9, 3, 2, 1]
    assert all(x.ref_cnt == 1 for x in got) and q.block_ids() == [5] and q.num_free_blocks == 1
    assert got[-1] is a[0] and a[0].block_hash is None and pool.num_evictions == 1 and pool.get_cached_block(5) is None
    with pytest.raises(ValueError):
        pool.get_new_blocks(2)
    assert q.block_ids() == [5] and q.num_free_blocks == 1


def test_free_blocks_links_in_order_and_counts():
    pool = BlockPool(6)
    a = pool.get_new_blocks(5)                     # 1 .. 5: the range is used up
    q = pool.free_block_queue
    assert q.block_ids() == [] and q.num_free_blocks == 0
    a[1].ref_cnt += 1                              # shared: stays held after one free
    pool.free_blocks([a[3], a[1], a[0]])
    assert q.block_ids() == [4, 1] and q.num_free_blocks == 2 and a[1].ref_cnt == 1
    pool.free_blocks([a[4], a[1]])
    assert q.block_ids() == [4, 1, 5, 2] and q.num_free_blocks == 4
    assert [x.block_id for x in pool.get_new_blocks(4)] == [4, 1, 5, 2] and q.num_free_blocks == 0


def test_cache_blocks_skips_registered_blocks_and_records_duplicates():
    pool = BlockPool(6)
    a = pool.get_new_blocks(3)                     # 1 2 3
    pool.cache_block(a[0], 10)
    pool.cache_blocks(a, [99, 20, 10])             # block 1 keeps 10; block 3 duplicates it
    assert [b.block_hash for b in a] == [10, 20, 10]
    assert pool.cached_block_hash_to_block == {10: a[0], 20: a[1]} and pool._duplicates == {10: [a[2]]}


# ---- private runs --------------------------------------------------------------------------------------
def _private_pool(num_blocks: int = 10) -> tuple[BlockPool, list[KVCacheBlock]]:
    """A pool (no null block, unhashed frees to the head) whose every block is taken and marked private."""
    pool = BlockPool(num_blocks, reserve_null_block=False, free_unhashed_to_head=True)
    blocks = pool.get_new_blocks(num_blocks)
    pool.mark_private(blocks)
    return pool, blocks


def test_private_blocks_freed_together_are_one_node_in_the_same_order():
    from twin.core.free_block_queue import PRIVATE_HASH, PrivateRun

    pool, b = _private_pool()
    pool.cache_block(b[5], 555)
    b[9].block_hash = None                       # a request's last, partial block
    # freed last block first, as a request frees: 9 to the head (unhashed), 8 7 6 one run, 5 (hashed) alone,
    # 4 3 another run
    pool.free_blocks([b[9], b[8], b[7], b[6], b[5], b[4], b[3]])
    queue = pool.free_block_queue
    assert free_ids(pool) == [9, 8, 7, 6, 5, 4, 3]
    assert queue.num_free_blocks == 7
    nodes, node = [], queue.head.next_free
    while node is not queue.tail:
        nodes.append(node)
        node = node.next_free
    assert [type(n).__name__ for n in nodes] == ["KVCacheBlock", "PrivateRun", "KVCacheBlock", "PrivateRun"]
    assert isinstance(nodes[1], PrivateRun) and nodes[1].blocks == [b[8], b[7], b[6]]
    # a run's blocks carry ref count 0 like any free block (vLLM's ref_cnt == 0 <=> free); their PRIVATE_HASH is
    # the run's
    assert all(x.block_hash is None and x.ref_cnt == 0 for x in (b[8], b[7], b[6], b[4], b[3]))
    # popped across the nodes: a run split, then emptied; every private block popped is one eviction
    assert [x.block_id for x in pool.get_new_blocks(3)] == [9, 8, 7]
    assert pool.num_evictions == 2 and free_ids(pool) == [6, 5, 4, 3] and queue.num_free_blocks == 4
    assert [x.block_id for x in pool.get_new_blocks(3)] == [6, 5, 4]
    assert pool.num_evictions == 5 and 555 not in pool.cached_block_hash_to_block
    assert all(x.ref_cnt == 1 and x.block_hash is None for x in (b[9], b[8], b[7], b[6], b[5], b[4]))
    assert b[3].ref_cnt == 0 and b[3].block_hash is None              # still in the queue, in a run
    assert free_ids(pool) == [3] and queue.num_free_blocks == 1
    assert queue.popleft() is b[3] and b[3].block_hash is PRIVATE_HASH   # its queue state: eviction is the pool's
    assert b[3].ref_cnt == 0
    assert free_ids(pool) == [] and queue.num_free_blocks == 0


def test_private_run_blocks_cannot_be_removed_from_the_middle():
    pool, b = _private_pool(4)
    pool.free_blocks([b[1], b[0]])
    with pytest.raises(ValueError, match="not in the free queue"):
        pool.free_block_queue.remove(b[0])     # nobody can look a private block up, so nobody may take it


def test_reset_prefix_cache_links_private_runs_block_by_block():
    pool, b = _private_pool(6)
    pool.free_blocks([b[5], b[4], b[3]])
    pool.free_blocks([b[0], b[1], b[2]])
    assert pool.reset_prefix_cache()
    assert free_ids(pool) == [5, 4, 3, 0, 1, 2]
    assert all(x.block_hash is None and x.prev_free is not None for x in b)
    assert [x.block_id for x in pool.get_new_blocks(6)] == [5, 4, 3, 0, 1, 2] and pool.num_evictions == 0


def test_inspecting_the_pool_changes_nothing_and_shows_private_run_blocks_free():
    from twin.core.free_block_queue import PRIVATE_HASH, PrivateRun

    pool, b = _private_pool(6)
    pool.free_blocks([b[5], b[4], b[3]])
    queue = pool.free_block_queue
    run = queue.head.next_free
    assert isinstance(run, PrivateRun)
    assert [(x.ref_cnt, x.block_hash) for x in pool.blocks] == [(1, PRIVATE_HASH)] * 3 + [(0, None)] * 3
    assert queue.head.next_free is run and b[5].next_free is None       # still one node
    assert free_ids(pool) == [5, 4, 3] and queue.num_free_blocks == 3
    assert [x.block_id for x in pool.get_new_blocks(2)] == [5, 4] and pool.num_evictions == 2
    assert [(x.ref_cnt, x.block_hash) for x in (b[5], b[4], b[3])] == [(1, None), (1, None), (0, None)]


def test_a_private_run_given_to_free_blocks_joins_between_the_other_blocks_as_free_blocks():
    from twin.core.free_block_queue import PrivateRun

    pool = BlockPool(8, reserve_null_block=False, free_unhashed_to_head=True)
    b = pool.get_new_blocks(8)
    pool.cache_blocks([b[0], b[1]], [10, 11])
    # a request's blocks freed last first: 7 (partial) to the head, 6 5 4 3 2 its private run, 1 0 hashed
    assert [x.ref_cnt for x in b] == [1] * 8 and b[2].block_hash is None
    pool.free_blocks([b[7]], [b[6], b[5], b[4], b[3], b[2]], [b[1], b[0]])
    queue = pool.free_block_queue
    assert free_ids(pool) == [7, 6, 5, 4, 3, 2, 1, 0] and queue.num_free_blocks == 8
    run = queue.head.next_free.next_free
    assert isinstance(run, PrivateRun) and run.blocks == [b[6], b[5], b[4], b[3], b[2]]
    assert all(x.ref_cnt == 0 and x.block_hash is None for x in run.blocks)   # free; PRIVATE_HASH is the run's
    assert b[0].ref_cnt == b[1].ref_cnt == b[7].ref_cnt == 0
    assert [x.block_id for x in pool.get_new_blocks(7)] == [7, 6, 5, 4, 3, 2, 1]
    assert pool.num_evictions == 6 and pool.cached_block_hash_to_block == {10: b[0]}
