"""The running decodes of one replica, advanced without touching every request at every step.

While a running request is a plain decode (one new token per step, no drafts) its counters follow the step
count: computed and output tokens grow by one per step. The cohort records, per member, the step it joined
at and its counters then, and advances every member with one step counter. A step touches only the members
something happens to: a block boundary (a new KV block to allocate, a full block to register in the prefix
cache) and a finish. Members are grouped by their position within a block, so the members at a boundary in
step ``s`` are one dict lookup away; finishes are filed by step when a member joins. A member whose blocks
from here on are all private (``Request.private_from_token``: nobody else can look them up) has the ones it
fills registered once, when it leaves; others as they fill.

A member's counters and token times are written back to its request and record when it leaves: when it
finishes, when the client aborts it, when the run stops, and when the replica falls back to the scheduler's
step-by-step path (``settle_all``). In between, the request objects' counters are stale; the replica is the
only reader. Members with summary records (``records: {token_times: summary}``) have their tokens and gaps
counted by step instead, one entry per step in the run's ``ItlSummary`` however many emitted in it.
"""

from __future__ import annotations

import math
from array import array
from itertools import repeat

import numpy as np

from twin.core.free_block_queue import KVCacheBlock
from twin.core.kv_cache_manager import KVCacheManager
from twin.core.request import Request
from twin.results.token_summary import ItlSummary


class Member:
    """One running decode in the cohort: its request, its counters when it joined (``computed_at_join``,
    ``output_at_join``: at step s it has computed ``computed_at_join + s - join_step`` tokens), the step it joined
    at and the step it emits its last token in (``finish_step``), its position within a KV block (``phase``: the
    steps it takes a new block at), and how its full blocks reach the prefix cache (``registers_on_leave``) and its
    tokens the record (``counted_by_step``)."""
    __slots__ = ("request", "computed_at_join", "output_at_join", "join_step", "finish_step", "phase",
                 "registers_on_leave", "counted_by_step")

    def __init__(self, request: Request, join_step: int, finish_step: int, phase: int,
                 registers_on_leave: bool, counted_by_step: bool) -> None:
        self.request = request
        self.computed_at_join = request.num_computed_tokens
        self.output_at_join = request.num_output_tokens
        self.join_step = join_step
        self.finish_step = finish_step
        self.phase = phase
        self.registers_on_leave = registers_on_leave
        self.counted_by_step = counted_by_step   # a summary record: its tokens and gaps counted by step


class DecodeCohort:
    """Lazy decode state of one replica's running requests (all of them, in running order)."""

    forget_every_steps = 1 << 16

    def __init__(self, kv: KVCacheManager, max_model_len: int) -> None:
        self.kv = kv
        self.block_size = kv.block_size
        self.max_model_len = max_model_len
        self.members: dict[Request, Member] = {}          # in running order
        self.by_phase: dict[int, dict[Request, list[KVCacheBlock]]] = {}   # member -> its block table, by phase
        # members by phase, phases from block_size - 1 down to 0: the counts of the steps in order (see new_blocks)
        self.num_by_phase_down = [0] * self.block_size
        self.registering_by_phase: dict[int, dict[Request, Member]] = {}   # the members registering as they fill
        self.finishing: dict[int, list[Member]] = {}
        self.step = 0                 # the next step to schedule (cohort-local numbering)
        self.context_base = 0        # sum of (computed_at_join - join_step); the members' context at step s: this + n s
        self.end_times_s = array("d")  # end times of the completed steps from step number end_times_base on
        self.end_times_base = 0
        self.forget_at = 0             # forget_end_times when more steps than this have completed
        self.itl: ItlSummary | None = None   # the summary records' ITL summary (one per run)
        self.num_counted_by_step = 0   # members whose tokens and gaps the steps count
        self.last_end_s = math.nan     # end of the last completed step (NaN: none)
        # once a member counts by step: how many counting members emitted in each step completed from step
        # counted_from on (their ends are in end_times_s), handed to the ITL summary in bulk (ItlSummary.add_steps)
        self.counted_requests = array("q")
        self.counted_from = 0
        self.counted_prev_s = math.nan  # end of the step before counted_from (NaN: none)

    def __len__(self) -> int:
        return len(self.members)

    # ---- membership -------------------------------------------------------------------------------------------
    def can_join(self, req: Request) -> bool:
        """A plain decode (its last token is an output token: a prompt's last token is prefill) whose blocks
        are exactly the ones its tokens so far need."""
        num_tokens = req.num_prompt_tokens + req.num_output_tokens
        if req.num_computed_tokens != num_tokens - 1 or req.num_spec_tokens or not req.num_output_tokens:
            return False
        blocks = self.kv.req_to_blocks.get(req.request_id)
        return blocks is not None and len(blocks) == -(-(num_tokens - 1) // self.block_size)

    def join(self, req: Request) -> None:
        """Add a decode that is first scheduled in step ``self.step`` (after every current member)."""
        s = self.step
        num_tokens = req.num_prompt_tokens + req.num_output_tokens
        steps_left = req.output_tokens_left(self.max_model_len)
        # tokens before step t: num_tokens + t - s; a block fills when that is a multiple of the block size
        phase = (num_tokens - s) % self.block_size
        private_from = req.private_from_token
        registers_on_leave = (private_from is not None and self.kv.enable_caching
                              and self.kv.num_cached_blocks[req.request_id] >= private_from // self.block_size)
        itl = getattr(req.client_data, "itl", None)
        if itl is not None:
            if self.itl is None:
                self.itl = itl
                self.counted_from = self.end_times_base + len(self.end_times_s)
                self.counted_prev_s = self.last_end_s
            elif itl is not self.itl:
                raise ValueError(f"request {req.request_id}: its record belongs to another run's ITL summary")
            self.num_counted_by_step += 1
        member = Member(req, s, s + steps_left - 1, phase, registers_on_leave, itl is not None)
        self.members[req] = member
        self.by_phase.setdefault(phase, {})[req] = self.kv.req_to_blocks[req.request_id]
        self.num_by_phase_down[self.block_size - 1 - phase] += 1
        if not registers_on_leave:
            self.registering_by_phase.setdefault(phase, {})[req] = member
        self.finishing.setdefault(member.finish_step, []).append(member)
        self.context_base += member.computed_at_join - s

    def _drop(self, member: Member) -> None:
        req = member.request
        del self.members[req]
        del self.by_phase[member.phase][req]
        self.num_by_phase_down[self.block_size - 1 - member.phase] -= 1
        if not member.registers_on_leave:
            group = self.registering_by_phase[member.phase]
            del group[req]
            if not group:   # empty: a run whose members all register on leave skips the registration pass
                del self.registering_by_phase[member.phase]
        self.context_base -= member.computed_at_join - member.join_step
        if member.counted_by_step:
            self.num_counted_by_step -= 1

    # ---- one step ---------------------------------------------------------------------------------------------
    def num_new_blocks(self) -> int:
        """Blocks the next step's decodes need (one per member whose last block is full)."""
        return self.num_by_phase_down[(self.step - 2) % self.block_size]

    def new_blocks(self, num_steps: int) -> list[int]:
        """``num_new_blocks`` of each of the next ``min(num_steps, block_size)`` steps (the pattern repeats:
        nobody joins or leaves in between). Step s allocates for the members of phase (1 - s) mod block size,
        the entry s - 2 mod block size of ``num_by_phase_down``; the steps after it take the entries after it."""
        first = (self.step - 2) % self.block_size
        counts = self.num_by_phase_down
        by_step = counts[first:] + counts[:first] if first else counts[:]
        return by_step if num_steps >= len(by_step) else by_step[:num_steps]

    def context(self) -> int:
        """Sum of the members' computed tokens before the next step."""
        return self.context_base + len(self.members) * self.step

    def schedule(self, num_steps: int = 1) -> None:
        """Slots for the next ``num_steps`` steps' decodes (nobody joins or finishes in between), as
        ``allocate_slots`` gives them member by member in running order, step by step: a new block to each
        member at a block boundary, in the order the steps would pop them, then each member's blocks filled by
        the last of these steps registered (but for members that register theirs when they leave). (Pops and
        registrations commute: popping a block only evicts a free block's hash; registrations of distinct
        requests' blocks commute: their hashes differ; a private block held by its request is read by nobody
        before the request leaves the cohort.) The caller checked the new blocks against the free queue."""
        s0 = self.step
        self.step = s0 + num_steps
        bs = self.block_size
        by_phase = self.by_phase
        registering_by_phase = self.registering_by_phase
        kv = self.kv
        req_to_blocks = kv.req_to_blocks
        allocating: list[list[KVCacheBlock]] = []   # the block tables to append to, one per block
        for s in range(s0, s0 + num_steps):
            group = by_phase.get((1 - s) % bs)
            if group:
                allocating += group.values()
        if allocating:
            for table, block in zip(allocating, kv.block_pool.get_new_blocks(len(allocating))):
                table.append(block)
        if registering_by_phase and kv.enable_caching:
            last = s0 + num_steps - 1
            cache_full_blocks = kv.cache_full_blocks
            for s in range(s0, s0 + min(num_steps, bs)):
                filling = registering_by_phase.get(-s % bs)
                if filling:
                    for req, m in filling.items():
                        cache_full_blocks(req, req_to_blocks[req.request_id],
                                          req.num_prompt_tokens + m.output_at_join + last - m.join_step)

    def complete_run(self, ends_s: list[float]) -> None:
        """Steps scheduled by ``schedule`` ended at ``ends_s`` (no member finishes in them)."""
        if self.itl is not None:
            self.counted_requests.extend(repeat(self.num_counted_by_step, len(ends_s)))
        self.last_end_s = ends_s[-1]
        self.end_times_s.extend(ends_s)
        if self.end_times_base + len(self.end_times_s) > self.forget_at:
            self._forget()

    def _forget(self) -> None:
        """``forget_end_times``, due: one of the steps just completed is a multiple of ``forget_every_steps``
        (``forget_at``, the next one once it is done)."""
        self.forget_at = (self.end_times_base + len(self.end_times_s) - 1) // self.forget_every_steps \
            * self.forget_every_steps + self.forget_every_steps
        self.hand_over_counted_steps()   # first: it reads the counted steps' ends from the end times
        self.forget_end_times()

    def hand_over_counted_steps(self) -> None:
        """Give the steps counted so far (those in which a counting member emitted) to the ITL summary."""
        num_steps = len(self.counted_requests)
        if not num_steps:
            return
        first = self.counted_from - self.end_times_base
        ends = np.frombuffer(self.end_times_s, np.float64)[first:first + num_steps]
        prevs = np.concatenate(([self.counted_prev_s], ends[:-1]))
        counts = np.frombuffer(self.counted_requests, np.int64)
        emitted = counts > 0
        self.itl.add_steps(array("d", prevs[emitted].tobytes()), array("d", ends[emitted].tobytes()),
                           array("q", counts[emitted].tobytes()))
        self.counted_prev_s = float(ends[-1])
        self.counted_from += num_steps
        self.counted_requests = array("q")

    def complete(self, end_s: float) -> list[Request]:
        """The step just scheduled ended at ``end_s``: every member emitted a token. Returns the members that
        emitted their last one (settled, left the cohort), in running order."""
        if self.itl is not None:
            self.counted_requests.append(self.num_counted_by_step)
        self.last_end_s = end_s
        self.end_times_s.append(end_s)
        if self.end_times_base + len(self.end_times_s) > self.forget_at:
            self._forget()
        s = self.step - 1
        due = self.finishing.pop(s, None)
        if not due:
            return []
        done = []
        for m in due:
            if self.members.get(m.request) is m:
                self._settle(m, s, s)
                self._drop(m)
                done.append(m.request)
        return done

    def forget_end_times(self) -> None:
        """Drop the end times of steps before every member joined (a long run would otherwise keep one per
        step)."""
        first = min((m.join_step for m in self.members.values()), default=self.step)
        del self.end_times_s[:first - self.end_times_base]
        self.end_times_base = first

    # ---- writing back -----------------------------------------------------------------------------------------
    def _settle(self, m: Member, last_scheduled: int, last_completed: int) -> None:
        req = m.request
        req.num_computed_tokens = m.computed_at_join + last_scheduled + 1 - m.join_step
        num_done = last_completed + 1 - m.join_step
        req.num_output_tokens = m.output_at_join + num_done
        if m.registers_on_leave:   # what the scheduled steps filled: its computed tokens
            kv = self.kv
            kv.cache_full_blocks(req, kv.req_to_blocks[req.request_id], req.num_computed_tokens)
        if num_done > 0:
            base = self.end_times_base
            if m.counted_by_step:   # the gap before its first step is counted there unless the cohort began with it
                req.client_data.add_counted_emissions(self.end_times_s[m.join_step - base],
                                                      self.end_times_s[last_completed - base], num_done,
                                                      m.join_step > 0)
            else:
                req.client_data.add_emissions(self.end_times_s[m.join_step - base:last_completed + 1 - base])

    def release(self, req: Request, in_step: bool) -> bool:
        """Settle and drop ``req`` (the client aborted it); ``in_step``: a step is running. False if it is
        not a member."""
        m = self.members.get(req)
        if m is None:
            return False
        last_completed = self.step - 2 if in_step else self.step - 1
        self._settle(m, self.step - 1, last_completed)
        self._drop(m)
        return True

    def settle_all(self, in_step: bool) -> None:
        """Write every member's state back (the replica goes step by step from here, or the run stopped)."""
        last_completed = self.step - 2 if in_step else self.step - 1
        for m in self.members.values():
            self._settle(m, self.step - 1, last_completed)
        self.members.clear()
        self.by_phase.clear()
        self.num_by_phase_down = [0] * self.block_size
        self.registering_by_phase.clear()
        self.finishing.clear()
        self.context_base = 0
        self.num_counted_by_step = 0
        self.hand_over_counted_steps()

    def contexts(self) -> list[int]:
        """Each member's computed tokens before the next step, in running order (for cost models that need
        the per-sequence list)."""
        s = self.step
        return [m.computed_at_join + s - m.join_step for m in self.members.values()]
