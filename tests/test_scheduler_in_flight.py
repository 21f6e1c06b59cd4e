"""A step's output that comes back after a later schedule() (more than one batch in flight: vLLM's async
scheduling, pipeline parallelism): vLLM-style exact tests on the small pool (budget 100, block size 16,
11 blocks = null block + 10 usable).

vLLM's ``update_from_output`` skips only requests that finished while the step ran (a client abort); a request
preempted in the meantime still gets its sampled tokens appended, resumes with them, and finishes from the
waiting queue when they were its last (tests/v1/core/test_scheduler.py, ``test_preempt_during_execution``).
"""

from __future__ import annotations

from core_helpers import block_ids, check_sched_invariants, free_ids, ids, make_sched, req
from twin.core.engine_core import EngineCore
from twin.core.request import Request, RequestStatus
from twin.spec_decode import AcceptanceModel, NgramDrafter, Speculator


def _real(rid: str, prompt: int, out: int) -> Request:
    """A request with real token ids (as the calibration engine sends them)."""
    return Request(rid, 0.0, prompt, out, prompt_token_ids=list(range(prompt)))


def _two_prompts_in_flight(r1_out_tokens: int = 10, real: bool = True):
    """r0 and r1 (80-token prompts, 5 blocks each) scheduled in two steps before either step's output is back;
    then r0's output comes back and the next schedule() needs r0's 6th block: r1 is preempted with its
    prefill step still in flight. Returns (core, r0, r1, out1, out2)."""
    sched = make_sched(enable_prefix_caching=False)
    core = EngineCore(sched)
    make = _real if real else (lambda rid, p, o: req(rid, p, out=o))
    r0, r1 = make("r0", 80, 10), make("r1", 80, r1_out_tokens)
    core.add(r0)
    out0 = core.schedule(0.0)
    assert ids(out0.requests) == ["r0"] and out0.num_new_tokens == [80]
    assert block_ids(sched, "r0") == [1, 2, 3, 4, 5]
    core.add(r1)
    out1 = core.schedule(0.0)            # r0 has nothing left to compute until its token is back
    assert ids(out1.requests) == ["r1"] and out1.num_new_tokens == [80]
    assert block_ids(sched, "r1") == [6, 7, 8, 9, 10]
    assert free_ids(sched) == []
    res0 = core.update(out0, [[0]] if real else None)
    assert res0.num_emitted == [1] and r0.num_output_tokens == 1
    out2 = core.schedule(0.0)            # r0's decode needs a 6th block: the newest running request goes
    assert ids(out2.requests) == ["r0"] and out2.num_new_tokens == [1]
    assert ids(out2.preempted) == ["r1"]
    assert ids(sched.running) == ["r0"] and ids(sched.waiting) == ["r1"]
    assert r1.status == RequestStatus.PREEMPTED and r1.num_computed_tokens == 0 and r1.num_preemptions == 1
    # r1's blocks went back last first; r0 took the free queue's head
    assert block_ids(sched, "r0") == [1, 2, 3, 4, 5, 10]
    assert free_ids(sched) == [9, 8, 7, 6]
    return core, r0, r1, out1, out2


def test_preempted_request_keeps_the_token_of_its_step_in_flight():
    core, r0, r1, out1, out2 = _two_prompts_in_flight()
    sched = core.scheduler
    res1 = core.update(out1, [[42]])
    assert res1.num_emitted == [1] and res1.finished == []
    assert r1.output_token_ids == [42] and r1.num_output_tokens == 1
    # still preempted, at the head of the queue, nothing computed, no blocks
    assert r1.status == RequestStatus.PREEMPTED and r1.num_computed_tokens == 0
    assert ids(sched.waiting) == ["r1"] and block_ids(sched, "r1") == []
    check_sched_invariants(sched)
    # it resumes with its token: 81 tokens to recompute (6 blocks) once r0 is done
    res2 = core.update(out2, [[7]])
    assert res2.num_emitted == [1] and r0.output_token_ids == [0, 7]
    while r0.status == RequestStatus.RUNNING:
        out = core.schedule(0.0)
        assert ids(out.requests) == ["r0"]       # 4 free blocks: r1's 6 cannot be had before r0 finishes
        core.update(out, [[1]])
    assert r0.status == RequestStatus.FINISHED_STOPPED and r0.num_output_tokens == 10
    out = core.schedule(0.0)
    assert ids(out.requests) == ["r1"] and out.num_new_tokens == [81] and out.num_computed_before == [0]
    assert out.num_resumed_requests == 1
    # r0 freed last block first (10, 5, 4, 3, 2, 1 to the tail): r1 takes the head
    assert block_ids(sched, "r1") == [9, 8, 7, 6, 10, 5]
    check_sched_invariants(sched, out)


def test_default_output_counts_the_token_of_a_preempted_request():
    """Without real tokens (the twin): the preempted request's finished prefill still emits its one token."""
    core, r0, r1, out1, _ = _two_prompts_in_flight(real=False)
    res1 = core.update(out1)
    assert res1.num_emitted == [1]
    assert r1.num_output_tokens == 1 and r1.output_token_ids is None
    assert r1.status == RequestStatus.PREEMPTED


def test_preempted_request_whose_in_flight_token_is_its_last_finishes_from_the_waiting_queue():
    core, r0, r1, out1, _ = _two_prompts_in_flight(r1_out_tokens=1)
    sched = core.scheduler
    res1 = core.update(out1, [[42]])
    assert res1.num_emitted == [1] and ids(res1.finished) == ["r1"]
    assert r1.status == RequestStatus.FINISHED_STOPPED and r1.output_token_ids == [42]
    assert ids(sched.waiting) == [] and ids(sched.running) == ["r0"] and sched.num_finished == 1
    check_sched_invariants(sched)


def test_request_aborted_while_its_step_runs_drops_the_output():
    core, r0, r1, out1, _ = _two_prompts_in_flight()
    core.abort(r1)
    res1 = core.update(out1, [[42]])
    assert res1.num_emitted == [0] and res1.finished == []
    assert r1.status == RequestStatus.FINISHED_ABORTED and r1.output_token_ids == []
    assert ids(core.scheduler.waiting) == []
    check_sched_invariants(core.scheduler)


def _verification_in_flight_when_preempted():
    """r1 verifies 2 drafts in batch B while r0's decode batch A is still in flight (A was built with a budget of
    one token, as vLLM's own test narrows ``max_num_scheduled_tokens``); A's output comes back, r0's next token
    needs a 5th block and r1 is preempted with B in flight. Returns (core, r1, out_b)."""
    sched = make_sched(enable_prefix_caching=False)
    full_budget = sched.config
    core = EngineCore(sched)
    r0, r1 = req("r0", 62, out=20), req("r1", 80, out=10)
    core.add(r0)
    core.add(r1)
    out = core.schedule(0.0)
    assert out.num_new_tokens == [62, 38]
    core.update(out)
    out = core.schedule(0.0)
    assert out.num_new_tokens == [1, 42]
    core.update(out)
    assert (r0.num_output_tokens, r1.num_output_tokens) == (2, 1)
    sched.config = full_budget.model_copy(update={"max_num_batched_tokens": 1})
    out_a = core.schedule(0.0)
    assert ids(out_a.requests) == ["r0"] and out_a.num_new_tokens == [1]
    sched.config = full_budget
    r1.num_spec_tokens = 2                 # drafts proposed for r1
    out_b = core.schedule(0.0)
    assert ids(out_b.requests) == ["r1"] and out_b.num_new_tokens == [3] and out_b.num_spec_tokens == [2]
    assert block_ids(sched, "r0") == [1, 2, 3, 4] and block_ids(sched, "r1") == [5, 6, 7, 8, 9, 10]
    core.update(out_a)
    out_c = core.schedule(0.0)
    assert ids(out_c.requests) == ["r0"] and ids(out_c.preempted) == ["r1"]
    assert block_ids(sched, "r0") == [1, 2, 3, 4, 10] and free_ids(sched) == [9, 8, 7, 6, 5]
    assert r1.status == RequestStatus.PREEMPTED and r1.num_spec_tokens == 0
    return core, r1, out_b


def test_preempted_verification_keeps_its_accepted_drafts_and_rolls_nothing_back():
    """B's output: 1 of 2 drafts accepted, 2 tokens append, and r1's computed count stays 0 (vLLM rolls back
    only a request that still has computed tokens)."""
    core, r1, out_b = _verification_in_flight_when_preempted()
    res = core.update(out_b, [[8, 9]])
    assert res.num_emitted == [2] and res.num_accepted_spec == [1] and res.finished == []
    assert r1.num_output_tokens == 3 and r1.num_computed_tokens == 0 and r1.num_spec_tokens == 0
    assert r1.status == RequestStatus.PREEMPTED and ids(core.scheduler.waiting) == ["r1"]
    check_sched_invariants(core.scheduler)


def test_speculator_samples_for_a_preempted_verification():
    """The twin's speculator draws the acceptance of a verification whose request was preempted meanwhile
    (every draft accepted here): 1 + 2 tokens, counted as one verification."""
    core, r1, out_b = _verification_in_flight_when_preempted()
    sp = Speculator(2, {"default": AcceptanceModel.iid(1.0, 2)}, NgramDrafter(1e-6), seed=0)
    gen = sp.num_generated(out_b)
    assert gen == [3]
    assert (sp.stats.num_verifications, sp.stats.num_draft_tokens, sp.stats.num_accepted_tokens) == (1, 2, 2)
    res = core.scheduler.update_from_output(out_b, gen)
    assert res.num_emitted == [3] and res.num_accepted_spec == [2]
    assert r1.num_output_tokens == 4 and r1.num_computed_tokens == 0
