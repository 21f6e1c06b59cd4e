"""``async_hold_finished_slots`` (twin.core.async_slot_hold): with vLLM's async scheduling a request that finished
in step t is still in ``running`` when step t + 1 is scheduled, so it holds its ``max_num_seqs`` slot through that
schedule (and gets no token in it). Exact queue / slot / block contents across two schedules, the knob's
validation, and the fast path giving the step-by-step path's results with the hold on."""

from __future__ import annotations

import pytest

from core_helpers import block_ids, check_sched_invariants, free_ids, ids, make_sched, req, step
from test_engine import MIXED, _assert_same_results, _run, fast_forward_steps  # noqa: F401 (a fixture)


def _two_running_one_finishes(hold: bool, **kw):
    """max_num_seqs 2: a (1 output token) and b run; a finishes in the first step; c arrives after it."""
    s = make_sched(num_gpu_blocks=11, max_num_seqs=2, async_scheduling=True, async_hold_finished_slots=hold, **kw)
    s.add_request(req("a", 32, out=1))
    s.add_request(req("b", 48, out=5))
    out, res = step(s)
    assert ids(out.requests) == ["a", "b"]
    assert ids(res.finished) == ["a"]
    s.add_request(req("c", 32, out=3))
    return s


def test_without_the_hold_the_finished_slot_is_free_at_the_next_schedule():
    s = _two_running_one_finishes(hold=False)
    assert s.held_slots == 0
    out = s.schedule()
    assert ids(out.requests) == ["b", "c"]
    check_sched_invariants(s, out)


def test_with_the_hold_the_finished_request_keeps_its_slot_through_one_schedule():
    s = _two_running_one_finishes(hold=True)
    assert ids(s.running) == ["b"] and s.held_slots == 1
    assert block_ids(s, "a") == []                       # blocks returned (the block hold is the other knob)
    assert free_ids(s) == [6, 7, 8, 9, 10, 2, 1]
    out = s.schedule()
    assert ids(out.requests) == ["b"]                     # 1 running + 1 held = max_num_seqs: c waits
    assert out.num_new_tokens == [1]                      # no row for a: no token is scheduled for it
    assert ids(s.waiting) == ["c"] and s.held_slots == 0  # the schedule ended the hold
    check_sched_invariants(s, out)
    s.update_from_output(out)
    out = s.schedule()
    assert ids(out.requests) == ["b", "c"]
    assert block_ids(s, "b") == [3, 4, 5, 6] and block_ids(s, "c") == [7, 8]
    check_sched_invariants(s, out)


def test_with_both_holds_slot_and_blocks_come_back_after_the_next_schedule():
    s = _two_running_one_finishes(hold=True, async_free_after_next_schedule=True)
    assert block_ids(s, "a") == [1, 2] and s.held_slots == 1 and free_ids(s) == [6, 7, 8, 9, 10]
    out = s.schedule()
    assert ids(out.requests) == ["b"] and ids(s.waiting) == ["c"]
    assert block_ids(s, "a") == [] and free_ids(s) == [7, 8, 9, 10, 2, 1]


def test_holds_add_up_within_a_step_and_a_full_hold_with_nothing_running_is_void():
    s = make_sched(num_gpu_blocks=11, max_num_seqs=2, async_scheduling=True, async_hold_finished_slots=True)
    s.add_request(req("a", 16, out=1))
    s.add_request(req("b", 16, out=1))
    out, res = step(s)
    assert ids(res.finished) == ["a", "b"] and s.held_slots == 2 and not s.running
    s.add_request(req("c", 16, out=2))
    out = s.schedule()          # vLLM: schedule t + 1 empty, step t applied, scheduled again with the slots free
    assert ids(out.requests) == ["c"] and s.held_slots == 0


def test_the_fast_path_admission_reads_the_hold_and_ends_it():
    s = _two_running_one_finishes(hold=True)
    reqs, tokens, before = s.admit_waiting(100)
    assert reqs == [] and ids(s.waiting) == ["c"] and s.held_slots == 0
    s.retire([])
    reqs, tokens, before = s.admit_waiting(100)
    assert ids(reqs) == ["c"] and tokens == [32] and before == [0]


def test_decode_steps_skipped_by_a_driver_end_the_hold():
    s = _two_running_one_finishes(hold=True)
    s.skip_steps(3)
    assert s.held_slots == 0


@pytest.mark.parametrize("bad, message", [
    ({"async_scheduling": False}, "async_hold_finished_slots = true needs async_scheduling = true"),
    ({"async_scheduling": True, "scheduler": "static"}, "applies to scheduler = continuous"),
])
def test_the_hold_is_a_configuration_error_where_it_cannot_apply(bad, message):
    with pytest.raises(ValueError, match=message):
        make_sched(num_gpu_blocks=11, async_hold_finished_slots=True, **bad)


HOLD = {"server": {"async_hold_finished_slots": True, "max_num_seqs": 12}}


def test_fast_path_is_identical_to_step_by_step_with_the_hold(fast_forward_steps):  # noqa: F811
    slow = _run(MIXED, HOLD, fast_path=False)
    assert fast_forward_steps["steps"] == 0
    fast = _run(MIXED, HOLD, fast_path=True)
    assert fast_forward_steps["steps"] > 0.5 * len(fast.steps), fast_forward_steps
    assert fast_forward_steps["decode_runs"] > 10, fast_forward_steps
    _assert_same_results(fast, slow)


def test_the_hold_binds_in_that_workload():
    held = _run(MIXED, HOLD, fast_path=True)
    free = _run(MIXED, {"server": {"max_num_seqs": 12}}, fast_path=True)
    ttft = [r.first_token_s - r.arrival_s for r in held.requests if r.first_token_s is not None]
    ttft_free = [r.first_token_s - r.arrival_s for r in free.requests if r.first_token_s is not None]
    assert sum(ttft) > sum(ttft_free)


def test_the_knob_admits_as_round_20_s_trial_wrapper():
    """The reading's wrapper (benchmarks/llama70b_stage1_tail.py ``holding_slots``, with the block hold) and the
    knob (with the block hold) admit the same requests step after step, on a run that fills every slot."""
    from benchmark_module import load_benchmark

    tail = load_benchmark("llama70b_stage1_tail")
    runs = []
    for use_knob in (False, True):
        s = make_sched(num_gpu_blocks=40, max_num_seqs=3, async_scheduling=True,
                       async_free_after_next_schedule=True, async_hold_finished_slots=use_knob)
        if not use_knob:
            tail.holding_slots(s)
        for i, (prompt, out) in enumerate([(20, 1), (30, 2), (16, 3), (40, 1), (18, 2), (25, 4), (17, 1), (33, 2)]):
            s.add_request(req(f"r{i}", prompt, out=out))
        steps = []
        while s.has_unfinished_requests():
            out, res = step(s)
            steps.append((ids(out.requests), ids(res.finished)))
        runs.append(steps)
    assert runs[0] == runs[1]
    assert runs[0][:4] == [(["r0", "r1", "r2"], ["r0"]), (["r1", "r2"], ["r1"]),   # r3 waits: r0 holds its slot
                           (["r2", "r3"], ["r2", "r3"]), (["r4"], [])]             # two held: r4 alone
