"""Static batching (twin.core.scheduler_static.StaticBatchScheduler)."""

from __future__ import annotations

from core_helpers import block_ids, check_sched_invariants, free_ids, ids, make_sched, req, step
from twin.core.request import RequestStatus
from twin.core.scheduler_static import StaticBatchScheduler


def st(**kw):
    kw.setdefault("static_batch_size", 2)
    s = make_sched("static", **kw)
    assert type(s) is StaticBatchScheduler
    return s


def test_batch_forms_up_to_size_and_reserves_max_length():
    s = st(num_gpu_blocks=21)
    s.add_request(req("a", 20, out=2))   # 22 tokens at most: 2 blocks
    s.add_request(req("b", 20, out=30))  # 50 tokens: 4 blocks
    s.add_request(req("c", 10, out=2))
    out = s.schedule()
    assert ids(out.requests) == ["a", "b"]
    assert out.num_new_tokens == [20, 20]
    assert out.num_computed_before == [0, 0]
    assert out.num_new_requests == 2
    assert block_ids(s, "a") == [1, 2]
    assert block_ids(s, "b") == [3, 4, 5, 6]
    assert ids(s.waiting) == ["c"]
    assert ids(s.batch) == ["a", "b"]
    s.update_from_output(out)
    # decoding never needs a new block
    for _ in range(5):
        out, _ = step(s)
        assert not out.preempted
        assert block_ids(s, "b") == [3, 4, 5, 6]


def test_nothing_admitted_while_batch_runs_and_padding():
    s = st()
    s.add_request(req("a", 20, out=2))
    s.add_request(req("b", 20, out=4))
    out, res = step(s)
    assert ids(out.requests) == ["a", "b"]
    s.add_request(req("c", 10, out=1))
    out, res = step(s)  # a emits its second token and finishes
    assert ids(out.requests) == ["a", "b"]
    assert ids(res.finished) == ["a"]
    assert out.num_padding == 0
    assert block_ids(s, "a") == []
    # a stays in the fixed-shape batch as padding; c waits although blocks are free
    out, res = step(s)
    assert ids(out.requests) == ["b", "a"]
    assert out.num_padding == 1
    assert out.num_new_tokens == [1, 1]
    assert out.num_computed_before == [21, 22]
    assert out.num_spec_tokens == [0, 0]
    assert out.num_new_requests == 0
    assert res.num_emitted == [1, 0]
    assert ids(s.waiting) == ["c"]
    out, res = step(s)
    assert ids(out.requests) == ["b", "a"]
    assert out.num_computed_before == [22, 23]
    assert ids(res.finished) == ["b"]
    assert s.batch == []
    assert s.running == []
    # the batch is done: the next one forms
    out, res = step(s)
    assert ids(out.requests) == ["c"]
    assert out.num_padding == 0
    assert ids(res.finished) == ["c"]
    assert not s.has_unfinished_requests()
    assert len(free_ids(s)) == 10


def test_no_padding_knob():
    s = st(static_pad_finished=False)
    s.add_request(req("a", 20, out=1))
    s.add_request(req("b", 20, out=3))
    step(s)
    out, _ = step(s)
    assert ids(out.requests) == ["b"]
    assert out.num_padding == 0
    s.add_request(req("c", 5, out=1))
    out, res = step(s)
    assert ids(out.requests) == ["b"]  # still no admission while b runs
    assert ids(res.finished) == ["b"]
    out, _ = step(s)
    assert ids(out.requests) == ["c"]


def test_timeout_wait():
    s = st(static_batch_size=4, static_batch_timeout_s=1.0)
    s.add_request(req("a", 10, out=2, arrival=0.0))
    s.add_request(req("b", 10, out=2, arrival=0.3))
    out = s.schedule(0.5)
    assert out.is_empty()
    assert s.next_wakeup_s == 1.0
    s.update_from_output(out)
    out = s.schedule(1.0)
    assert ids(out.requests) == ["a", "b"]
    assert s.next_wakeup_s is None


def test_full_batch_does_not_wait_for_timeout():
    s = st(static_batch_size=2, static_batch_timeout_s=10.0)
    s.add_request(req("a", 10, out=2))
    out = s.schedule(0.0)
    assert out.is_empty() and s.next_wakeup_s == 10.0
    s.add_request(req("b", 10, out=2))
    out = s.schedule(0.1)
    assert ids(out.requests) == ["a", "b"]


def test_no_time_forms_at_once():
    s = st(static_batch_size=4, static_batch_timeout_s=1.0)
    s.add_request(req("a", 10, out=2))
    out = s.schedule()
    assert ids(out.requests) == ["a"]


def test_batch_limited_by_reserved_kv():
    s = st(static_batch_size=4, num_gpu_blocks=7)  # usable 6
    s.add_request(req("a", 20, out=40))  # 60 tokens: 4 blocks
    s.add_request(req("b", 20, out=20))  # 40 tokens: 3 blocks -> does not fit beside a
    s.add_request(req("c", 5, out=5))
    out = s.schedule()
    assert ids(out.requests) == ["a"]
    assert block_ids(s, "a") == [1, 2, 3, 4]
    assert ids(s.waiting) == ["b", "c"]


def test_without_reservation_grows_and_preempts_newest():
    s = st(static_batch_size=3, static_reserve_max_length=False, num_gpu_blocks=7)  # usable 6
    for rid in "abc":
        s.add_request(req(rid, 32, out=16))  # at most 47 tokens computed: 3 blocks
    out, _ = step(s)
    assert [block_ids(s, r) for r in "abc"] == [[1, 2], [3, 4], [5, 6]]
    out = s.schedule()
    assert ids(out.preempted) == ["c"]
    assert ids(out.requests) == ["a", "b"]
    assert block_ids(s, "a") == [1, 2, 6] and block_ids(s, "b") == [3, 4, 5]
    assert ids(s.batch) == ["a", "b"]
    assert ids(s.waiting) == ["c"]
    assert out.preempted[0].status == RequestStatus.PREEMPTED
    s.update_from_output(out)
    while s.batch:
        out, _ = step(s)
        assert "c" not in ids(out.requests)
        check_sched_invariants(s, out)
    out, _ = step(s)
    assert ids(out.requests) == ["c"]
    assert out.num_resumed_requests == 1
    assert out.num_new_tokens == [33]  # 32 prompt + its first output, recomputed


def test_run_to_completion():
    s = st(static_batch_size=3, num_gpu_blocks=30)
    reqs = [req(i, 5 + 3 * i, out=1 + i % 4, arrival=i) for i in range(10)]
    for r in reqs:
        s.add_request(r)
    for _ in range(200):
        if not s.has_unfinished_requests():
            break
        out, _ = step(s)
        check_sched_invariants(s, out)
        assert len(s.batch) <= 3
    assert all(r.status == RequestStatus.FINISHED_STOPPED for r in reqs)
    assert len(free_ids(s)) == 29
