"""What one engine step does: the scheduler's plan, and what the forward pass emitted."""

from __future__ import annotations

from dataclasses import dataclass, field

from twin.core.request import Request


@dataclass(slots=True)
class SchedulerOutput:
    """One step's batch. Lists are parallel, one entry per scheduled request, in batch order
    (running requests first, then newly admitted ones)."""

    step_index: int
    requests: list[Request] = field(default_factory=list)
    num_new_tokens: list[int] = field(default_factory=list)        # tokens computed this step
    num_computed_before: list[int] = field(default_factory=list)   # tokens already in KV before this step
    num_spec_tokens: list[int] = field(default_factory=list)       # draft tokens verified this step
    spec_placeholders: list[int] = field(default_factory=list)     # indices whose drafts are padding (never accepted)
    num_new_requests: int = 0                                      # admitted this step (before any padding)
    num_padding: int = 0                                           # trailing finished sequences a static batch still carries
    num_resumed_requests: int = 0                                  # of those, previously preempted
    preempted: list[Request] = field(default_factory=list)
    rejected: list[Request] = field(default_factory=list)           # can never fit; finished as REJECTED
    total_num_scheduled_tokens: int = 0
    num_running_after: int = 0
    num_waiting_after: int = 0
    kv_usage: float = 0.0                                           # after allocation, 0..1

    @property
    def num_scheduled_requests(self) -> int:
        return len(self.requests)

    def is_empty(self) -> bool:
        return not self.requests

    def composition(self) -> tuple[int, int, int]:
        """(prefill sequences, prefill tokens, decode tokens) of the real (non-padding) entries. A decode
        computes its last sampled token (plus drafts) after the whole prompt; everything else is prefill,
        including a resumed request recomputing its context."""
        prefill_seqs = prefill_tokens = decode_tokens = 0
        new, before, spec = self.num_new_tokens, self.num_computed_before, self.num_spec_tokens
        for i in range(len(self.requests) - self.num_padding):
            n = new[i]
            if n == 1 + spec[i] and before[i] >= self.requests[i].num_prompt_tokens:
                decode_tokens += n
            else:
                prefill_seqs += 1
                prefill_tokens += n
        return prefill_seqs, prefill_tokens, decode_tokens


@dataclass(slots=True)
class StepResult:
    """What update_from_output() did with the forward pass's output."""

    num_emitted: list[int]              # output tokens appended per scheduled request (0 for a partial prefill)
    finished: list[Request]
    num_accepted_spec: list[int] = field(default_factory=list)
