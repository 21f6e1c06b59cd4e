"""A replica's fast path: engine steps while every running request is a plain decode.

``schedule()`` and ``update_from_output()`` walk every running request at every step. Here the running
decodes are a ``DecodeCohort`` (one step counter; work only at block boundaries and finishes), waiting
requests are admitted by the scheduler's own ``admit_waiting`` and join the cohort once their prefill is
done. The fast path hands back to the step-by-step path, every request written back, before any step it does
not cover: the decodes exceed the token budget or the free blocks (preemption), or a prefill is split over
steps. Same steps, same order, same blocks, same records as the step-by-step path (tests/test_engine.py).

What each piece replaces, and why the result is the same:

* the loop in ``cohort_steps``: one ``schedule()`` / cost / ``update_from_output()`` round per step; a step with
  admissions is costed from its integer sums (the cost model's ``step_time_from_sums``, the same sums
  ``step_time_s`` forms from the per-request lists), and its admissions' outputs still go through
  ``update_from_output``;
* ``_decode_steps`` / ``_plan_decode_run``: the run of steps in which nobody waits and no member finishes, costed
  in one call (``decode_step_times_s``, bit-identical to the steps' sums), their blocks popped in one go (pops and
  registrations commute, ``DecodeCohort.schedule``) and their rows appended in bulk;
* ``_clock_to``: one SimPy timeout per step, by one timeout whose delay lands on the same float sum
  (``twin.sim.clock.delay_landing_on``; one per step again where rounding forbids it).

SimPy is yielded to only where something else could happen: a step that ends at or after the next event on
the clock, or one whose end has effects outside the replica (a request finishes and a client may act on it
or the run may drain: ``Replica.finish_wakes_anyone``). Other steps, admissions among them, run on a local
clock; the SimPy clock then jumps to the end of the last of them in one timeout that lands on exactly the sum
SimPy would have formed step by step.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from itertools import accumulate, cycle, islice
from operator import mul

from twin.core.request import RequestStatus
from twin.core.scheduler_output import SchedulerOutput
from twin.sim.clock import delay_landing_on
from twin.sim.decode_cohort import DecodeCohort


def cohort_steps(replica):
    """Generator run inside the replica's SimPy process (see the module doc)."""
    env = replica.env
    sched = replica.scheduler
    kv = sched.kv_cache_manager
    pool = kv.block_pool
    free_queue = pool.free_block_queue
    cohort = replica.cohort = DecodeCohort(kv, sched.max_model_len)
    for req in sched.running:
        cohort.join(req)
    cost = replica.cost_model
    step_time_from_sums = getattr(cost, "step_time_from_sums", None)
    decode_step_times_s = getattr(cost, "decode_step_times_s", None)
    budget = sched.config.max_num_batched_tokens
    steps_append = replica.steps.append
    index = replica.index
    finishing = cohort.finishing
    clock_s = env.now      # the local clock: the end of the last step run
    unyielded_dts = []     # durations of the steps run since the SimPy clock last caught up
    try:
        while True:
            waiting = sched.waiting
            num_decodes = len(cohort)
            if ((not num_decodes and not waiting) or num_decodes > budget
                    or cohort.num_new_blocks() > free_queue.num_free_blocks):
                break
            if sched.num_load_pending and unyielded_dts and waiting:
                # P/D: a remote KV pull starts when its blocks are allocated, which must be on the SimPy clock
                break
            if (not waiting and not replica.deferred and decode_step_times_s is not None
                    and cohort.step not in finishing):
                clock_s, unyielded_dts = yield from _decode_steps(replica, cohort, decode_step_times_s, clock_s,
                                                                  unyielded_dts)
                continue
            # schedule: the decodes, then admissions
            context = cohort.context()
            contexts = cohort.contexts() if step_time_from_sums is None else None
            finishes = cohort.step in finishing
            cohort.schedule()
            if waiting:
                new_reqs, new_tokens, new_before = sched.admit_waiting(budget - num_decodes)
            else:
                new_reqs, new_tokens, new_before = [], [], []
            sched.skip_steps(1)      # after the admissions: they read the async slot hold, this ends it
            row_waiting, row_running, row_usage = len(sched.waiting), len(sched.running), pool.get_usage()
            if replica.deferred:
                replica.admit_deferred()
            if not num_decodes and not new_reqs:   # nothing scheduled (admissions blocked): as the scheduler's path
                if not replica.deferred:
                    yield from _clock_to(env, clock_s, unyielded_dts, None)
                    unyielded_dts = []
                    yield replica.sleep_until_work()
                break
            n_seqs = num_decodes + len(new_reqs)
            tokens = num_decodes + sum(new_tokens)
            prefill_seqs = prefill_tokens = 0
            for j, req in enumerate(new_reqs):
                if new_tokens[j] != 1 or new_before[j] < req.num_prompt_tokens:
                    prefill_seqs += 1
                    prefill_tokens += new_tokens[j]
            if step_time_from_sums is not None:
                dt = step_time_from_sums(n_seqs, tokens, context + sum(new_before),
                                         context + sum(map(mul, new_tokens, new_before)),
                                         num_decodes + sum(map(mul, new_tokens, new_tokens)), 0)
            else:
                dt = cost.step_time_s(SchedulerOutput(0, list(sched.running), [1] * num_decodes + new_tokens,
                                                      contexts + new_before, [0] * n_seqs))
            start = clock_s
            clock_s = end = start + dt
            if (finishes and replica.finish_wakes_anyone()) or end >= env.peek():
                yield from _in_step_until(replica, end, unyielded_dts, dt)
                unyielded_dts = []
            else:
                unyielded_dts.append(dt)
            # what the step emitted: every decode one token (members settled as they finish, freed first as
            # they come first in running order); the admissions as update_from_output has them
            finished = cohort.complete(end)
            if finished:
                sched.retire(finished)
            partial = False
            if new_reqs:
                result = sched.update_from_output(SchedulerOutput(0, new_reqs, new_tokens, new_before,
                                                                  [0] * len(new_reqs)))
                for req, k in zip(new_reqs, result.num_emitted):
                    if k:
                        req.client_data.add_emission(end, k)
                    elif req.status == RequestStatus.RUNNING:
                        partial = True             # a prefill chunk: the step-by-step path takes over
                finished += result.finished
            for req in finished:
                replica.finish(req, end)
            steps_append(start, dt, n_seqs, prefill_seqs, n_seqs - prefill_seqs, tokens, prefill_tokens,
                         tokens - prefill_tokens, 0, 0, row_waiting, row_running, row_usage, index, 0.0)
            for req in new_reqs:
                if req.status == RequestStatus.RUNNING and not partial:
                    if cohort.can_join(req):
                        cohort.join(req)
                    else:
                        partial = True
            if partial:
                break
        if unyielded_dts:          # the loop stopped after steps run on the local clock: catch SimPy up
            yield from _in_step_until(replica, clock_s, unyielded_dts, None)
    finally:
        replica.cohort = None
        cohort.settle_all(replica.in_step)


def _decode_steps(replica, cohort: DecodeCohort, step_times, clock_s: float, unyielded_dts: list[float]):
    """One run of steps of the cohort alone (nobody waiting): up to the step before the first that a member
    finishes in (or through it, when a finish now wakes nobody: the finishes are then settled without
    yielding), as many as the free blocks cover, up to the first that ends at or after the next event on the
    clock (run to its end, SimPy caught up). The steps are costed in one call (the cost model's
    ``decode_step_times_s``, bit-identical to the scheduled path's sums), their blocks popped in step order in
    one go, their rows appended together. Returns the local clock and the durations not yet yielded."""
    sched = replica.scheduler
    pool = sched.kv_cache_manager.block_pool
    horizon = replica.env.peek()
    max_steps = min(cohort.finishing) - cohort.step + (not replica.finish_wakes_anyone())
    num_free = pool.free_block_queue.num_free_blocks
    dts, times, taken = _plan_decode_run(cohort, step_times, clock_s, horizon, num_free, max_steps)
    k = len(dts)
    cohort.schedule(k)
    sched.skip_steps(k)
    clock_s = times[-1]
    steps, index, n, num_usable = replica.steps, replica.index, len(cohort), pool.num_usable_blocks
    if k > 1:
        cohort.complete_run(times[1:-1])
    if clock_s >= horizon:   # the last step is running while SimPy catches up; the ones before it are done
        if k > 1:
            steps.append_decode_run(times[:-2], dts[:-1], n, index, num_free, num_usable, taken[:-1])
        yield from _in_step_until(replica, clock_s, unyielded_dts + dts[:-1], dts[-1])
        unyielded_dts = []
        steps.append_decode_run(times[-2:-1], dts[-1:], n, index, num_free, num_usable, taken[-1:])
    else:
        unyielded_dts += dts
        del times[-1]
        steps.append_decode_run(times, dts, n, index, num_free, num_usable, taken)
    finished = cohort.complete(clock_s)
    if finished:
        sched.retire(finished)
        for req in finished:
            replica.finish(req, clock_s)
    return clock_s, unyielded_dts


def _plan_decode_run(cohort: DecodeCohort, step_times, start_s: float, horizon: float, num_free_blocks: int,
                     max_steps: int) -> tuple[list[float], list[float], list[int]]:
    """Durations, times (the run's start ``start_s``, then each step's end) and blocks taken by each step's scheduling
    (counted from the run's start) of the cohort's next decode steps (at least one: the caller checked that the
    free blocks cover it), up to ``max_steps``, as many as ``num_free_blocks`` cover, up to the first that ends
    at or after ``horizon``. The clock is summed left to right, as SimPy sums it."""
    n = len(cohort)
    context = cohort.context()
    if horizon != math.inf:   # steps enough to reach it (none is shorter than the first; a run may end early)
        first_dt = step_times(n, context, 1)[0]
        if first_dt > 0:
            reach = (horizon - start_s) / first_dt   # compared as a float: a far horizon may exceed any integer
            if reach + 2 < max_steps:
                max_steps = max(1, int(reach) + 2)
    used = list(accumulate(islice(cycle(cohort.new_blocks(max_steps)), max_steps)))
    k = bisect_right(used, num_free_blocks)
    dts = step_times(n, context, k)
    times = list(accumulate(dts, initial=start_s))
    first_past = bisect_left(times, horizon, 1)
    if first_past < k:
        k = first_past
        del dts[k:], times[k + 1:]
    del used[k:]
    return dts, times, used


def _in_step_until(replica, end: float, earlier_dts: list[float], last_dt: float | None):
    """``_clock_to`` while the replica is inside a step (a client abort meanwhile sees the step running)."""
    replica.in_step = True
    yield from _clock_to(replica.env, end, earlier_dts, last_dt)
    replica.in_step = False


def _clock_to(env, end: float, earlier_dts: list[float], last_dt: float | None):
    """Yield until the SimPy clock reads ``end``: the clock plus ``earlier_dts`` then ``last_dt`` summed left to
    right, as one timeout per step would leave it. One timeout whose delay lands exactly on ``end``; should
    rounding make that impossible, one timeout per step."""
    delay = delay_landing_on(env.now, end)
    if delay is not None:
        yield env.timeout(delay)
        return
    for dt in earlier_dts:
        yield env.timeout(dt)
    if last_dt is not None:
        yield env.timeout(last_dt)
