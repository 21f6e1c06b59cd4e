"""vLLM V1 continuous batching (twin.core.scheduler.Scheduler): exact steps, block ids and queue order on a small
pool (max_num_batched_tokens=100, block_size=16, 11 blocks = null block + 10 usable)."""

from __future__ import annotations

import pytest

from core_helpers import (block_ids, check_sched_invariants, free_ids, ids, make_sched, ref_cnts, req, step)
from twin.core.request import RequestStatus
from twin.core.scheduler import Scheduler


def test_make_sched_gives_continuous():
    s = make_sched()
    assert type(s) is Scheduler
    assert s.kv_cache_manager.block_pool.num_usable_blocks == 10


def test_basic_admission_and_decode():
    s = make_sched()
    for rid in "abc":
        s.add_request(req(rid, 30, out=3))
    out = s.schedule()
    assert ids(out.requests) == ["a", "b", "c"]
    assert out.num_new_tokens == [30, 30, 30]
    assert out.num_computed_before == [0, 0, 0]
    assert out.num_new_requests == 3
    assert out.total_num_scheduled_tokens == 90
    assert out.num_running_after == 3 and out.num_waiting_after == 0
    assert [block_ids(s, r) for r in "abc"] == [[1, 2], [3, 4], [5, 6]]
    assert out.kv_usage == pytest.approx(0.6)
    res = s.update_from_output(out)
    assert res.num_emitted == [1, 1, 1]
    assert res.finished == []
    assert [r.num_output_tokens for r in out.requests] == [1, 1, 1]
    out = s.schedule()
    assert ids(out.requests) == ["a", "b", "c"]
    assert out.num_new_tokens == [1, 1, 1]
    assert out.num_computed_before == [30, 30, 30]
    assert out.num_new_requests == 0
    check_sched_invariants(s, out)


def test_token_budget_and_chunked_prefill_continues():
    s = make_sched(num_gpu_blocks=21, max_model_len=200)
    s.add_request(req("a", 80, out=5))
    s.add_request(req("b", 50, out=5))
    out = s.schedule()
    assert ids(out.requests) == ["a", "b"]
    assert out.num_new_tokens == [80, 20]
    assert block_ids(s, "a") == [1, 2, 3, 4, 5]
    assert block_ids(s, "b") == [6, 7]
    res = s.update_from_output(out)
    assert res.num_emitted == [1, 0]  # a partial chunk emits nothing
    b = out.requests[1]
    assert b.num_computed_tokens == 20 and b.num_output_tokens == 0
    out = s.schedule()
    assert ids(out.requests) == ["a", "b"]
    assert out.num_new_tokens == [1, 30]
    assert out.num_computed_before == [80, 20]
    assert block_ids(s, "a") == [1, 2, 3, 4, 5, 8]
    assert block_ids(s, "b") == [6, 7, 9, 10]
    res = s.update_from_output(out)
    assert res.num_emitted == [1, 1]


def test_chunks_across_steps_with_a_running_decode():
    s = make_sched(num_gpu_blocks=40, max_model_len=400)
    s.add_request(req("d", 10, out=50))
    step(s)
    s.add_request(req("p", 250, out=5))
    chunks, befores = [], []
    for _ in range(3):
        out, res = step(s)
        assert ids(out.requests) == ["d", "p"]
        assert out.num_new_tokens[0] == 1
        chunks.append(out.num_new_tokens[1])
        befores.append(out.num_computed_before[1])
        assert out.total_num_scheduled_tokens <= 100
    assert chunks == [99, 99, 52]
    assert befores == [0, 99, 198]
    assert res.num_emitted == [1, 1]
    assert block_ids(s, "d") == [1]
    assert block_ids(s, "p") == list(range(2, 18))


def test_max_num_seqs():
    s = make_sched(max_num_seqs=2)
    for rid in "abc":
        s.add_request(req(rid, 10, out=2))
    out, _ = step(s)
    assert ids(out.requests) == ["a", "b"]
    assert ids(s.waiting) == ["c"]
    out, res = step(s)  # a and b finish
    assert ids(out.requests) == ["a", "b"]
    assert ids(res.finished) == ["a", "b"]
    assert all(r.status == RequestStatus.FINISHED_STOPPED for r in res.finished)
    out, _ = step(s)
    assert ids(out.requests) == ["c"]
    assert out.num_new_requests == 1


def test_chunked_prefill_off_head_of_line():
    s = make_sched(enable_chunked_prefill=False)
    s.add_request(req("a", 60, out=5))
    s.add_request(req("b", 50, out=5))
    s.add_request(req("c", 10, out=5))
    out = s.schedule()
    # b does not fit the 40 tokens left; c would, but nothing jumps the head
    assert ids(out.requests) == ["a"]
    assert out.num_new_tokens == [60]
    assert ids(s.waiting) == ["b", "c"]
    s.update_from_output(out)
    out = s.schedule()
    assert ids(out.requests) == ["a", "b", "c"]
    assert out.num_new_tokens == [1, 50, 10]


def test_long_prefill_token_threshold():
    s = make_sched(long_prefill_token_threshold=32, max_model_len=200, num_gpu_blocks=21)
    s.add_request(req("a", 80, out=3))
    s.add_request(req("b", 80, out=3))
    s.add_request(req("c", 80, out=3))
    out, _ = step(s)
    assert out.num_new_tokens == [32, 32, 32]
    out, _ = step(s)
    assert ids(out.requests) == ["a", "b", "c"]
    assert out.num_new_tokens == [32, 32, 32]
    out, res = step(s)
    assert out.num_new_tokens == [16, 16, 16]
    assert res.num_emitted == [1, 1, 1]


def test_fcfs_preempts_newest_and_requeues_at_head():
    s = make_sched(num_gpu_blocks=7)  # usable 1..6
    for rid in "abc":
        s.add_request(req(rid, 32, out=30))
    out, _ = step(s)
    assert [block_ids(s, r) for r in "abc"] == [[1, 2], [3, 4], [5, 6]]
    # each needs a third block for token 33: c (newest) goes, a takes 6, b takes 5
    out = s.schedule()
    assert ids(out.preempted) == ["c"]
    assert ids(out.requests) == ["a", "b"]
    assert out.num_new_tokens == [1, 1]
    assert out.num_new_requests == 0
    assert block_ids(s, "a") == [1, 2, 6]
    assert block_ids(s, "b") == [3, 4, 5]
    assert block_ids(s, "c") == []
    c = out.preempted[0]
    assert c.status == RequestStatus.PREEMPTED
    assert c.num_computed_tokens == 0 and c.num_output_tokens == 1 and c.num_preemptions == 1
    assert s.num_preemptions == 1
    assert ids(s.waiting) == ["c"]
    assert s.kv_cache_manager.block_pool.num_evictions == 2  # c's cached blocks were taken
    s.update_from_output(out)
    # a and b decode until a needs its fourth block: then b (the newest running) goes, ahead of c
    n_steps = 0
    while True:
        out = s.schedule()
        n_steps += 1
        if out.preempted:
            break
        assert ids(out.requests) == ["a", "b"]
        s.update_from_output(out)
    assert n_steps == 16
    assert ids(out.preempted) == ["b"]
    assert ids(out.requests) == ["a"]
    assert out.num_computed_before == [48]
    assert block_ids(s, "a") == [1, 2, 6, 5]
    assert free_ids(s) == [4, 3]
    assert ids(s.waiting) == ["b", "c"]
    assert s.num_preemptions == 2
    check_sched_invariants(s, out)


def test_priority_no_admission_in_a_preempting_step():
    s = make_sched(num_gpu_blocks=7, policy="priority")  # usable 1..6
    s.add_request(req("a", 32, out=10, priority=0))
    s.add_request(req("b", 64, out=10, priority=1))
    out, _ = step(s)
    assert block_ids(s, "a") == [1, 2] and block_ids(s, "b") == [3, 4, 5, 6]
    s.add_request(req("d", 8, out=10, priority=0, arrival=1.0))
    out = s.schedule()
    # a needs a third block: the victim is b (max (priority, arrival)); d would fit but is not admitted
    assert ids(out.preempted) == ["b"]
    assert ids(out.requests) == ["a"]
    assert out.num_new_requests == 0
    assert block_ids(s, "a") == [1, 2, 6]
    assert free_ids(s) == [5, 4, 3]
    assert ids(s.waiting) == ["d", "b"]
    s.update_from_output(out)
    out = s.schedule()
    assert ids(out.requests) == ["a", "d"]
    assert out.num_new_tokens == [1, 8]
    assert block_ids(s, "d") == [5]
    # b (65 tokens) would need its two surviving cached blocks + 3 new: only 2 free
    assert ids(s.waiting) == ["b"]


def test_priority_victim_already_scheduled_gives_back_budget():
    s = make_sched(num_gpu_blocks=6, policy="priority")  # usable 1..5
    s.add_request(req("x", 32, out=20, priority=1))
    step(s)
    s.add_request(req("y", 32, out=20, priority=0, arrival=1.0))
    out, _ = step(s)
    assert ids(out.requests) == ["x", "y"]
    assert block_ids(s, "x") == [1, 2, 3] and block_ids(s, "y") == [4, 5]
    out = s.schedule()
    # x is scheduled first, then y needs a block: the victim is x, taken back out of the batch
    assert ids(out.preempted) == ["x"]
    assert ids(out.requests) == ["y"]
    assert out.num_new_tokens == [1]
    assert out.total_num_scheduled_tokens == 1
    assert block_ids(s, "y") == [4, 5, 3]
    assert free_ids(s) == [2, 1]
    x = out.preempted[0]
    assert x.num_computed_tokens == 0 and x.status == RequestStatus.PREEMPTED
    res = s.update_from_output(out)
    assert res.num_emitted == [1]
    assert x.num_output_tokens == 2


def test_spec_decode_rollback():
    s = make_sched(block_size=4, num_gpu_blocks=50)
    s.add_request(req("r", 6, out=20))
    out, _ = step(s)
    r = out.requests[0]
    assert block_ids(s, "r") == [1, 2]
    assert r.num_tokens == 7 and r.num_computed_tokens == 6
    r.num_spec_tokens = 3
    out = s.schedule()
    assert out.num_new_tokens == [4]
    assert out.num_spec_tokens == [3]
    assert out.num_computed_before == [6]
    assert r.num_computed_tokens == 10
    assert block_ids(s, "r") == [1, 2, 3]
    # only the 7 real tokens register: one full block; the drafts never do
    assert s.kv_cache_manager.num_cached_blocks["r"] == 1
    res = s.update_from_output(out, num_generated=[2])  # one draft accepted, two rejected
    assert res.num_emitted == [2]
    assert res.num_accepted_spec == [1]
    assert r.num_computed_tokens == 8
    assert r.num_output_tokens == 3 and r.num_tokens == 9
    assert r.num_spec_tokens == 0
    out, _ = step(s)
    assert out.num_new_tokens == [1]
    assert out.num_computed_before == [8]
    assert s.kv_cache_manager.num_cached_blocks["r"] == 2
    pool = s.kv_cache_manager.block_pool
    assert [pool.blocks[i].block_hash is not None for i in (1, 2, 3)] == [True, True, False]
    # all drafts accepted
    r.num_spec_tokens = 2
    out = s.schedule()
    assert out.num_new_tokens == [3]
    res = s.update_from_output(out, num_generated=[3])
    assert res.num_accepted_spec == [2]
    assert r.num_computed_tokens == 12 and r.num_tokens == 13


def test_spec_decode_too_many_accepted_raises():
    s = make_sched()
    s.add_request(req("r", 10, out=20))
    out, _ = step(s)
    out.requests[0].num_spec_tokens = 2
    out = s.schedule()
    with pytest.raises(ValueError):
        s.update_from_output(out, num_generated=[4])


def test_spec_drafts_cut_by_budget():
    s = make_sched(max_num_batched_tokens=3, max_num_seqs=1)
    s.add_request(req("r", 2, out=20))
    out, _ = step(s)
    r = out.requests[0]
    r.num_spec_tokens = 5
    out = s.schedule()
    assert out.num_new_tokens == [3]
    assert out.num_spec_tokens == [2]
    res = s.update_from_output(out, num_generated=[3])
    assert res.num_accepted_spec == [2]
    assert r.num_computed_tokens == 5 and r.num_tokens == 6


def test_spec_drafts_cut_by_max_model_len():
    s = make_sched(max_model_len=100, num_gpu_blocks=11)
    s.add_request(req("r", 90, out=50))
    for _ in range(8):
        out, _ = step(s)
    r = out.requests[0]
    assert r.num_tokens == 98 and r.num_computed_tokens == 97
    r.num_spec_tokens = 3
    out = s.schedule()
    assert out.num_new_tokens == [2]  # positions stay below max_model_len - 1
    assert out.num_spec_tokens == [1]
    res = s.update_from_output(out, num_generated=[2])
    assert res.num_emitted == [2]
    assert r.num_tokens == 100
    assert r.status == RequestStatus.FINISHED_LENGTH_CAPPED
    assert res.finished == [r]


def test_rejects_requests_that_can_never_fit():
    s = make_sched(max_model_len=300)
    too_long = req("long", 300, out=5)
    too_big = req("big", 150, out=20)  # 170 tokens at its longest: 11 blocks, the pool has 10
    ok = req("ok", 150, out=10)  # 160 tokens: exactly 10 blocks
    assert s.add_request(too_long) is False
    assert s.add_request(too_big) is False
    assert s.add_request(ok) is True
    for r in (too_long, too_big):
        assert r.status == RequestStatus.FINISHED_REJECTED
        assert r.reject_reason
    assert "max_model_len" in too_long.reject_reason
    assert "blocks" in too_big.reject_reason
    out = s.schedule()
    assert ids(out.rejected) == ["long", "big"]
    assert ids(out.requests) == ["ok"]
    assert ids(s.rejected) == ["long", "big"]
    s.update_from_output(out)
    out = s.schedule()
    assert out.rejected == []


def test_prompt_one_below_max_model_len_is_served():
    s = make_sched(max_model_len=100)
    r = req("r", 99, out=5)
    assert s.add_request(r)
    out, res = step(s)
    assert out.num_new_tokens == [99]
    assert r.num_tokens == 100
    assert r.status == RequestStatus.FINISHED_LENGTH_CAPPED
    assert res.finished == [r]
    assert free_ids(s) == [8, 9, 10, 7, 6, 5, 4, 3, 2, 1]


def test_max_model_len_caps_output():
    s = make_sched(max_model_len=100)
    s.add_request(req("r", 90, out=50))
    n = 0
    while s.has_unfinished_requests():
        out, res = step(s)
        n += 1
        check_sched_invariants(s, out)
    r = res.finished[0]
    assert n == 10
    assert r.num_output_tokens == 10 and r.num_tokens == 100
    assert r.status == RequestStatus.FINISHED_LENGTH_CAPPED


def test_max_tokens_caps_output():
    s = make_sched()
    r = req("r", 10, out=50, max_tokens=4)
    s.add_request(r)
    while s.has_unfinished_requests():
        step(s)
    assert r.num_output_tokens == 4
    assert r.status == RequestStatus.FINISHED_LENGTH_CAPPED


def test_finished_requests_free_blocks_in_reverse():
    s = make_sched()
    s.add_request(req("a", 40, out=2))
    s.add_request(req("b", 20, out=3))
    step(s)
    assert block_ids(s, "a") == [1, 2, 3] and block_ids(s, "b") == [4, 5]
    out, res = step(s)
    assert ids(res.finished) == ["a"]
    assert ids(s.running) == ["b"]
    assert block_ids(s, "a") == []
    assert free_ids(s) == [6, 7, 8, 9, 10, 3, 2, 1]
    out, res = step(s)
    assert ids(res.finished) == ["b"]
    assert free_ids(s) == [6, 7, 8, 9, 10, 3, 2, 1, 5, 4]
    assert not s.has_unfinished_requests()
    assert s.num_finished == 2
    out = s.schedule()
    assert out.is_empty()
    assert ref_cnts(s, range(1, 11)) == [0] * 10


def test_num_cached_tokens_recorded_once():
    s = make_sched()
    s.add_request(req("a", 40, out=1, prefix=("sys", 32)))
    step(s)
    b = req("b", 40, out=1, prefix=("sys", 32))
    s.add_request(b)
    out, _ = step(s)
    assert b.num_cached_tokens == 32
    assert out.num_computed_before == [32]
    assert out.num_new_tokens == [8]


def test_sampled_token_ids_drive_real_tokens():
    s = make_sched(block_size=4, num_gpu_blocks=20)
    from twin.core.request import Request
    r = Request("r", 0.0, 6, 4, prompt_token_ids=[1, 2, 3, 4, 5, 6])
    s.add_request(r)
    out = s.schedule()
    s.update_from_output(out, sampled_token_ids=[[7]])
    assert r.output_token_ids == [7]
    out = s.schedule()
    s.update_from_output(out, sampled_token_ids=[[8]])
    out = s.schedule()  # token 8 at position 7 completes block 2
    assert s.kv_cache_manager.num_cached_blocks["r"] == 2
    s.update_from_output(out, sampled_token_ids=[[9]])
    # a second request with the same 8 tokens + 1 hits both blocks
    r2 = Request("r2", 0.0, 9, 1, prompt_token_ids=[1, 2, 3, 4, 5, 6, 7, 8, 0])
    s.add_request(r2)
    out = s.schedule()
    assert out.requests[-1] is r2
    assert out.num_computed_before[-1] == 8


def test_priority_ties_preempt_newest():
    """Equal (priority, arrival): the victim is the most recently admitted, never the request itself
    while others run (else two requests could preempt themselves in turn forever)."""
    s = make_sched(num_gpu_blocks=7, policy="priority")
    for rid in "abc":
        s.add_request(req(rid, 32, out=20))
    step(s)
    out = s.schedule()
    assert ids(out.preempted) == ["c"]
    assert ids(out.requests) == ["a", "b"]
    s.update_from_output(out)
    n = 0
    while s.has_unfinished_requests():
        out, _ = step(s)
        check_sched_invariants(s, out)
        n += 1
        assert n < 500


def test_priority_lower_value_admitted_first():
    s = make_sched(policy="priority", max_num_seqs=1)
    s.add_request(req("low", 10, out=1, priority=2, arrival=0.0))
    s.add_request(req("high", 10, out=1, priority=0, arrival=5.0))
    s.add_request(req("mid", 10, out=1, priority=1, arrival=1.0))
    order = []
    while s.has_unfinished_requests():
        out, _ = step(s)
        order += ids(out.requests)
    assert order == ["high", "mid", "low"]
