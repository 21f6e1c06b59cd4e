"""vLLM's async slot hold: what a request that finished in step t still holds while step t + 1 is scheduled.

The facts, from vLLM's V1 engine (vllm-project/vllm, releases with async scheduling, >= 0.14):

* ``vllm/v1/engine/core.py``, ``EngineCore.step_with_batch_queue``: while the batch queue has room and the
  scheduler ``has_requests()``, the core calls ``scheduler.schedule()`` for the next batch and launches it
  without blocking; only then does it pop the oldest batch, wait for its model output and call
  ``scheduler.update_from_output``. So schedule t + 1 runs before step t's output is applied.
* ``vllm/v1/core/sched/scheduler.py``, ``Scheduler.update_from_output``: a request that stops (``check_stop``:
  ``max_tokens`` reached, EOS, a stop token) is collected in ``stopped_running_reqs``, taken out of
  ``self.running`` there, and ``_free_request`` -> ``_free_blocks`` returns its KV blocks there. Until then it is
  in ``self.running``.
* ``Scheduler.schedule``, the waiting loop: ``if len(self.running) == self.max_num_running_reqs: break``. A
  request that finished in step t therefore counts against ``max_num_seqs`` in schedule t + 1.
* ``Scheduler.schedule``, the running loop, under async scheduling (``num_output_placeholders > 0``, set by
  ``vllm/v1/core/sched/async_scheduler.py``, ``AsyncScheduler._update_after_schedule``): a request whose
  in-flight step already reaches ``num_prompt_tokens + max_tokens`` is skipped (``req_index += 1; continue``):
  no token, no batch row, no budget. A request that stops on EOS instead is not known to have stopped and gets
  one more decode row whose token is discarded.

The twin's driver applies step t's output before it schedules step t + 1 (``twin.sim.replica``), so the hold is
a count: ``SchedulerBase.retire`` adds the requests finished by the step just applied to ``held_slots``, the next
admission (``Scheduler.schedule_waiting``) admits up to ``max_num_seqs - held_slots`` running requests, and every
schedule (``schedule()``, the fast path's ``admit_waiting`` and ``skip_steps``) ends the hold. An engine with
nothing running or waiting after step t drops it too: vLLM's schedule t + 1 is then empty, the core blocks on step
t's output and frees the slots before anything that arrives later is scheduled (``Replica.sleep_until_work``,
``Replica.admit_deferred``). So does a hold of every slot with nothing else running (``Scheduler.schedule_waiting``):
vLLM's schedule t + 1 is empty then too, and the core schedules again at once with the slots free.

Modelled: the ``max_tokens`` case (the twin's requests stop at a known output length, as a benchmark client with
``ignore_eos`` asks): the slot is held, no row is scheduled. Not modelled: the EOS case's discarded decode row,
and vLLM's preemption picking a finished-but-unapplied request as its victim. The KV blocks' hold is the
separate knob ``async_free_after_next_schedule`` (step-by-step path only); this one is the slot alone and runs on
the fast path too.
"""
