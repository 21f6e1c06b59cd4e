"""What every scheduler shares: admission checks and rejection, the queues, and ``update_from_output``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from twin.core.kv_cache_manager import KVCacheManager
from twin.core.kv_offload import OffloadingKVCacheManager
from twin.core.request import Request, RequestStatus
from twin.core.request_queue import make_queue
from twin.core.scheduler_config import SchedulerConfig
from twin.core.scheduler_output import SchedulerOutput, StepResult


class SchedulerBase:
    def __init__(self, config: SchedulerConfig, num_gpu_blocks: int) -> None:
        self.config = config
        self.block_size = config.block_size
        self.max_model_len = config.max_model_len
        kv_kwargs = {"offload_tiers": config.kv_offload_tiers} if config.kv_offload_tiers else {}
        self.kv_cache_manager = (OffloadingKVCacheManager if kv_kwargs else KVCacheManager)(
            num_gpu_blocks, config.block_size, enable_caching=config.enable_prefix_caching,
            max_model_len=config.max_model_len, reserve_null_block=config.reserve_null_block,
            free_unhashed_to_head=config.free_unhashed_blocks_to_head, **kv_kwargs)
        self.waiting = make_queue(config.policy)
        self.running: list[Request] = []
        self.step_index = 0
        self.num_preemptions = 0
        self.num_finished = 0
        self.num_aborted = 0
        self.rejected: list[Request] = []
        # requests refused at add_request, reported with the next schedule() (public: the fast path, which
        # reports none, drops them)
        self.rejected_unreported: list[Request] = []
        # KV connector (P/D), vLLM's semantics. Producer: finished requests keep their blocks until their KV
        # has been read (``delay_free_blocks``; the driver frees them). Consumer: requests whose KV is pulled
        # from a remote engine (``Request.load_kv_async``) get their blocks when first scheduled, wait in
        # ``loading`` (WAITING_FOR_REMOTE_KVS) until ``finish_remote_load``; ``on_load_start`` starts the pull
        self.delay_free_blocks = False
        # async_free_after_next_schedule: finished requests whose blocks the next schedule() returns
        self.free_after_schedule: list[Request] | None = (
            [] if config.async_scheduling and config.async_free_after_next_schedule else None)
        # async_hold_finished_slots (twin.core.async_slot_hold): requests finished by the step last applied,
        # still counted against max_num_seqs by the next schedule
        self.hold_slots = config.async_scheduling and config.async_hold_finished_slots
        self.held_slots = 0
        self.num_load_pending = 0          # load_kv_async requests in the waiting queue, blocks not yet allocated
        self.loading: dict[Request, None] = {}
        self.on_load_start: Callable[[Request], None] | None = None

    # ---- admission ------------------------------------------------------------------------------------
    def reject_reason(self, request: Request) -> str | None:
        """Why a request can never be served here, or None. A real server refuses these up front."""
        if request.num_prompt_tokens >= self.max_model_len:
            return (f"prompt of {request.num_prompt_tokens} tokens leaves no room to generate within "
                    f"max_model_len={self.max_model_len}")
        if self.config.reject_over_context and request.num_prompt_tokens + request.max_tokens > self.max_model_len:
            return (f"prompt of {request.num_prompt_tokens} tokens plus max_tokens {request.max_tokens} exceeds "
                    f"max_model_len={self.max_model_len} (vllm serve answers 400)")
        peak_tokens = min(request.num_prompt_tokens + request.max_tokens, self.max_model_len)
        peak_tokens += self.config.num_lookahead_tokens
        if not self.kv_cache_manager.can_fit(peak_tokens):
            usable = self.kv_cache_manager.block_pool.num_usable_blocks
            return (f"needs {-(-peak_tokens // self.block_size)} KV blocks of {self.block_size} tokens at its "
                    f"longest, the pool has {usable}")
        if self.config.admission_watermark > 0 and self.config.scheduler != "static":
            # admissions (and resumptions after preemption) must leave the watermark free: a request that
            # could not be admitted even into an empty pool would block the queue head forever
            usable = self.kv_cache_manager.block_pool.num_usable_blocks
            reserve = int(self.config.admission_watermark * usable)
            peak_blocks = -(-peak_tokens // self.block_size)
            if peak_blocks + reserve > usable:
                return (f"needs {peak_blocks} KV blocks of {self.block_size} tokens at its longest, the pool has "
                        f"{usable} of which {reserve} are held back by the admission watermark")
        return None

    def add_request(self, request: Request) -> bool:
        """Queue a request, or reject it (status FINISHED_REJECTED, reported in the next step's output)."""
        reason = self.reject_reason(request)
        if reason is not None:
            request.status = RequestStatus.FINISHED_REJECTED
            request.reject_reason = reason
            self.rejected.append(request)
            self.rejected_unreported.append(request)
            return False
        request.status = RequestStatus.WAITING
        self.waiting.add(request)
        if request.load_kv_async:
            self.num_load_pending += 1
        return True

    def finish_requests(self, requests: Sequence[Request],
                        status: RequestStatus = RequestStatus.FINISHED_ABORTED) -> None:
        """Finish requests from outside the engine loop, as vLLM's ``Scheduler.finish_requests`` does for a
        client abort: each leaves the running list or the waiting queue, takes ``status`` and frees its KV
        blocks (cached blocks keep their hashes). A request in the step now running is skipped by that
        step's ``update_from_output`` (it is no longer RUNNING). Already finished requests are ignored."""
        for req in requests:
            if req.is_finished:
                continue
            if req.status == RequestStatus.RUNNING:
                self.running.remove(req)
            elif req.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                del self.loading[req]
            else:
                self.waiting.remove(req)
                if req.load_kv_async:
                    self.num_load_pending -= 1
            req.status = status
            req.num_spec_tokens = 0
            self.kv_cache_manager.free(req)
            if status == RequestStatus.FINISHED_ABORTED:
                self.num_aborted += 1

    def retire(self, finished: list[Request]) -> None:
        """The one finishing routine: requests that emitted their last token (``Request.output_tokens_left``
        reached 0) take their finish status, free their KV blocks in the given order, leave ``running`` and are
        counted. ``update_from_output`` and the fast path's decode cohort both end requests here."""
        free = self.kv_cache_manager.free if not self.delay_free_blocks else _keep_blocks
        if self.free_after_schedule is not None and not self.delay_free_blocks:
            free = self.free_after_schedule.append
        for req in finished:
            if req.status == RequestStatus.PREEMPTED:
                # its last token was in flight when a later schedule preempted it: it leaves the waiting queue
                # (vLLM's ``stopped_preempted_reqs``); its blocks were freed at the preemption
                self.waiting.remove(req)
            req.status = req.finish_status()
            free(req)
        done = set(finished)   # requests hash by identity
        self.running = [req for req in self.running if req not in done]
        self.num_finished += len(finished)
        if self.hold_slots:
            self.held_slots += len(finished)

    def skip_steps(self, num_steps: int = 1) -> None:
        """Count ``num_steps`` steps a driver ran without ``schedule()`` (the fast path's decode runs). Their
        outputs carry no rejections: those made meanwhile are dropped from ``rejected_unreported`` (the driver
        closed their records when ``add_request`` refused them)."""
        self.step_index += num_steps
        self.held_slots = 0
        if self.rejected_unreported:
            self.rejected_unreported = []

    def has_unfinished_requests(self) -> bool:
        return bool(self.running) or bool(self.waiting)

    def _new_output(self) -> SchedulerOutput:
        out = SchedulerOutput(step_index=self.step_index)
        self.step_index += 1
        if self.rejected_unreported:
            out.rejected = self.rejected_unreported
            self.rejected_unreported = []
        return out

    def _finish_output(self, out: SchedulerOutput) -> SchedulerOutput:
        if self.free_after_schedule:
            # step t's output arrives after step t + 1 was scheduled (async scheduling): its finished requests'
            # blocks return now, in the order they finished
            for req in self.free_after_schedule:
                self.kv_cache_manager.free(req)
            self.free_after_schedule = []
        self.held_slots = 0
        out.total_num_scheduled_tokens = sum(out.num_new_tokens)
        out.num_running_after = len(self.running)
        out.num_waiting_after = len(self.waiting)
        out.kv_usage = self.kv_cache_manager.usage
        return out

    def _lookup_prefix(self, req: Request) -> tuple[list, int]:
        """The prefix hit of a waiting request; with ``prefix_cache_stats_at_admission`` the counters wait for
        ``_admit``, so a request that fails to allocate and retries next step is counted once."""
        return self.kv_cache_manager.get_computed_blocks(
            req, record_stats=not self.config.prefix_cache_stats_at_admission)

    def _start_remote_load(self, req: Request, hit_blocks: list, reserve: int, full_isl: bool) -> bool:
        """The waiting queue's head pulls its prompt's KV from a remote engine (vLLM's scheduler with
        ``load_kv_async``): slots for every prompt token past the local prefix hit are allocated now, not yet
        registered in the prefix cache (``delay_cache_blocks``: they are taken as lookahead slots), no token is
        scheduled and no budget used; the request leaves the queue for ``loading`` and the pull starts. False
        (nothing allocated, the request stays at the head) when the pool cannot hold it."""
        kv = self.kv_cache_manager
        local = len(hit_blocks) * self.block_size
        if kv.allocate_slots(req, 0, local, hit_blocks, req.num_prompt_tokens - local, reserve, full_isl) is None:
            return False
        if self.config.prefix_cache_stats_at_admission:
            kv.record_prefix_cache_stats(req, local)
        self.waiting.pop()
        req.status = RequestStatus.WAITING_FOR_REMOTE_KVS
        req.load_kv_async = False
        self.num_load_pending -= 1
        self.loading[req] = None
        if self.on_load_start is not None:
            self.on_load_start(req)
        return True

    def finish_remote_load(self, req: Request) -> None:
        """The pull of ``req``'s KV has finished (vLLM's ``finished_recving``): as ``_update_waiting_for_remote_kv``,
        its blocks' tokens count as computed (all but the last token, recomputed to produce logits), the full
        blocks are registered in the prefix cache, and it waits at the queue head for the next schedule."""
        del self.loading[req]
        kv = self.kv_cache_manager
        blocks = kv.get_blocks(req.request_id)
        num_tokens = req.num_prompt_tokens + req.num_output_tokens
        computed = min(len(blocks) * self.block_size, num_tokens)
        if computed == num_tokens:
            computed -= 1
        if kv.enable_caching:
            kv.cache_full_blocks(req, blocks, computed)
        req.num_computed_tokens = computed
        req.status = RequestStatus.WAITING
        self.waiting.prepend(req)

    def _admit(self, req: Request, num_hit: int, out: SchedulerOutput, looked_up: bool = True) -> None:
        """Move the waiting queue's head to running, its prefix hit counted as computed (``looked_up``: the
        hit came from ``_lookup_prefix``)."""
        if looked_up and self.config.prefix_cache_stats_at_admission:
            self.kv_cache_manager.record_prefix_cache_stats(req, num_hit)
        self.waiting.pop()
        if req.status == RequestStatus.PREEMPTED:
            out.num_resumed_requests += 1
        out.num_new_requests += 1
        req.status = RequestStatus.RUNNING
        req.num_computed_tokens = num_hit
        if req.num_cached_tokens < 0:
            req.num_cached_tokens = num_hit
        self.running.append(req)

    def _allocate_or_preempt_newest(self, req: Request, n: int, preempted: list[Request],
                                    num_lookahead_tokens: int = 0) -> bool:
        """Slots for ``n`` tokens of a running request, preempting the newest running requests until they
        fit; False when ``req`` itself had to go."""
        allocate = self.kv_cache_manager.allocate_slots
        while allocate(req, n, num_lookahead_tokens=num_lookahead_tokens) is None:
            victim = self.running.pop()
            self._on_preempt(victim)
            self._preempt(victim)
            preempted.append(victim)
            if victim is req:
                return False
        return True

    def _on_preempt(self, victim: Request) -> None:
        """Hook for scheduler-specific bookkeeping before a victim is preempted."""

    def _preempt(self, request: Request) -> None:
        """Recompute preemption: free the blocks (they keep their hashes), restart, back to the queue head."""
        self.kv_cache_manager.free(request)
        request.status = RequestStatus.PREEMPTED
        request.num_computed_tokens = 0
        request.num_spec_tokens = 0
        request.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.prepend(request)

    # ---- after the forward pass -----------------------------------------------------------------------
    def update_from_output(self, out: SchedulerOutput, num_generated: Sequence[int] | None = None,
                           sampled_token_ids: Sequence[Sequence[int]] | None = None) -> StepResult:
        """Apply what the step produced. ``num_generated[i]`` is the number of tokens the forward pass
        produced for scheduled request i (1 + accepted drafts for a verification, 0 for a partial prefill);
        ``sampled_token_ids`` gives real tokens instead. By default a request whose computed tokens caught up
        with its tokens produces one token. Rejected drafts are rolled back from ``num_computed_tokens``.

        A request finished while the step ran (a client abort) drops the step's output. A request preempted
        while the step ran (a driver with more than one batch in flight scheduled the next step before this
        one's output came back: vLLM's async scheduling, pipeline parallelism) keeps it: the sampled tokens are
        appended, so it resumes with them, and if they were its last it finishes from the waiting queue, as
        vLLM's ``update_from_output`` does (tests/v1/core/test_scheduler.py, test_preempt_during_execution)."""
        requests = out.requests
        n_real = len(requests) - out.num_padding
        num_emitted = [0] * len(requests)
        accepted_spec = [0] * len(requests)
        finished: list[Request] = []
        max_model_len = self.max_model_len
        spec = out.num_spec_tokens
        for i in range(n_real):
            req = requests[i]
            if req.status == RequestStatus.RUNNING:
                if sampled_token_ids is not None:
                    gen = len(sampled_token_ids[i])
                elif num_generated is not None:
                    gen = num_generated[i]
                else:
                    gen = 1 if req.num_computed_tokens >= req.num_prompt_tokens + req.num_output_tokens else 0
            elif req.status == RequestStatus.PREEMPTED:
                gen = _in_flight_output(req, out, i, num_generated, sampled_token_ids)
            else:
                continue           # finished while the step ran: its output is dropped
            num_spec = spec[i]
            if num_spec:
                accepted = gen - 1 if gen > 0 else 0
                if accepted > num_spec:
                    raise ValueError(f"request {req.request_id}: {accepted} drafts accepted of {num_spec}")
                if req.num_computed_tokens:      # a preempted request has nothing to roll back
                    req.num_computed_tokens -= num_spec - accepted
                req.num_spec_tokens = 0
                accepted_spec[i] = accepted
            if gen == 0:
                continue
            left = req.output_tokens_left(max_model_len)
            emit = gen if gen < left else left
            if sampled_token_ids is not None:
                req.append_output_tokens(emit, list(sampled_token_ids[i][:emit]))
            else:
                req.num_output_tokens += emit
            num_emitted[i] = emit
            if emit >= left:
                finished.append(req)
        if finished:
            self.retire(finished)
        return StepResult(num_emitted=num_emitted, finished=finished, num_accepted_spec=accepted_spec)


def _keep_blocks(req: Request) -> None:
    """A KV producer's finished request keeps its blocks until its KV has been read (vLLM's delay_free_blocks)."""


def _in_flight_output(req: Request, out: SchedulerOutput, i: int, num_generated: Sequence[int] | None,
                      sampled_token_ids: Sequence[Sequence[int]] | None) -> int:
    """Tokens step ``out`` produced for row ``i``, a request preempted while the step ran: its computed count
    restarted at 0, so the default rule asks where the step itself computed up to."""
    if sampled_token_ids is not None:
        return len(sampled_token_ids[i])
    if num_generated is not None:
        return num_generated[i]
    computed = out.num_computed_before[i] + out.num_new_tokens[i]
    return 1 if computed >= req.num_prompt_tokens + req.num_output_tokens else 0

