"""Speculative decoding through the serving core: ``num_tokens_with_spec`` accounting, draft KV slots,
rollback of rejected drafts, and their interplay with the token budget, chunked prefill, prefix caching and
preemption. Exact hand-checked steps first, then whole runs with invariants checked at every step."""

from __future__ import annotations

import pytest

from spec_decode_helpers import CheckedScheduler, simulate_direct, specs
from twin.results.records import FINISHED
from twin.core.request import Request, RequestStatus
from twin.core.scheduler_config import SchedulerConfig
from twin.core.schedulers import make_scheduler
from twin.spec_decode import AcceptanceModel, NgramDrafter, Speculator


def _sched(**kw):
    cfg = dict(max_num_batched_tokens=100, max_num_seqs=16, block_size=4, max_model_len=200)
    cfg.update(kw)
    num_blocks = cfg.pop("num_gpu_blocks", 64)
    return make_scheduler(SchedulerConfig(**cfg), num_blocks)


def test_verification_rollback_by_hand():
    s = _sched()
    r = Request("a", 0.0, 10, 20, prompt_segments=[("p", 10)])
    s.add_request(r)
    out = s.schedule()
    assert out.num_new_tokens == [10] and out.num_spec_tokens == [0]
    s.update_from_output(out)                           # prefill emits the first token
    assert (r.num_output_tokens, r.num_computed_tokens) == (1, 10)
    r.num_spec_tokens = 3                               # the engine proposes 3 drafts
    assert r.num_tokens_with_spec == 14
    out = s.schedule()
    assert out.num_new_tokens == [4] and out.num_spec_tokens == [3] and out.num_computed_before == [10]
    assert r.num_computed_tokens == 14
    blocks = s.kv_cache_manager.get_block_ids("a")
    assert len(blocks) == 4                             # ceil(14 / 4): slots for the drafts too
    assert s.kv_cache_manager.num_cached_blocks["a"] == 2   # only the 11 real tokens' full blocks are cached
    res = s.update_from_output(out, [2])                # 1 draft accepted + the bonus token
    assert res.num_accepted_spec == [1] and res.num_emitted == [2]
    assert (r.num_output_tokens, r.num_computed_tokens, r.num_spec_tokens) == (3, 12, 0)
    assert s.kv_cache_manager.get_block_ids("a") == blocks   # rejected drafts' slots stay, to be overwritten
    # all drafts rejected: computed falls back to just before the new token
    r.num_spec_tokens = 3
    out = s.schedule()
    res = s.update_from_output(out, [1])
    assert res.num_accepted_spec == [0] and (r.num_output_tokens, r.num_computed_tokens) == (4, 13)
    with pytest.raises(ValueError, match="accepted"):
        r.num_spec_tokens = 2
        out = s.schedule()
        s.update_from_output(out, [4])                  # more accepted than drafted


def test_budget_cuts_drafts_and_the_cut_is_verified():
    s = _sched(max_num_batched_tokens=8, max_num_seqs=8)
    a = Request("a", 0.0, 4, 20, prompt_segments=[("pa", 4)])
    b = Request("b", 0.0, 4, 20, prompt_segments=[("pb", 4)])
    for r in (a, b):
        s.add_request(r)
    s.update_from_output(s.schedule())                  # both prefills (8 tokens)
    a.num_spec_tokens = b.num_spec_tokens = 4
    out = s.schedule()
    # a takes 1 + 4 = 5, b gets the 3 left: 1 + 2 drafts
    assert out.num_new_tokens == [5, 3] and out.num_spec_tokens == [4, 2]
    assert b.num_spec_tokens == 2 and b.num_tokens_with_spec == 4 + 1 + 2
    res = s.update_from_output(out, [5, 3])             # everything verified is accepted
    assert res.num_accepted_spec == [4, 2]
    assert (a.num_output_tokens, b.num_output_tokens) == (6, 4)
    assert a.num_computed_tokens == a.num_tokens - 1 and b.num_computed_tokens == b.num_tokens - 1


def test_lookahead_slots_and_max_model_len():
    s = _sched(num_lookahead_tokens=4, max_model_len=16)
    r = Request("a", 0.0, 8, 20, prompt_segments=[("p", 8)])
    s.add_request(r)
    out = s.schedule()
    assert len(s.kv_cache_manager.get_block_ids("a")) == 3      # 8 tokens + 4 lookahead slots
    s.update_from_output(out)
    r.num_spec_tokens = 4
    out = s.schedule()
    assert out.num_spec_tokens == [4]
    s.update_from_output(out, [5])
    assert r.num_output_tokens == 6 and r.num_computed_tokens == 13
    r.num_spec_tokens = 4                                # only 15 - 13 = 2 tokens may still be computed
    out = s.schedule()
    assert out.num_new_tokens == [2] and out.num_spec_tokens == [1]
    res = s.update_from_output(out, [2])                 # the draft and the bonus token reach max_model_len
    assert r.status == RequestStatus.FINISHED_LENGTH_CAPPED and res.num_emitted == [2] and r.num_tokens == 16


def test_preempted_request_drops_its_drafts():
    s = _sched(num_gpu_blocks=6, max_num_batched_tokens=64)         # 5 usable blocks of 4 tokens
    a = Request("a", 0.0, 8, 8, prompt_segments=[("pa", 8)])
    b = Request("b", 0.0, 8, 8, prompt_segments=[("pb", 8)])
    for r in (a, b):
        s.add_request(r)
    s.update_from_output(s.schedule())
    a.num_spec_tokens = b.num_spec_tokens = 4
    out = s.schedule()                                   # a needs 2 more blocks, only 1 free: b is preempted
    assert out.requests == [a] and out.preempted == [b]
    assert b.status == RequestStatus.PREEMPTED and b.num_spec_tokens == 0 and b.num_computed_tokens == 0
    assert s.waiting.peek() is b


@pytest.mark.parametrize("k,lookahead,acceptance", [
    (4, 4, AcceptanceModel.iid(0.7, 4)),
    (3, 0, AcceptanceModel.per_position([0.9, 0.5, 0.2])),
    (4, 0, AcceptanceModel.iid(0.6, 4, proposal_rate=0.5)),          # n-gram: no match at half the steps
])
def test_rollback_under_preemption_chunked_prefill_and_caching(k, lookahead, acceptance):
    """A pool too small for the load (preemptions), a budget smaller than the prompts (chunked prefill) and
    than a full batch of verifications (cut drafts), shared prefixes (cache hits): every invariant holds at
    every step, every request completes with exactly its tokens, every block comes back."""
    CheckedScheduler.K = k
    cfg = SchedulerConfig(max_num_batched_tokens=48, max_num_seqs=12, block_size=8, max_model_len=512,
                          enable_chunked_prefill=True, enable_prefix_caching=True, num_lookahead_tokens=lookahead)
    traffic = specs(30, 120, 60, gap_s=0.002, shared=48)
    result = simulate_direct(traffic, cfg, 40, acceptance, k, scheduler_cls=CheckedScheduler, seed=3)
    assert all(r.status == FINISHED for r in result.requests)
    assert [r.num_output_tokens for r in result.requests] == [60] * 30
    assert all(sum(r.emit_counts or [1] * len(r.emit_times_s)) == 60 for r in result.requests)
    assert result.num_preemptions > 0
    assert result.prefix_cache_hit_tokens > 0
    m = result.metrics()
    assert m["spec_decode_num_drafts"] > 0
    assert m["spec_decode_accepted_tokens"] <= m["spec_decode_draft_tokens"]
    per_pos = m["spec_decode_per_position_acceptance_rates"]
    assert len(per_pos) == k and all(x >= y for x, y in zip(per_pos, per_pos[1:]))
    for r in result.requests:
        pos = r.spec_accepted_per_position
        assert sum(pos) == r.num_spec_accepted_tokens <= r.num_spec_draft_tokens <= k * r.num_spec_drafts
        assert all(x >= y for x, y in zip(pos, pos[1:]))


def test_checked_run_sees_cuts_partial_prefills_and_preemptions():
    CheckedScheduler.K = 4
    # short prompts so that several sequences verify at once and the 18-token budget cuts the last one's
    # drafts; 17 usable blocks of 8 tokens for 10 sequences of up to 52 tokens: preemptions
    cfg = SchedulerConfig(max_num_batched_tokens=18, max_num_seqs=10, block_size=8, max_model_len=512,
                          num_lookahead_tokens=4)
    logs = []

    class Logged(CheckedScheduler):
        def __init__(self, *a):
            super().__init__(*a)
            logs.append(self.log)

    result = simulate_direct(specs(20, 8, 40), cfg, 18, 0.8, 4, scheduler_cls=Logged)
    log = logs[0]
    assert log["verifications"] > 200 and log["cut_drafts"] > 5 and log["partial_prefills"] > 10
    assert result.num_preemptions > 0
    assert all(r.num_output_tokens == 40 for r in result.requests)


def test_all_blocks_released_after_the_run():
    cfg = SchedulerConfig(max_num_batched_tokens=64, max_num_seqs=8, block_size=8, max_model_len=512,
                          num_lookahead_tokens=4)
    scheds = []

    def make(config, n):
        scheds.append(make_scheduler(config, n))
        return scheds[-1]

    simulate_direct(specs(16, 50, 30), cfg, 40, 0.7, 4, scheduler_cls=make)
    kv = scheds[0].kv_cache_manager
    assert not kv.req_to_blocks
    assert kv.block_pool.free_block_queue.num_free_blocks == kv.block_pool.num_usable_blocks


@pytest.mark.parametrize("kind", ["prefill_first", "static"])
def test_other_schedulers_roll_back_too(kind):
    cfg = SchedulerConfig(scheduler=kind, max_num_batched_tokens=512, max_num_seqs=8, block_size=8,
                          max_model_len=512, static_batch_size=4)
    result = simulate_direct(specs(12, 60, 50), cfg, 200, 0.7, 3)
    assert all(r.status == FINISHED and r.num_output_tokens == 50 for r in result.requests)
    m = result.metrics()
    assert 1.0 < m["spec_decode_acceptance_length"] < 4.0


def test_same_seed_same_run_and_draws_follow_the_request():
    cfg = SchedulerConfig(max_num_batched_tokens=4096, max_num_seqs=64, block_size=16, max_model_len=2048)
    traffic = specs(24, 64, 80, gap_s=0.003)

    def counters(res):
        return [(r.num_spec_drafts, r.num_spec_accepted_tokens, list(r.spec_accepted_per_position))
                for r in res.requests]

    a = simulate_direct(traffic, cfg, 2000, 0.6, 4, seed=7)
    b = simulate_direct(traffic, cfg, 2000, 0.6, 4, seed=7)
    assert [list(r.emit_times_s) for r in a.requests] == [list(r.emit_times_s) for r in b.requests]
    assert counters(a) == counters(b)
    # one stream per request: a different batch (two replicas) gives each request the same acceptances
    c = simulate_direct(traffic, cfg, 2000, 0.6, 4, seed=7, num_replicas=2, per_token_s=1e-5)
    assert counters(c) == counters(a)
    assert [list(r.emit_times_s) for r in c.requests] != [list(r.emit_times_s) for r in a.requests]
    d = simulate_direct(traffic, cfg, 2000, 0.6, 4, seed=8)
    assert counters(d) != counters(a)


def test_speculator_protocol_details():
    sp = Speculator(3, {"code": AcceptanceModel.iid(1.0, 3), "default": AcceptanceModel.iid(0.0, 3)},
                    NgramDrafter(1e-6), seed=0)
    s = _sched()
    code = Request("c", 0.0, 8, 10, prompt_segments=[("c", 8)], task_class="code")
    chat = Request("t", 0.0, 8, 10, prompt_segments=[("t", 8)], task_class="chat")
    long = Request("l", 0.0, 150, 10, prompt_segments=[("l", 150)])
    for r in (code, chat, long):
        s.add_request(r)
    out = s.schedule()                                    # two whole prefills, one partial chunk
    assert sp.num_generated(out) == [1, 1, 0]
    assert sp.draft_time_s(out) == pytest.approx(3e-6)
    s.update_from_output(out, [1, 1, 0])
    code.num_spec_tokens = sp.num_draft_tokens(code)
    chat.num_spec_tokens = sp.num_draft_tokens(chat)
    assert (code.num_spec_tokens, chat.num_spec_tokens) == (3, 3)
    out = s.schedule()
    gen = sp.num_generated(out)
    assert gen[:2] == [4, 1]                              # class code accepts all, the rest (default) none
    assert sp.stats.num_verifications == 2 and sp.stats.num_accepted_tokens == 3
