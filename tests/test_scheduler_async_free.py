"""``async_free_after_next_schedule``: vLLM's engine core with async scheduling schedules step t + 1 before it
applies step t's output (``EngineCore.step_with_batch_queue``: filling the batch queue comes first), so the
blocks of a request that finished in step t are still held when step t + 1 is scheduled."""

from __future__ import annotations

import pytest

from core_helpers import block_ids, check_sched_invariants, free_ids, ids, make_sched, req, step


def _run(lag: bool):
    s = make_sched(num_gpu_blocks=7, async_scheduling=True, async_free_after_next_schedule=lag)  # usable 1..6
    s.add_request(req("a", 32, out=1))
    s.add_request(req("b", 48, out=5))
    out, res = step(s)
    assert ids(out.requests) == ["a", "b"]
    assert ids(res.finished) == ["a"]
    assert block_ids(s, "b") == [3, 4, 5]
    s.add_request(req("c", 32, out=3))
    return s


def test_without_the_lag_a_finished_request_frees_before_the_next_schedule():
    s = _run(lag=False)
    assert free_ids(s) == [6, 2, 1]
    out = s.schedule()
    assert ids(out.requests) == ["b", "c"]
    assert block_ids(s, "b") == [3, 4, 5, 6]
    assert block_ids(s, "c") == [2, 1]
    check_sched_invariants(s, out)


def test_with_the_lag_its_blocks_return_after_the_next_schedule():
    s = _run(lag=True)
    assert block_ids(s, "a") == [1, 2]            # finished, off the running list, blocks still held
    assert ids(s.running) == ["b"]
    assert free_ids(s) == [6]
    out = s.schedule()
    assert ids(out.requests) == ["b"]             # c does not fit the one free block
    assert block_ids(s, "b") == [3, 4, 5, 6]
    assert ids(s.waiting) == ["c"]
    assert block_ids(s, "a") == [] and free_ids(s) == [2, 1]     # returned once step 2 was scheduled
    s.update_from_output(out)
    out = s.schedule()
    assert ids(out.requests) == ["b", "c"]
    assert block_ids(s, "c") == [2, 1]
    check_sched_invariants(s, out)


def test_the_lag_needs_async_scheduling():
    with pytest.raises(ValueError, match="async_free_after_next_schedule = true needs async_scheduling = true"):
        make_sched(num_gpu_blocks=7, async_scheduling=False, async_free_after_next_schedule=True)
