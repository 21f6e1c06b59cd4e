"""Prefill-first scheduling without mixing (twin.core.scheduler_prefill_first.PrefillFirstScheduler)."""

from __future__ import annotations

import pytest

from core_helpers import block_ids, check_sched_invariants, free_ids, ids, make_sched, req, step
from twin.core.request import RequestStatus
from twin.core.scheduler_config import SchedulerConfig
from twin.core.scheduler_prefill_first import PrefillFirstScheduler


def pf(**kw):
    s = make_sched("prefill_first", **kw)
    assert type(s) is PrefillFirstScheduler
    return s


def is_prefill(out, i) -> bool:
    return out.num_computed_before[i] < out.requests[i].num_prompt_tokens


def test_config_requires_whole_prompts_to_fit():
    with pytest.raises(ValueError):
        SchedulerConfig(scheduler="prefill_first", max_num_batched_tokens=100, max_model_len=200)


def test_prefill_step_then_decode_step():
    s = pf()
    s.add_request(req("a", 30, out=5))
    s.add_request(req("b", 40, out=5))
    out, res = step(s)
    assert ids(out.requests) == ["a", "b"]
    assert out.num_new_tokens == [30, 40]
    assert out.num_new_requests == 2
    assert res.num_emitted == [1, 1]
    assert block_ids(s, "a") == [1, 2] and block_ids(s, "b") == [3, 4, 5]
    out, _ = step(s)
    assert ids(out.requests) == ["a", "b"]
    assert out.num_new_tokens == [1, 1]
    assert out.num_computed_before == [30, 40]


def test_prefills_have_priority_and_steps_never_mix():
    s = pf()
    s.add_request(req("a", 30, out=5))
    step(s)
    s.add_request(req("b", 20, out=5))
    out, _ = step(s)
    # a is decoding, but a waiting prompt fits: this step is b's prefill alone
    assert ids(out.requests) == ["b"]
    assert out.num_new_tokens == [20]
    out, _ = step(s)
    assert ids(out.requests) == ["a", "b"]
    assert out.num_new_tokens == [1, 1]
    assert out.num_computed_before == [30, 20]


def test_whole_prompts_up_to_budget():
    s = pf()
    for rid, n in (("a", 60), ("b", 50), ("c", 10)):
        s.add_request(req(rid, n, out=3))
    out, _ = step(s)
    # b does not fit the 40 tokens left; nothing jumps it
    assert ids(out.requests) == ["a"]
    out, _ = step(s)
    assert ids(out.requests) == ["b", "c"]
    assert out.num_new_tokens == [50, 10]
    out, _ = step(s)
    assert ids(out.requests) == ["a", "b", "c"]
    assert out.num_new_tokens == [1, 1, 1]


def test_max_num_seqs_falls_back_to_decode():
    s = pf(max_num_seqs=2)
    for rid in "abc":
        s.add_request(req(rid, 10, out=3))
    out, _ = step(s)
    assert ids(out.requests) == ["a", "b"]
    out, _ = step(s)  # running is full: decode
    assert ids(out.requests) == ["a", "b"]
    assert out.num_new_tokens == [1, 1]


def test_decodes_preempt_newest():
    s = pf(num_gpu_blocks=7)  # usable 1..6
    for rid in "abc":
        s.add_request(req(rid, 32, out=30))
    out, _ = step(s)
    assert [block_ids(s, r) for r in "abc"] == [[1, 2], [3, 4], [5, 6]]
    out = s.schedule()
    assert ids(out.preempted) == ["c"]
    assert ids(out.requests) == ["a", "b"]
    assert out.num_new_tokens == [1, 1]
    assert block_ids(s, "a") == [1, 2, 6] and block_ids(s, "b") == [3, 4, 5]
    c = out.preempted[0]
    assert c.status == RequestStatus.PREEMPTED and c.num_preemptions == 1
    assert ids(s.waiting) == ["c"]
    assert s.num_preemptions == 1
    s.update_from_output(out)
    # c cannot come back (no free block): the next step decodes
    out, _ = step(s)
    assert ids(out.requests) == ["a", "b"]
    assert out.num_new_requests == 0
    check_sched_invariants(s, out)


def test_finish_frees_and_admits():
    s = pf(num_gpu_blocks=5)  # usable 1..4
    s.add_request(req("a", 40, out=2))
    s.add_request(req("b", 30, out=2))  # 3 + 2 blocks > 4: waits
    out, _ = step(s)
    assert ids(out.requests) == ["a"]
    out, res = step(s)
    assert ids(res.finished) == ["a"]
    assert free_ids(s) == [4, 3, 2, 1]
    out, _ = step(s)
    assert ids(out.requests) == ["b"]
    assert block_ids(s, "b") == [4, 3]


def test_spec_decode_in_decode_step():
    s = pf(block_size=4, num_gpu_blocks=50)
    s.add_request(req("r", 6, out=20))
    out, _ = step(s)
    r = out.requests[0]
    r.num_spec_tokens = 3
    out = s.schedule()
    assert out.num_new_tokens == [4]
    assert out.num_spec_tokens == [3]
    res = s.update_from_output(out, num_generated=[3])
    assert res.num_accepted_spec == [2]
    assert r.num_computed_tokens == 9 and r.num_tokens == 10


def test_decode_step_respects_token_budget_with_drafts():
    s = pf(max_num_batched_tokens=100, max_num_seqs=40, num_gpu_blocks=200, block_size=16, max_model_len=100)
    for i in range(40):
        s.add_request(req(i, 2, out=50))
    out, _ = step(s)
    assert len(out.requests) == 40
    for r in s.running:
        r.num_spec_tokens = 4
    out = s.schedule()
    assert out.total_num_scheduled_tokens <= 100
    assert out.num_new_tokens == [5] * 20
    assert out.num_spec_tokens == [4] * 20
    s.update_from_output(out)
    check_sched_invariants(s, out)


def test_every_step_is_pure():
    s = pf(num_gpu_blocks=30, max_model_len=100)
    for i in range(12):
        s.add_request(req(i, 10 + 7 * i % 60, out=1 + (5 * i) % 9, arrival=i))
    while s.has_unfinished_requests():
        out, _ = step(s)
        kinds = {is_prefill(out, i) for i in range(len(out.requests))}
        assert len(kinds) <= 1
        check_sched_invariants(s, out)
