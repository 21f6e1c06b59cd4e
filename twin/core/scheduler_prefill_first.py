"""Prefill-first scheduling without mixing (vLLM V0 style, chunked prefill off): a step is all prefill or
all decode. Whole prompts are admitted first whenever any fit; otherwise every running request decodes."""

from __future__ import annotations

from twin.core.scheduler_base import SchedulerBase
from twin.core.scheduler_output import SchedulerOutput


class PrefillFirstScheduler(SchedulerBase):
    def schedule(self, now_s: float | None = None) -> SchedulerOutput:
        out = self._new_output()
        if self.waiting and len(self.running) < self.config.max_num_seqs:
            self._schedule_prefills(out)
        if not out.requests:
            self._schedule_decodes(out)
        out.num_computed_before = [r.num_computed_tokens for r in out.requests]
        out.num_spec_tokens = [r.num_spec_tokens for r in out.requests]
        for req, n in zip(out.requests, out.num_new_tokens):
            req.num_computed_tokens += n
        return self._finish_output(out)

    def _schedule_prefills(self, out: SchedulerOutput) -> None:
        kv = self.kv_cache_manager
        budget = self.config.max_num_batched_tokens
        reserve = int(self.config.admission_watermark * kv.block_pool.num_usable_blocks)
        while self.waiting and len(self.running) < self.config.max_num_seqs:
            req = self.waiting.peek()
            hit_blocks, num_hit = self._lookup_prefix(req)
            n = req.num_prompt_tokens + req.num_output_tokens - num_hit
            if n > budget or kv.allocate_slots(req, n, num_hit, hit_blocks, 0, reserve) is None:
                break
            self._admit(req, num_hit, out)
            out.requests.append(req)
            out.num_new_tokens.append(n)
            budget -= n

    def _schedule_decodes(self, out: SchedulerOutput) -> None:
        running = self.running
        budget = self.config.max_num_batched_tokens
        max_model_len = self.max_model_len
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            computed = req.num_computed_tokens
            n = req.num_prompt_tokens + req.num_output_tokens + req.num_spec_tokens - computed
            # drafts can overrun the budget and the model length: clip as the continuous scheduler does
            if n > budget:
                n = budget
            if n > max_model_len - 1 - computed:
                n = max_model_len - 1 - computed
            if not self._allocate_or_preempt_newest(req, n, out.preempted):
                break
            if req.num_spec_tokens:
                num_spec = n + computed - req.num_prompt_tokens - req.num_output_tokens
                req.num_spec_tokens = num_spec if num_spec > 0 else 0
            out.requests.append(req)
            out.num_new_tokens.append(n)
            budget -= n
            i += 1
