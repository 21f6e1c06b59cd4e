"""KVCacheManager: prefix lookup, slot allocation, registration and release, driven directly.

The golden test is the vLLM prefix-caching design doc's worked example, up to "Time 7".
"""

from __future__ import annotations

import pytest

from core_helpers import block_ids, check_pool_invariants, free_ids, make_sched, ref_cnts, req, step
from twin.core.kv_cache_manager import KVCacheManager
from twin.core.request import Request, output_segment_key


def kv_ids(kv: KVCacheManager, rid) -> list[int]:
    return kv.get_block_ids(rid)


def admit(kv: KVCacheManager, r: Request, n: int | None = None):
    """Look up the prefix, allocate the rest of the prompt (or ``n`` tokens), mark them computed."""
    hit, num_hit = kv.get_computed_blocks(r)
    if n is None:
        n = r.num_tokens - num_hit
    new = kv.allocate_slots(r, n, num_hit, hit)
    assert new is not None
    r.num_computed_tokens = num_hit + n
    return hit, num_hit, new


# ---- the design doc's example ---------------------------------------------------------------------------
def test_design_doc_time_1_to_7():
    kv = KVCacheManager(10, 4, reserve_null_block=False)
    pool = kv.block_pool
    base = list(range(1000, 1015))  # request 0's 15 prompt tokens

    # Time 1: request 0, 15 prompt tokens -> blocks 0 1 2 3; the three full ones cached
    r0 = Request(0, 0.0, 15, 100, prompt_token_ids=base)
    hit, num_hit, new = admit(kv, r0)
    assert (hit, num_hit) == ([], 0)
    assert [b.block_id for b in new] == [0, 1, 2, 3]
    assert kv_ids(kv, 0) == [0, 1, 2, 3]
    assert [pool.blocks[i].block_hash is not None for i in range(4)] == [True, True, True, False]
    assert free_ids(kv) == [4, 5, 6, 7, 8, 9]
    r0.append_output_tokens(1, [2000])  # the prefill samples token 16

    # Time 2: decode token 16: block 3 becomes full and is cached at schedule time
    new = kv.allocate_slots(r0, 1)
    assert new == []
    r0.num_computed_tokens += 1
    assert pool.blocks[3].block_hash is not None
    r0.append_output_tokens(1, [2001])

    # Time 3: token 17 needs a new block: block 4
    new = kv.allocate_slots(r0, 1)
    assert [b.block_id for b in new] == [4]
    r0.num_computed_tokens += 1
    r0.append_output_tokens(1, [2002])
    assert kv_ids(kv, 0) == [0, 1, 2, 3, 4]
    assert pool.blocks[4].block_hash is None
    assert free_ids(kv) == [5, 6, 7, 8, 9]

    # Time 4: request 1, 14 prompt tokens, the first 10 equal request 0's -> hits 0 1, gets 5 6
    r1 = Request(1, 0.0, 14, 100, prompt_token_ids=base[:10] + list(range(3000, 3004)))
    hit, num_hit, new = admit(kv, r1)
    assert [b.block_id for b in hit] == [0, 1]
    assert num_hit == 8
    assert [b.block_id for b in new] == [5, 6]
    assert kv_ids(kv, 1) == [0, 1, 5, 6]
    assert ref_cnts(kv, [0, 1, 2, 3, 4, 5, 6]) == [2, 2, 1, 1, 1, 1, 1]
    assert pool.blocks[5].block_hash is not None and pool.blocks[6].block_hash is None
    assert free_ids(kv) == [7, 8, 9]

    # Time 5: request 0 finishes: its blocks go to the tail in reverse order (0 and 1 still held)
    kv.free(r0)
    assert free_ids(kv) == [7, 8, 9, 4, 3, 2]
    assert ref_cnts(kv, [0, 1]) == [1, 1]

    # Time 6: request 1 finishes
    kv.free(r1)
    assert free_ids(kv) == [7, 8, 9, 4, 3, 2, 6, 5, 1, 0]
    assert all(b.ref_cnt == 0 for b in pool.blocks)

    # Time 7: request 2, 29 prompt tokens, the first 12 equal request 0's -> hits 0 1 2 and takes
    # 7 8 9 4 3 from the head; block 3 (cached) is evicted
    h3 = pool.blocks[3].block_hash
    evictions = pool.num_evictions
    r2 = Request(2, 0.0, 29, 100, prompt_token_ids=base[:12] + list(range(4000, 4017)))
    hit, num_hit, new = admit(kv, r2)
    assert [b.block_id for b in hit] == [0, 1, 2]
    assert num_hit == 12
    assert [b.block_id for b in new] == [7, 8, 9, 4, 3]
    assert kv_ids(kv, 2) == [0, 1, 2, 7, 8, 9, 4, 3]
    assert pool.num_evictions == evictions + 1
    assert pool.get_cached_block(h3) is None
    assert free_ids(kv) == [6, 5]
    assert pool.blocks[5].block_hash is not None  # request 1's block survives at the queue tail
    check_pool_invariants(kv)


# ---- lookup ---------------------------------------------------------------------------------------------
def test_prefix_hit_capped_at_num_tokens_minus_one():
    kv = KVCacheManager(11, 16)
    a = req("a", 32, prefix=("sys", 32))
    admit(kv, a)
    assert len(kv.block_pool.cached_block_hash_to_block) == 2
    # the same 32 tokens: at most 31 can hit -> one block
    b = req("b", 32, prefix=("sys", 32))
    hit, num_hit = kv.get_computed_blocks(b)
    assert [x.block_id for x in hit] == [1]
    assert num_hit == 16
    # one more token and both blocks hit
    c = req("c", 33, prefix=("sys", 32))
    hit, num_hit = kv.get_computed_blocks(c)
    assert [x.block_id for x in hit] == [1, 2]
    assert num_hit == 32


def test_lookup_stops_at_first_miss():
    kv = KVCacheManager(11, 16)
    a = req("a", 48, segments=[("s", 16), ("t", 32)])
    admit(kv, a)
    b = req("b", 49, segments=[("x", 16), ("t", 33)])  # first block differs: nothing after it can hit
    assert kv.get_computed_blocks(b) == ([], 0)


def test_segment_identity_shares_block_aligned_prefix():
    kv = KVCacheManager(11, 16)
    a = req("a", 40, segments=[("A", 20), ("B", 20)])
    admit(kv, a)
    # shares A[0:20] and B[0:12] = 32 tokens -> 2 blocks
    b = req("b", 50, segments=[("A", 20), ("B", 12), ("C", 18)])
    hit, num_hit = kv.get_computed_blocks(b)
    assert [x.block_id for x in hit] == [1, 2]
    # diverges inside the second block
    c = req("c", 50, segments=[("A", 20), ("C", 30)])
    hit, num_hit = kv.get_computed_blocks(c)
    assert [x.block_id for x in hit] == [1]


def test_lookup_counters():
    kv = KVCacheManager(11, 16)
    admit(kv, req("a", 40, prefix=("s", 32)))
    kv.get_computed_blocks(req("b", 40, prefix=("s", 32)))
    assert kv.num_lookups == 2
    assert kv.num_query_tokens == 80
    assert kv.num_hit_tokens == 32
    assert kv.hit_rate == pytest.approx(32 / 80)


def test_caching_off():
    kv = KVCacheManager(11, 16, enable_caching=False)
    admit(kv, req("a", 40, prefix=("s", 32)))
    assert kv.block_pool.cached_block_hash_to_block == {}
    assert kv.get_computed_blocks(req("b", 40, prefix=("s", 32))) == ([], 0)
    assert kv.hit_rate == 0.0
    kv.record_prefix_cache_stats(req("c", 40), 0)
    assert (kv.num_lookups, kv.num_query_tokens, kv.num_hit_tokens) == (0, 0, 0)


@pytest.mark.parametrize("stats_at_admission", [False, True])
def test_caching_off_scheduler_counts_no_queries(stats_at_admission):
    # vLLM's get_computed_blocks returns before recording stats when caching is off: no queries, no hits
    sched = make_sched(enable_prefix_caching=False, prefix_cache_stats_at_admission=stats_at_admission)
    for rid in ("a", "b"):
        sched.add_request(req(rid, 40, prefix=("s", 32)))
    out, _ = step(sched)
    assert ([r.request_id for r in out.requests], out.num_new_tokens) == (["a", "b"], [40, 40])
    kv = sched.kv_cache_manager
    assert (kv.num_lookups, kv.num_query_tokens, kv.num_hit_tokens) == (0, 0, 0)


# ---- allocation -----------------------------------------------------------------------------------------
def test_allocate_exact_blocks_and_growth():
    kv = KVCacheManager(11, 16)
    r = req("r", 20)
    new = kv.allocate_slots(r, 20)
    assert [b.block_id for b in new] == [1, 2]
    r.num_computed_tokens = 20
    assert kv.allocate_slots(r, 12) == []  # 32 slots fit in two blocks
    r.num_computed_tokens = 32
    assert [b.block_id for b in kv.allocate_slots(r, 1)] == [3]
    assert kv_ids(kv, "r") == [1, 2, 3]


def test_allocate_failure_takes_nothing():
    kv = KVCacheManager(5, 16)  # usable 1..4
    a = req("a", 33, prefix=("s", 32))
    admit(kv, a)  # 1 2 3, blocks 1 2 cached
    kv.free(a)
    assert free_ids(kv) == [4, 3, 2, 1]
    x = req("x", 16)
    admit(kv, x)  # takes block 4
    assert kv_ids(kv, "x") == [4]
    # 64 tokens, first 32 cached: 2 hit blocks (idle, in the free queue) + 2 new = 4 > 3 free
    b = req("b", 64, prefix=("s", 32))
    hit, num_hit = kv.get_computed_blocks(b)
    assert [blk.block_id for blk in hit] == [1, 2]
    assert kv.allocate_slots(b, 64 - num_hit, num_hit, hit) is None
    assert free_ids(kv) == [3, 2, 1]
    assert ref_cnts(kv, [1, 2, 3]) == [0, 0, 0]
    assert kv_ids(kv, "b") == []
    assert kv.block_pool.get_cached_block(hit[0].block_hash) is hit[0]
    # 48 tokens: 2 idle hits + 1 new = 3 fits exactly
    c = req("c", 48, prefix=("s", 32))
    hit, num_hit = kv.get_computed_blocks(c)
    new = kv.allocate_slots(c, 48 - num_hit, num_hit, hit)
    assert [blk.block_id for blk in new] == [3]
    assert kv_ids(kv, "c") == [1, 2, 3]
    assert free_ids(kv) == []
    check_pool_invariants(kv)


def test_hit_on_block_in_use_costs_no_free_block():
    kv = KVCacheManager(5, 16)  # usable 1..4
    a = req("a", 33, prefix=("s", 32))
    admit(kv, a)  # 1 2 3 held
    b = req("b", 48, prefix=("s", 32))
    hit, num_hit = kv.get_computed_blocks(b)
    new = kv.allocate_slots(b, 48 - num_hit, num_hit, hit)  # hits 1 2 (in use) + 1 new = 1 free block
    assert [blk.block_id for blk in new] == [4]
    assert kv_ids(kv, "b") == [1, 2, 4]
    assert ref_cnts(kv, [1, 2, 3, 4]) == [2, 2, 1, 1]


def test_reserve_blocks_watermark():
    kv = KVCacheManager(5, 16)
    r = req("r", 48)
    assert kv.allocate_slots(r, 48, reserve_blocks=2) is None
    assert free_ids(kv) == [1, 2, 3, 4]
    assert [b.block_id for b in kv.allocate_slots(r, 48, reserve_blocks=1)] == [1, 2, 3]


def test_lookahead_and_max_model_len_cap():
    kv = KVCacheManager(11, 4, max_model_len=20)
    r = req("r", 18)
    new = kv.allocate_slots(r, 18, num_lookahead_tokens=8)  # 26 slots capped at 20 -> 5 blocks
    assert [b.block_id for b in new] == [1, 2, 3, 4, 5]


def test_can_fit():
    kv = KVCacheManager(11, 16)
    assert kv.can_fit(160)
    assert not kv.can_fit(161)


def test_free_reverse_order_and_hashes_kept():
    kv = KVCacheManager(11, 16)
    r = req("r", 40)
    admit(kv, r)
    hashes = [kv.block_pool.blocks[i].block_hash for i in (1, 2, 3)]
    kv.free(r)
    assert free_ids(kv) == [4, 5, 6, 7, 8, 9, 10, 3, 2, 1]
    assert [kv.block_pool.blocks[i].block_hash for i in (1, 2, 3)] == hashes
    assert hashes[0] is not None and hashes[1] is not None and hashes[2] is None
    assert kv_ids(kv, "r") == []
    kv.free(r)  # freeing twice is a no-op
    assert len(free_ids(kv)) == 10


def test_draft_tokens_never_cached():
    kv = KVCacheManager(11, 4)
    r = req("r", 6, out=10)
    admit(kv, r)
    r.num_output_tokens = 1  # 7 tokens; computed 6
    r.num_spec_tokens = 3  # 10 tokens with spec: slots for 1 + 3 drafts
    new = kv.allocate_slots(r, 4)
    assert kv_ids(kv, "r") == [1, 2, 3]
    # only the real 7 tokens count for registration: one full block
    assert kv.num_cached_blocks["r"] == 1
    assert [kv.block_pool.blocks[i].block_hash is not None for i in (1, 2, 3)] == [True, False, False]
    assert [b.block_id for b in new] == [3]


def test_partial_chunk_registers_only_full_computed_blocks():
    kv = KVCacheManager(11, 16)
    r = req("r", 60)
    kv.allocate_slots(r, 20)
    assert kv.num_cached_blocks["r"] == 1
    r.num_computed_tokens = 20
    kv.allocate_slots(r, 20)
    assert kv.num_cached_blocks["r"] == 2
    assert kv_ids(kv, "r") == [1, 2, 3]


def test_duplicate_blocks_when_computed_twice():
    """Two requests with the same prompt admitted before either registered -> two copies (no dedup)."""
    kv = KVCacheManager(11, 16)
    a = req("a", 33, prefix=("s", 32))
    b = req("b", 33, prefix=("s", 32))
    ha, _ = kv.get_computed_blocks(a)
    hb, _ = kv.get_computed_blocks(b)
    assert ha == hb == []
    kv.allocate_slots(a, 33)
    kv.allocate_slots(b, 33)
    pool = kv.block_pool
    assert kv_ids(kv, "a") == [1, 2, 3] and kv_ids(kv, "b") == [4, 5, 6]
    assert pool.blocks[1].block_hash == pool.blocks[4].block_hash
    assert pool.get_cached_block(pool.blocks[1].block_hash) is pool.blocks[1]
    kv.free(a)
    kv.free(b)
    check_pool_invariants(kv)
    # evict a's copies (1 and 2 come after 7..10, 3): b's copies stay findable
    pool.get_new_blocks(7)  # 7 8 9 10 3 2 1
    c = req("c", 33, prefix=("s", 32))
    hit, num_hit = kv.get_computed_blocks(c)
    assert [x.block_id for x in hit] == [4, 5]
    assert pool.num_evictions == 2


# ---- through the scheduler -----------------------------------------------------------------------------
def test_hits_across_requests_in_same_batch():
    s = make_sched()
    s.add_request(req("a", 50, prefix=("sys", 48)))
    s.add_request(req("b", 50, prefix=("sys", 48)))
    out = s.schedule()
    assert [r.request_id for r in out.requests] == ["a", "b"]
    assert out.num_new_tokens == [50, 2]
    assert out.num_computed_before == [0, 48]
    assert block_ids(s, "a") == [1, 2, 3, 4]
    assert block_ids(s, "b") == [1, 2, 3, 5]
    assert ref_cnts(s, [1, 2, 3, 4, 5]) == [2, 2, 2, 1, 1]
    assert not s.waiting
    assert out.requests[1].num_cached_tokens == 48


def test_preempted_request_resumes_on_its_own_blocks():
    # usable 1..6; a: 40 tokens (3 blocks), b: 40 tokens (3 blocks): the pool is full
    s = make_sched(num_gpu_blocks=7)
    s.add_request(req("a", 40, out=20))
    s.add_request(req("b", 40, out=20))
    out, _ = step(s)
    assert block_ids(s, "a") == [1, 2, 3] and block_ids(s, "b") == [4, 5, 6]
    # decode until a needs a 4th block at token 49: b (newest) is preempted
    for _ in range(8):
        out, _ = step(s)
        assert not out.preempted
    assert s.running[0].num_computed_tokens == 48
    out = s.schedule()
    assert [r.request_id for r in out.preempted] == ["b"]
    assert block_ids(s, "a") == [1, 2, 3, 6]  # b's blocks were freed in reverse: 6 5 4 -> 6 popped
    assert free_ids(s) == [5, 4]
    s.update_from_output(out)
    # a finishes at 60 tokens (20 outputs) -> then b resumes and hits its cached blocks 4 5 (2 full blocks)
    while s.running:
        out, _ = step(s)
    assert s.waiting and [r.request_id for r in s.waiting] == ["b"]
    out = s.schedule()
    assert [r.request_id for r in out.requests] == ["b"]
    b = out.requests[0]
    # b had 40 prompt + 9 outputs = 49 tokens; its full blocks 4 and 5 (32 tokens) kept their hashes
    assert b.num_tokens == 49
    assert out.num_computed_before == [32]
    assert out.num_new_tokens == [17]
    assert block_ids(s, "b")[:2] == [4, 5]
    assert out.num_resumed_requests == 1


def test_multi_turn_hits_previous_output():
    s = make_sched(num_gpu_blocks=11)
    t1 = req("t1", 20, out=13, segments=[("sys", 20)])
    s.add_request(t1)
    while s.has_unfinished_requests():
        step(s)
    assert t1.num_output_tokens == 13
    # the next turn's prompt = previous prompt + previous output + new user text
    t2 = req("t2", 43, segments=[("sys", 20), (output_segment_key("t1"), 13), ("user2", 10)])
    s.add_request(t2)
    out = s.schedule()
    # t1 computed 20 + 12 tokens = 32: two full blocks were cached
    assert out.num_computed_before == [32]
    assert out.num_new_tokens == [11]


def test_block_identities_equal_prefix_identity_chain():
    from twin.core.request import Request
    seg = Request("s", 0.0, 40, 9, prompt_segments=[("sys", 20), ("u", 20)])
    tok = Request("t", 0.0, 40, 9, prompt_token_ids=list(range(40)))
    tok.append_output_tokens(8, list(range(100, 108)))
    bs = 4
    for req in (seg, tok):
        chain, parent = [], None
        for i in range(12):
            parent = req.prefix_identity((i + 1) * bs, bs, parent)
            chain.append(parent)
        assert req.block_identities(0, 12, bs, None) == chain
        assert req.block_identities(3, 12, bs, chain[2]) == chain[3:]
        assert req.block_identities(5, 6, bs, chain[4]) == [chain[5]]
        assert req.block_identities(7, 7, bs, chain[6]) == []
    assert seg.block_identities(0, 5, bs, None)[:5] == Request("s2", 0.0, 40, 9, prompt_segments=[
        ("sys", 20), ("v", 20)]).block_identities(0, 5, bs, None)


def test_block_identities_exact_values():
    from twin.core.request import NONE_HASH, Request
    seg = Request("s", 0.0, 40, 9, prompt_segments=[("sys", 20), ("u", 20)])
    h = seg.block_identities(0, 11, 4, None)
    assert h[0] == hash((NONE_HASH, "sys", 4)) and h[4] == hash((NONE_HASH, "sys", 20))
    assert h[9] == hash((hash((NONE_HASH, "sys", 20)), "u", 20))
    tok = Request("t", 0.0, 40, 9, prompt_token_ids=list(range(40)))
    tok.append_output_tokens(4, [100, 101, 102, 103])
    t = tok.block_identities(0, 11, 4, None)
    assert t[0] == hash((NONE_HASH, (0, 1, 2, 3))) and t[10] == hash((t[9], (100, 101, 102, 103)))


# ---- private blocks (twin.workload.sharing) ------------------------------------------------------------
def test_private_blocks_are_counted_not_hashed_and_registered_when_preempted():
    from twin.core.free_block_queue import PRIVATE_HASH
    from twin.core.request import RequestStatus

    kv = KVCacheManager(12, 4, reserve_null_block=False)
    pool = kv.block_pool
    # 8 shared system-prompt tokens, then 6 of this request's own: blocks 0 1 shared, block 2 on private
    r = Request("a", 0.0, 14, 20, prompt_segments=[("sys", 8), ("u-a", 6)], private_from_token=8)
    assert kv.num_findable_blocks(r, 3) == 2
    admit(kv, r)
    assert kv_ids(kv, "a") == [0, 1, 2, 3]
    blocks = kv.get_blocks("a")
    assert blocks[2].block_hash is None and kv.num_cached_blocks["a"] == 3    # counted, not marked
    assert set(pool.cached_block_hash_to_block.values()) == {blocks[0], blocks[1]}
    assert len(r.block_hashes) == 2                      # the private block was never hashed
    # a preemption frees the blocks (tail first) and registers the private one under its real hash
    kv.free(r)
    assert len(r.block_hashes) == 3 and blocks[2].block_hash == r.block_hashes[2]
    assert pool.get_cached_block(r.block_hashes[2]) is blocks[2]
    assert free_ids(kv) == [4, 5, 6, 7, 8, 9, 10, 11, 3, 2, 1, 0]
    r.status, r.num_computed_tokens, r.num_preemptions = RequestStatus.PREEMPTED, 0, 1
    assert kv.num_findable_blocks(r, 3) == 3
    hit, num_hit, _ = admit(kv, r)
    assert [b.block_id for b in hit] == [0, 1, 2] and num_hit == 12
    assert kv_ids(kv, "a") == [0, 1, 2, 4]
    # resumed, it marks the private blocks it fills (hit blocks among them keep their hashes) and frees
    # them block by block: block 4 (private) and 5 (partial) after three output tokens fill 4 and start 5
    r.num_output_tokens = 3
    kv.allocate_slots(r, 3)
    r.num_computed_tokens += 3
    assert kv_ids(kv, "a") == [0, 1, 2, 4, 5]
    assert blocks[2].block_hash == r.block_hashes[2] and kv.get_blocks("a")[3].block_hash is PRIVATE_HASH
    r.status = RequestStatus.FINISHED_STOPPED
    kv.free(r)
    assert free_ids(kv) == [6, 7, 8, 9, 10, 11, 3, 5, 4, 2, 1, 0] and pool.num_evictions == 0
    assert [x.block_id for x in pool.get_new_blocks(8)] == [6, 7, 8, 9, 10, 11, 3, 5]
    assert [x.block_id for x in pool.get_new_blocks(2)] == [4, 2] and pool.num_evictions == 2


def test_finished_private_blocks_are_evicted_without_a_hash():
    from twin.core.request import RequestStatus

    kv = KVCacheManager(5, 4, reserve_null_block=False)
    pool = kv.block_pool
    r = Request("a", 0.0, 9, 3, prompt_segments=[("u-a", 9)], private_from_token=0)
    admit(kv, r)
    assert [b.block_hash for b in kv.get_blocks("a")] == [None, None, None] and kv.num_cached_blocks["a"] == 2
    assert pool.cached_block_hash_to_block == {} and r.block_hashes == []
    r.status = RequestStatus.FINISHED_STOPPED
    kv.free(r)                                            # finished: nothing to register
    assert r.block_hashes == [] and free_ids(kv) == [3, 4, 2, 1, 0]
    s = Request("b", 0.0, 17, 3, prompt_segments=[("u-b", 17)], private_from_token=0)
    admit(kv, s)                                          # takes every block: evicts the two private ones
    assert kv_ids(kv, "b") == [3, 4, 2, 1, 0] and pool.num_evictions == 2
    assert [b.block_hash for b in kv.get_blocks("b")] == [None] * 5 and kv.num_cached_blocks["b"] == 4
