"""vLLM V1's continuous-batching scheduler.

No prefill or decode phases: each step hands out tokens so that every request's ``num_computed_tokens``
catches up with its ``num_tokens_with_spec``, running requests first, then waiting ones (only when nothing was
preempted this step), within ``max_num_batched_tokens`` and ``max_num_seqs``.
"""

from __future__ import annotations

from twin.core.request import Request
from twin.core.scheduler_base import SchedulerBase
from twin.core.scheduler_output import SchedulerOutput


class Scheduler(SchedulerBase):
    def schedule(self, now_s: float | None = None) -> SchedulerOutput:
        cfg = self.config
        kv = self.kv_cache_manager
        allocate = kv.allocate_slots
        out = self._new_output()
        token_budget = cfg.max_num_batched_tokens
        threshold = cfg.long_prefill_token_threshold
        max_model_len = self.max_model_len
        lookahead = cfg.num_lookahead_tokens
        by_priority = cfg.policy == "priority"

        sched_reqs: list[Request] = []
        sched_tokens: list[int] = []
        preempted: list[Request] = []

        # A. running requests, in admission order
        running = self.running
        prefill_scheduled = False
        i = 0
        while i < len(running) and token_budget > 0:
            req = running[i]
            computed = req.num_computed_tokens
            n = req.num_prompt_tokens + req.num_output_tokens + req.num_spec_tokens - computed
            if computed < req.num_prompt_tokens + req.num_output_tokens - 1:
                prefill_scheduled = True
            if 0 < threshold < n:
                n = threshold
            if n > token_budget:
                n = token_budget
            if n > max_model_len - 1 - computed:
                n = max_model_len - 1 - computed
            if n <= 0:
                i += 1
                continue
            scheduled = True
            while allocate(req, n, num_lookahead_tokens=lookahead) is None:
                if by_priority:
                    # ties (equal priority and arrival time, common in traces) go to the most recently
                    # admitted, as under FCFS; taking the first would let a request preempt itself forever
                    victim = max(reversed(running), key=_priority_key)
                    vi = running.index(victim)
                    del running[vi]
                    if vi < i:
                        i -= 1
                    if victim in sched_reqs:
                        j = sched_reqs.index(victim)
                        del sched_reqs[j]
                        token_budget += sched_tokens.pop(j)
                else:
                    victim = running.pop()
                self._preempt(victim)
                preempted.append(victim)
                if victim is req:
                    scheduled = False
                    break
            if not scheduled:
                break
            if req.num_spec_tokens:
                # the budget may cut the drafts: verify only those scheduled
                num_spec = n + computed - req.num_prompt_tokens - req.num_output_tokens
                req.num_spec_tokens = num_spec if num_spec > 0 else 0
            sched_reqs.append(req)
            sched_tokens.append(n)
            token_budget -= n
            i += 1

        # B. waiting requests, only if nothing was preempted in this step
        if not preempted and self.waiting:
            token_budget = self.schedule_waiting(out, token_budget, sched_reqs, sched_tokens, prefill_scheduled)

        # computed tokens advance at schedule time, before the forward pass
        before = [0] * len(sched_reqs)
        spec = [0] * len(sched_reqs)
        for j, req in enumerate(sched_reqs):
            before[j] = req.num_computed_tokens
            spec[j] = req.num_spec_tokens
            req.num_computed_tokens += sched_tokens[j]
        out.requests = sched_reqs
        out.num_new_tokens = sched_tokens
        out.num_computed_before = before
        out.num_spec_tokens = spec
        out.preempted = preempted
        return self._finish_output(out)


    def schedule_waiting(self, out: SchedulerOutput, token_budget: int, sched_reqs: list[Request],
                         sched_tokens: list[int], prefill_scheduled: bool) -> int:
        """Admit waiting requests into this step after the running ones (``sched_reqs``/``sched_tokens``, which
        get the admitted appended; ``prefill_scheduled``: a running request is still in its prefill). The
        admitted requests' computed tokens are the caller's to advance. Returns the budget left."""
        cfg = self.config
        kv = self.kv_cache_manager
        allocate = kv.allocate_slots
        threshold = cfg.long_prefill_token_threshold
        max_model_len = self.max_model_len
        lookahead = cfg.num_lookahead_tokens
        running = self.running
        waiting = self.waiting
        max_seqs = cfg.max_num_seqs - self.held_slots   # async slot hold (twin.core.async_slot_hold)
        if max_seqs <= 0:
            # every slot held, nothing running: vLLM's schedule t + 1 is empty, it applies step t and schedules
            # again at once with the slots free
            max_seqs = cfg.max_num_seqs
        chunked = cfg.enable_chunked_prefill
        reserve = int(cfg.admission_watermark * kv.block_pool.num_usable_blocks)
        full_isl = cfg.scheduler_reserve_full_isl
        # uniform-decode padding needs a batch of running decodes to match (vLLM's pad_spec_decode)
        pad_k = cfg.num_speculative_tokens if (cfg.pad_spec_decode_first_step and sched_reqs
                                                and not prefill_scheduled) else 0
        if 0 < threshold < 1 + pad_k:
            pad_k = 0
        while waiting and token_budget > 0 and len(running) < max_seqs:
            req = waiting.peek()
            looked_up = req.num_computed_tokens == 0
            if looked_up:
                hit_blocks, num_hit = self._lookup_prefix(req)
                if req.load_kv_async:     # P/D decode: allocate, pull the KV, schedule nothing yet
                    if not self._start_remote_load(req, hit_blocks, reserve, full_isl):
                        break
                    continue
                num_new_computed = num_hit
            else:
                # computed before it waited (a remote KV load that finished): nothing new is computed
                hit_blocks, num_hit, num_new_computed = [], req.num_computed_tokens, 0
            n = req.num_prompt_tokens + req.num_output_tokens - num_hit
            if 0 < threshold < n:
                n = threshold
            padded = False
            if pad_k and n == 1 and num_hit + 2 + pad_k <= max_model_len:
                if 1 + pad_k > token_budget:
                    break  # rather not scheduled than scheduled unpadded
                n = 1 + pad_k
                padded = True
            if n > token_budget:
                if not chunked:
                    break  # head-of-line: the whole prompt must fit this step
                n = token_budget
            # (scheduler_reserve_full_isl) the whole prompt must fit the free blocks, not just this chunk
            if allocate(req, n, num_new_computed, hit_blocks, lookahead, reserve, full_isl) is None:
                break
            self._admit(req, num_hit, out, looked_up)
            if padded:
                req.num_spec_tokens = pad_k
                out.spec_placeholders.append(len(sched_reqs))
            sched_reqs.append(req)
            sched_tokens.append(n)
            token_budget -= n
        return token_budget


    def admit_waiting(self, token_budget: int) -> tuple[list[Request], list[int], list[int]]:
        """Admissions into a step whose running requests the caller scheduled itself and which left
        ``token_budget`` tokens (the fast path: its running requests are all plain decodes, no prefill among
        them), as ``schedule()`` admits after its running requests; their computed tokens advance as
        ``schedule()`` advances them. Returns (requests, tokens scheduled, tokens computed before)."""
        reqs: list[Request] = []
        tokens: list[int] = []
        self.schedule_waiting(SchedulerOutput(0), token_budget, reqs, tokens, False)
        self.held_slots = 0
        before = [0] * len(reqs)
        for j, req in enumerate(reqs):
            before[j] = req.num_computed_tokens
            req.num_computed_tokens += tokens[j]
        return reqs, tokens, before


def _priority_key(req: Request) -> tuple[int, float]:
    return (req.priority, req.arrival_time_s)
