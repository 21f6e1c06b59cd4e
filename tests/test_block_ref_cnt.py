"""vLLM's block-pool invariant, ``ref_cnt == 0 <=> the block is in the free queue``, on the block objects
themselves at every point: allocation, prefix hits, freeing, eviction, preemption and the private runs
(``twin.core.free_block_queue.PrivateRun``) that the simulation's fast path frees and pops."""

from __future__ import annotations

import pytest

from core_helpers import block_ids, check_free_iff_unreferenced, check_pool_invariants, free_ids, make_sched, req
from twin.core.block_pool import BlockPool
from twin.core.free_block_queue import PrivateRun
from twin.core.kv_cache_manager import KVCacheManager
from twin.core.request import Request, RequestStatus


def admit(kv: KVCacheManager, r: Request) -> list[int]:
    """Look the prompt up, allocate the rest of it, mark it computed; the ids of the hit blocks."""
    hit, num_hit = kv.get_computed_blocks(r)
    assert kv.allocate_slots(r, r.num_tokens - num_hit, num_hit, hit) is not None
    r.num_computed_tokens = r.num_tokens
    return [b.block_id for b in hit]


def finish(kv: KVCacheManager, r: Request) -> None:
    r.status = RequestStatus.FINISHED_STOPPED
    kv.free(r)


def queue_nodes(pool: BlockPool) -> list[str]:
    queue, names, node = pool.free_block_queue, [], pool.free_block_queue.head.next_free
    while node is not queue.tail:
        names.append("fresh" if node is queue.fresh else type(node).__name__)
        node = node.next_free
    return names


def test_allocation_prefix_hits_freeing_and_eviction():
    # block size 4, blocks 1..7 usable (0 is the null block); 8 shared system-prompt tokens, then 4 of each
    # request's own: three full blocks each
    kv = KVCacheManager(8, 4)
    pool = kv.block_pool
    refs = lambda: [b.ref_cnt for b in pool.blocks]   # noqa: E731
    a, b = req("a", 12, prefix=("sys", 8)), req("b", 12, prefix=("sys", 8))
    assert admit(kv, a) == []
    assert block_ids(kv, "a") == [1, 2, 3] and refs() == [0, 1, 1, 1, 0, 0, 0, 0]
    check_pool_invariants(kv)
    assert admit(kv, b) == [1, 2]                       # a prefix hit on blocks in use: one more reference
    assert block_ids(kv, "b") == [1, 2, 4] and refs() == [0, 2, 2, 1, 1, 0, 0, 0]
    assert free_ids(kv) == [5, 6, 7]
    check_pool_invariants(kv)
    finish(kv, a)                                       # 3 reaches 0 and joins the queue; 1 and 2 stay held
    assert refs() == [0, 1, 1, 0, 1, 0, 0, 0] and free_ids(kv) == [5, 6, 7, 3]
    check_pool_invariants(kv)
    finish(kv, b)                                       # last block first
    assert refs() == [0] * 8 and free_ids(kv) == [5, 6, 7, 3, 4, 2, 1]
    check_pool_invariants(kv)
    c = req("c", 12, prefix=("sys", 8))
    assert admit(kv, c) == [1, 2]                       # a hit on idle blocks takes them out of the queue
    assert block_ids(kv, "c") == [1, 2, 5] and refs() == [0, 1, 1, 0, 0, 1, 0, 0]
    assert free_ids(kv) == [6, 7, 3, 4]
    check_pool_invariants(kv)
    d = req("d", 16)
    assert admit(kv, d) == []                           # pops 6 7 and evicts a's and b's own cached blocks
    assert block_ids(kv, "d") == [6, 7, 3, 4] and pool.num_evictions == 2
    assert refs() == [0, 1, 1, 1, 1, 1, 1, 1] and free_ids(kv) == [] and pool.get_num_free_blocks() == 0
    check_pool_invariants(kv)


def test_a_private_run_holds_free_blocks_from_its_free_to_its_last_pop():
    # blocks 1..7 usable; 8 shared tokens (blocks 1 2), then 10 of the request's own: 3 4 full and private, 5
    kv = KVCacheManager(8, 4)
    pool = kv.block_pool
    r = Request("a", 0.0, 18, 3, prompt_segments=[("sys", 8), ("u-a", 10)], private_from_token=8)
    admit(kv, r)
    held = kv.get_blocks("a")
    assert block_ids(kv, "a") == [1, 2, 3, 4, 5]
    assert [(x.ref_cnt, x.block_hash is None) for x in held] == [(1, False)] * 2 + [(1, True)] * 3
    check_pool_invariants(kv)
    finish(kv, r)                                       # 5, then the run 4 3, then 2 1, after 6 7 (never used)
    assert queue_nodes(pool) == ["fresh", "KVCacheBlock", "PrivateRun", "KVCacheBlock", "KVCacheBlock"]
    assert free_ids(kv) == [6, 7, 5, 4, 3, 2, 1]
    assert [(x.block_id, x.ref_cnt) for x in held] == [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]
    assert [x.block_hash for x in held[2:]] == [None] * 3       # 3 4: their PRIVATE_HASH is the run's
    check_pool_invariants(kv)
    got = pool.get_new_blocks(4)                        # 6 7 5, then the run's first block: the run is split
    assert [x.block_id for x in got] == [6, 7, 5, 4] and pool.num_evictions == 1
    assert [(x.ref_cnt, x.block_hash) for x in got] == [(1, None)] * 4
    assert (held[2].ref_cnt, held[2].block_hash) == (0, None)
    assert queue_nodes(pool) == ["PrivateRun", "KVCacheBlock", "KVCacheBlock"] and free_ids(kv) == [3, 2, 1]
    check_free_iff_unreferenced(pool)
    got += pool.get_new_blocks(2)                       # the run's last block (evicted), then 2 (evicted)
    assert [x.block_id for x in got[4:]] == [3, 2] and pool.num_evictions == 3
    assert queue_nodes(pool) == ["KVCacheBlock"] and free_ids(kv) == [1]
    assert [x.ref_cnt for x in pool.blocks] == [0, 0, 1, 1, 1, 1, 1, 1]
    check_free_iff_unreferenced(pool)
    pool.free_blocks(got)                               # all unhashed now: plain blocks, in order
    assert free_ids(kv) == [1, 6, 7, 5, 4, 3, 2] and [x.ref_cnt for x in pool.blocks] == [0] * 8
    check_free_iff_unreferenced(pool)


def test_preemption_and_private_runs_through_the_scheduler():
    # usable 1..6; a and b: 40 prompt tokens (3 blocks) each, all their own (private from token 0)
    s = make_sched(num_gpu_blocks=7)
    kv = s.kv_cache_manager
    s.add_request(req("a", 40, out=20, private_from_token=0))
    s.add_request(req("b", 40, out=20, private_from_token=0))
    preempted_at, nodes_seen = [], set()
    for n in range(1, 40):
        out = s.schedule()
        check_pool_invariants(kv)
        if out.preempted:
            preempted_at.append((n, [r.request_id for r in out.preempted], block_ids(s, "a"), free_ids(s)))
        s.update_from_output(out)
        check_pool_invariants(kv)
        nodes_seen.update(queue_nodes(kv.block_pool))
        if not s.running and not s.waiting:
            break
    # b, newest, is preempted when a needs a 4th block; its blocks (their real hashes registered, as a
    # preempted request will look them up) are freed last first and a pops 6
    assert preempted_at == [(10, ["b"], [1, 2, 3, 6], [5, 4])]
    # a finishes at step 20; b resumes at 21 on its 2 full cached blocks and finishes at 31
    assert n == 31 and "PrivateRun" in nodes_seen        # each finished request frees its own blocks as a run
    assert [x.ref_cnt for x in kv.block_pool.blocks] == [0] * 7
    check_pool_invariants(kv)


def test_the_fast_path_keeps_the_invariant_at_every_pool_operation(monkeypatch):
    """The simulation's fast path (the decode cohort pops blocks for many requests at once and frees finished
    requests' private blocks as runs) with preemptions and prefix hits: the invariant after every pop, hit and
    free of every replica's pool."""
    from test_engine import MIXED, _run

    seen = {"calls": 0, "runs": 0, "run evictions": 0}
    for name in ("get_new_blocks", "touch", "free_blocks"):
        original = getattr(BlockPool, name)

        def checked(self, *args, _original=original, **kwargs):
            runs_before = queue_nodes(self).count("PrivateRun")
            result = _original(self, *args, **kwargs)
            check_free_iff_unreferenced(self)
            seen["calls"] += 1
            runs = queue_nodes(self).count("PrivateRun")
            seen["runs"] = max(seen["runs"], runs)
            seen["run evictions"] += runs < runs_before
            return result

        monkeypatch.setattr(BlockPool, name, checked)
    data = {**MIXED, "workload": {**MIXED["workload"], "num_requests": 120},
            "server": {**MIXED["server"], "num_gpu_blocks_override": 200}}
    result = _run(data, fast_path=True, private_blocks=True)
    assert result.num_preemptions > 0 and result.prefix_cache_hit_tokens > 0
    assert seen["calls"] > 1000 and seen["runs"] > 1 and seen["run evictions"] > 0, seen
