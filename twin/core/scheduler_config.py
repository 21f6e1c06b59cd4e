"""The serving knobs the scheduler and KV cache read, spelled as vLLM spells them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class SchedulerKnobs(BaseModel):
    """The knobs a scenario's ``server:`` section and the resolved scheduler configuration share."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scheduler: Literal["continuous", "prefill_first", "static"] = "continuous"
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    block_size: int = Field(16, ge=1, le=1024)
    long_prefill_token_threshold: int = Field(0, ge=0)
    policy: Literal["fcfs", "priority"] = "fcfs"
    # vLLM's async scheduling: the next step's batch is chosen while the current one runs, so a request that
    # arrives during a step first runs in the step after the next. The twin's replica runs one batch at a time and
    # applies a step's output before the next schedule(): a request that schedule preempts already holds the
    # step's token, the state vLLM reaches when the in-flight output arrives (SchedulerBase.update_from_output
    # appends it for a driver that does keep two batches in flight)
    async_scheduling: bool = False
    # (opt-in reading, issue 33 round 15) with async scheduling, vLLM's engine core schedules step t + 1 before it
    # applies step t's output, so a request that finished in step t returns its blocks only after that schedule:
    # the blocks are held through one more schedule() (the fast path is off while this is set)
    async_free_after_next_schedule: bool = False
    # (opt-in, issue 33 round 20) with async scheduling, a request that finished in step t stays in vLLM's
    # ``running`` until step t's output is applied, after schedule t + 1: its max_num_seqs slot is held through
    # that schedule (no token is scheduled for it: twin.core.async_slot_hold). Fast path and step-by-step path
    async_hold_finished_slots: bool = False
    # version-dependent behaviours, off here; a scenario's server.vllm_version sets them (twin.core.vllm_versions)
    reserve_null_block: bool = True
    free_unhashed_blocks_to_head: bool = False
    scheduler_reserve_full_isl: bool = False
    prefix_cache_stats_at_admission: bool = False
    # a newly admitted request with one token to compute (a fully cached prompt) joins an all-decode batch
    # padded with num_speculative_tokens placeholder drafts, so the step keeps the uniform 1 + k shape
    pad_spec_decode_first_step: bool = False
    admission_watermark: float = Field(0.0, ge=0.0, lt=1.0)
    # static batching (FasterTransformer-style servers)
    static_batch_size: int = Field(8, ge=1)
    static_batch_timeout_s: float = Field(0.0, ge=0.0)
    static_reserve_max_length: bool = True
    static_pad_finished: bool = True


class SchedulerConfig(SchedulerKnobs):
    """Everything the scheduler reads, with every limit resolved to a number."""

    max_num_seqs: int = Field(256, ge=1)
    max_num_batched_tokens: int = Field(8192, ge=1)
    max_model_len: int = Field(8192, ge=2)
    num_lookahead_tokens: int = Field(0, ge=0)
    num_speculative_tokens: int = Field(0, ge=0)   # k of speculative decoding (0: off)
    # `vllm serve` answers 400 to a request whose prompt plus max_tokens exceeds max_model_len (its OpenAI
    # server's input validation); the offline LLM class serves it and stops at max_model_len
    reject_over_context: bool = False
    # KV offload tiers under the prefix cache, host first: (capacity in blocks, seconds to load one block)
    # (twin.core.kv_offload; resolved from the server's kv_offloading_* knobs); (): no offloading
    kv_offload_tiers: tuple[tuple[int, float], ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> "SchedulerConfig":
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= max_num_seqs "
                             f"({self.max_num_seqs})")
        whole_prompts = self.scheduler == "prefill_first" or not self.enable_chunked_prefill
        if self.scheduler != "static" and whole_prompts and self.max_num_batched_tokens < self.max_model_len:
            raise ValueError(f"without chunked prefill, max_num_batched_tokens "
                             f"({self.max_num_batched_tokens}) must be >= max_model_len ({self.max_model_len})")
        if self.async_free_after_next_schedule and not self.async_scheduling:
            raise ValueError("async_free_after_next_schedule = true needs async_scheduling = true (a vLLM release "
                             ">= 0.14 or the knob itself)")
        if self.async_hold_finished_slots and not self.async_scheduling:
            raise ValueError("async_hold_finished_slots = true needs async_scheduling = true (a vLLM release "
                             ">= 0.14 or the knob itself)")
        if self.async_hold_finished_slots and self.scheduler != "continuous":
            raise ValueError(f"async_hold_finished_slots = true applies to scheduler = continuous (vLLM V1's), "
                             f"not {self.scheduler}")
        return self
