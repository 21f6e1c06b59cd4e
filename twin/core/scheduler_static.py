"""Static batching, as FasterTransformer-style servers run it: a batch forms only when the server is idle,
prefills together, and decodes until its longest request finishes; nothing is admitted until then.

``static_reserve_max_length`` reserves each request's KV for prompt + max_tokens up front (no preemption can
happen); without it blocks grow per step and a batch that runs out preempts its newest member.
``static_pad_finished`` keeps finished requests in the batch as padding that still costs compute, as a
fixed-shape batch does.
"""

from __future__ import annotations

from collections.abc import Sequence

from twin.core.request import Request, RequestStatus
from twin.core.scheduler_base import SchedulerBase
from twin.core.scheduler_output import SchedulerOutput, StepResult


class StaticBatchScheduler(SchedulerBase):
    def __init__(self, config, num_gpu_blocks: int) -> None:
        super().__init__(config, num_gpu_blocks)
        self.batch: list[Request] = []
        self._pad_context: dict[int, int] = {}
        self.next_wakeup_s: float | None = None

    def schedule(self, now_s: float | None = None) -> SchedulerOutput:
        out = self._new_output()
        self.next_wakeup_s = None
        if not self.batch:
            if self._should_form_batch(now_s):
                self._form_batch(out)
        else:
            self._decode_batch(out)
        out.num_spec_tokens = [r.num_spec_tokens if i < len(out.requests) - out.num_padding else 0
                               for i, r in enumerate(out.requests)]
        for i in range(len(out.requests) - out.num_padding):
            out.requests[i].num_computed_tokens += out.num_new_tokens[i]
        return self._finish_output(out)

    def _should_form_batch(self, now_s: float | None) -> bool:
        cfg = self.config
        if not self.waiting:
            return False
        if len(self.waiting) >= cfg.static_batch_size or cfg.static_batch_timeout_s <= 0 or now_s is None:
            return True
        deadline = self.waiting.peek().arrival_time_s + cfg.static_batch_timeout_s
        if now_s >= deadline:
            return True
        self.next_wakeup_s = deadline
        return False

    def _form_batch(self, out: SchedulerOutput) -> None:
        kv = self.kv_cache_manager
        cfg = self.config
        while self.waiting and len(self.batch) < cfg.static_batch_size:
            req = self.waiting.peek()
            hit_blocks, num_hit = self._lookup_prefix(req)
            n = req.num_prompt_tokens + req.num_output_tokens - num_hit
            reserve_tokens = 0
            if cfg.static_reserve_max_length:
                reserve_tokens = min(req.num_prompt_tokens + req.max_tokens, self.max_model_len) - num_hit - n
            if kv.allocate_slots(req, n, num_hit, hit_blocks, max(reserve_tokens, 0)) is None:
                break
            self._admit(req, num_hit, out)
            self.batch.append(req)
            out.requests.append(req)
            out.num_new_tokens.append(n)
            out.num_computed_before.append(num_hit)

    def _decode_batch(self, out: SchedulerOutput) -> None:
        running = self.running
        max_model_len = self.max_model_len
        i = 0
        while i < len(running):
            req = running[i]
            computed = req.num_computed_tokens
            n = req.num_prompt_tokens + req.num_output_tokens + req.num_spec_tokens - computed
            if n > max_model_len - 1 - computed:  # drafts must not run past the model length
                n = max_model_len - 1 - computed
                num_spec = n + computed - req.num_prompt_tokens - req.num_output_tokens
                req.num_spec_tokens = num_spec if num_spec > 0 else 0
            if not self._allocate_or_preempt_newest(req, n, out.preempted):
                break
            out.requests.append(req)
            out.num_new_tokens.append(n)
            out.num_computed_before.append(req.num_computed_tokens)
            i += 1
        if self.config.static_pad_finished:
            for req in self.batch:
                if req.is_finished:
                    ctx = self._pad_context.get(id(req), req.num_prompt_tokens + req.num_output_tokens)
                    self._pad_context[id(req)] = ctx + 1
                    out.requests.append(req)
                    out.num_new_tokens.append(1)
                    out.num_computed_before.append(ctx)
                    out.num_padding += 1

    def finish_requests(self, requests, status=RequestStatus.FINISHED_ABORTED) -> None:
        super().finish_requests(requests, status)
        if self.batch and all(r.is_finished for r in self.batch):
            self.batch = []
            self._pad_context.clear()

    def _on_preempt(self, victim: Request) -> None:
        self.batch.remove(victim)

    def update_from_output(self, out: SchedulerOutput, num_generated: Sequence[int] | None = None,
                           sampled_token_ids: Sequence[Sequence[int]] | None = None) -> StepResult:
        result = super().update_from_output(out, num_generated, sampled_token_ids)
        if self.batch and all(r.is_finished for r in self.batch):
            self.batch = []
            self._pad_context.clear()
        return result
