"""The engine core's step (twin.core.engine_core) and its one finishing rule, vLLM-test style: exact
steps, statuses and blocks on a small pool."""

from __future__ import annotations

from tests.core_helpers import block_ids, free_ids, ids, make_sched, req
from twin.core.engine_core import EngineCore
from twin.core.request import Request, RequestStatus


def test_the_finishing_rule_counts_to_the_first_of_target_max_tokens_and_max_model_len():
    r = Request("r", 0.0, 10, 3, max_tokens=2)
    assert (r.stop_at_tokens, r.output_tokens_left(100), r.output_tokens_left(11)) == (2, 2, 1)
    r.num_output_tokens = 2
    assert r.output_tokens_left(100) == 0 and r.finish_status() == RequestStatus.FINISHED_LENGTH_CAPPED
    s = Request("s", 0.0, 10, 3)
    s.num_output_tokens = 3
    assert s.output_tokens_left(100) == 0 and s.finish_status() == RequestStatus.FINISHED_STOPPED


def test_core_loop_finishes_each_request_by_the_one_rule():
    sched = make_sched(max_model_len=64)
    core = EngineCore(sched)
    a, b, c = req("a", 10, 3), req("b", 10, 5, max_tokens=2), req("c", 60, 10)
    assert all(core.add(r) for r in (a, b, c))
    finished_at = {}
    now = 0.0
    while core.has_work():
        out = core.schedule(now)
        now += 1.0                                       # the driver's clock: one second a step
        result = core.update(out)
        finished_at.update((r.request_id, (now, r.status, r.num_output_tokens)) for r in result.finished)
    assert finished_at == {"b": (2.0, RequestStatus.FINISHED_LENGTH_CAPPED, 2),   # max_tokens 2 < target 5
                           "a": (3.0, RequestStatus.FINISHED_STOPPED, 3),
                           "c": (4.0, RequestStatus.FINISHED_LENGTH_CAPPED, 4)}   # 60 + 4 = max_model_len
    assert sched.num_finished == 3 and sched.running == []
    assert len(free_ids(sched)) == 10                    # every usable block back in the free queue


def test_abort_frees_the_blocks_and_leaves_no_work():
    sched = make_sched()
    core = EngineCore(sched)
    a = req("a", 40, 10)
    core.add(a)
    core.update(core.schedule(0.0))
    assert a.num_output_tokens == 1 and len(free_ids(sched)) == 7    # 40 + 1 tokens: 3 blocks of 16
    core.abort(a)
    assert a.status == RequestStatus.FINISHED_ABORTED and not core.has_work() and len(free_ids(sched)) == 10


def test_the_fast_paths_seams_admit_as_schedule_does_and_count_skipped_steps():
    """``admit_waiting`` (admissions after running requests the caller scheduled itself) gives the batch,
    computed counts and blocks ``schedule()`` gives; ``skip_steps`` counts steps run without ``schedule()`` and
    drops the rejections made meanwhile."""
    a, b = make_sched(), make_sched()
    for s in (a, b):
        s.add_request(req("x", 30, out=3))
        s.add_request(req("y", 90, out=3))
        s.add_request(req("never", 500, out=3))          # longer than the pool: rejected at add_request
    out = a.schedule()
    reqs, tokens, before = b.admit_waiting(100)
    assert [r.request_id for r in reqs] == ids(out.requests) == ["x", "y"]
    assert tokens == out.num_new_tokens == [30, 70]
    assert before == out.num_computed_before == [0, 0]
    assert [r.num_computed_tokens for r in reqs] == [30, 70]
    assert [block_ids(b, r) for r in ("x", "y")] == [block_ids(a, r) for r in ("x", "y")] == [[1, 2], [3, 4, 5, 6, 7]]
    assert ids(out.rejected) == ["never"] and ids(b.rejected_unreported) == ["never"]
    assert (a.step_index, b.step_index) == (1, 0)
    b.skip_steps(3)
    assert b.step_index == 3 and b.rejected_unreported == []
