"""Host time per sequence of a vLLM V1 decode step WITHOUT async scheduling, measured on this machine's CPU: the
stated prior of ``per_seq_overhead_s@sync`` where a fold has no sync server (``twin.fitting.held_priors``;
docs/fidelity.md "Round 9: Kimi and Qwen3 held out").

Without async scheduling the engine core's CPU work between two GPU steps is not hidden (twin.cost.sync_host). What
of it grows with the batch is book-keeping per running sequence, in five phases per step (read off vLLM 0.12's V1
engine core, scheduler and GPU model runner; this is our own model of that work, not its code):

1. plan: each sequence's tokens to compute this step, a KV block when its last one is full, and the prefix-cache
   hash of a block that just filled (16 tokens per block, prefix caching on);
2. hand-off: the step's plan (per sequence: id, new block ids, computed and output counts) serialised for the
   worker process and read back there (TP > 1 runs a multiprocess executor: every Qwen3 row);
3. worker tables: each sequence's computed count and new blocks written into numpy batch tables, and the
   per-sequence scheduled-token array built;
4. sampled tokens: the GPU's sampled ids copied to Python lists, written into the token table and the worker's
   per-sequence output list, and the reply (ids, index map, sampled lists) serialised back to the engine core;
5. outputs: each sequence's new token appended to its request, its stop conditions checked, one output record per
   sequence, and the records serialised for the front-end process.

Not modelled (so the figure is a LOWER bound of a server's per-sequence host time): per-request logging and
stats, the attention backend's metadata build (vectorised), the GIL hand-offs between the engine core's loop and
its I/O threads, and the front-end process (detokenisation, SSE), which runs beside the engine core.

    python benchmarks/sync_host_prior.py [--small 32] [--large 256] [--repeats 50]

It prints microseconds per sequence per step: (time at --large - time at --small) / (large - small), each the
fastest of five timings of the process's CPU time (a shared machine's waits do not count), so per-step constants
cancel. A server's host CPU may be faster or slower than this one: the figure is a prior, not a fit.
"""

from __future__ import annotations

import argparse
import pickle
import time
from dataclasses import dataclass, field

import numpy as np
import torch

TOKENS_PER_BLOCK = 16
MAX_BLOCKS_PER_SEQ = 512
PROMPT_TOKENS, MAX_MODEL_TOKENS, MAX_OUTPUT_TOKENS = 1000, 10240, 1024


@dataclass
class Sequence:
    """The engine core's view of one running request."""
    seq_id: str
    tokens: list[int]
    computed_tokens: int
    output_tokens: list[int] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)
    stop_token_ids: tuple[int, ...] = ()

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_tokens)


@dataclass
class StepPlan:
    """What the engine core sends its workers for one step (per sequence: id, new blocks, counts)."""
    ids: list[str]
    new_blocks: list
    computed: list[int]
    outputs: list[int]
    step_tokens: dict[str, int]
    total_tokens: int


@dataclass
class WorkerReply:
    ids: list[str]
    row_of: dict[str, int]
    sampled: list[list[int]]


@dataclass
class SeqOutput:
    """One sequence's output record for the front end (vLLM sends about this many fields per sequence)."""
    seq_id: str
    new_tokens: list[int]
    finish_reason: str | None = None
    logprobs: object = None
    prompt_logprobs: object = None
    pooling: object = None
    stop_reason: object = None
    events: object = None
    kv_transfer: object = None
    trace_headers: object = None
    cached_tokens: int = 0


class HostStep:
    """One engine core and its rank-0 worker in one process, holding ``n_seqs`` sequences in decode."""

    def __init__(self, n_seqs: int) -> None:
        self.free_blocks = list(range(n_seqs * MAX_BLOCKS_PER_SEQ, 0, -1))
        self.cached_blocks: dict[int, int] = {}
        self.seqs = [Sequence(f"cmpl-{i:032x}-0", list(range(PROMPT_TOKENS)), PROMPT_TOKENS) for i in range(n_seqs)]
        self.by_id = {s.seq_id: s for s in self.seqs}
        for s in self.seqs:                               # the prompt's blocks, and the prompt step's token
            self._reserve(s, 0)
            s.tokens.append(7)
            s.output_tokens.append(7)
        self.row_of = {s.seq_id: i for i, s in enumerate(self.seqs)}
        self.worker_outputs: dict[str, list[int]] = {s.seq_id: [] for s in self.seqs}
        self.computed_table = np.zeros(n_seqs, dtype=np.int32)
        self.block_table = np.zeros((n_seqs, MAX_BLOCKS_PER_SEQ), dtype=np.int32)
        self.blocks_per_row = np.zeros(n_seqs, dtype=np.int32)
        self.token_table = np.zeros((n_seqs, MAX_MODEL_TOKENS), dtype=np.int32)
        self.tokens_per_row = np.full(n_seqs, PROMPT_TOKENS + 1, dtype=np.int32)
        self.sampled_on_gpu = torch.randint(3, 150_000, (n_seqs, 1), dtype=torch.int64)

    def _reserve(self, s: Sequence, new_tokens: int) -> list[int]:
        """Blocks for ``new_tokens`` more tokens of ``s``, and the prefix-cache hash of every block now full."""
        needed = -(-min(s.computed_tokens + new_tokens, MAX_MODEL_TOKENS) // TOKENS_PER_BLOCK) - len(s.blocks)
        fresh = [self.free_blocks.pop() for _ in range(max(0, needed))]
        s.blocks.extend(fresh)
        full = min(s.computed_tokens + new_tokens, len(s.tokens)) // TOKENS_PER_BLOCK
        for b in range(len(s.block_hashes), full):
            parent = s.block_hashes[-1] if s.block_hashes else None
            s.block_hashes.append(hash((parent, tuple(s.tokens[b * TOKENS_PER_BLOCK:(b + 1) * TOKENS_PER_BLOCK]))))
            self.cached_blocks[s.block_hashes[-1]] = s.blocks[b]
        return fresh

    def plan(self) -> StepPlan:
        ids, new_blocks, computed, outputs, step_tokens = [], [], [], [], {}
        for s in self.seqs:
            n = s.num_tokens - s.computed_tokens
            fresh = self._reserve(s, n)
            ids.append(s.seq_id)
            new_blocks.append(fresh or None)
            computed.append(s.computed_tokens)
            outputs.append(s.num_output_tokens)
            step_tokens[s.seq_id] = n
        for s in self.seqs:
            s.computed_tokens += step_tokens[s.seq_id]
        return StepPlan(ids, new_blocks, computed, outputs, step_tokens, sum(step_tokens.values()))

    def worker(self, plan: StepPlan) -> WorkerReply:
        for seq_id, computed, fresh in zip(plan.ids, plan.computed, plan.new_blocks):
            row = self.row_of[seq_id]
            self.computed_table[row] = computed
            if fresh:
                start = self.blocks_per_row[row]
                self.blocks_per_row[row] += len(fresh)
                self.block_table[row, start:start + len(fresh)] = fresh
        np.array([plan.step_tokens[i] for i in plan.ids], dtype=np.int32)
        sampled = self.sampled_on_gpu.tolist()
        for row, (seq_id, ids) in enumerate(zip(plan.ids, sampled)):
            end = self.tokens_per_row[row] + len(ids)
            self.token_table[row, end - len(ids):end] = ids
            self.tokens_per_row[row] = end
            self.worker_outputs[seq_id].extend(ids)
        return WorkerReply(list(plan.ids), dict(self.row_of), sampled)

    def outputs(self, plan: StepPlan, reply: WorkerReply) -> list[SeqOutput]:
        records = []
        for seq_id in plan.step_tokens:
            s = self.by_id[seq_id]
            new = reply.sampled[reply.row_of[seq_id]]
            for token in new:
                s.tokens.append(token)
                s.output_tokens.append(token)
            stopped = s.num_output_tokens >= MAX_OUTPUT_TOKENS or new[-1] in s.stop_token_ids
            records.append(SeqOutput(seq_id, new, finish_reason="length" if stopped else None,
                                     cached_tokens=PROMPT_TOKENS))
        return records

    def step(self) -> None:
        plan = self.plan()
        at_worker = pickle.loads(pickle.dumps(plan, protocol=pickle.HIGHEST_PROTOCOL))
        reply = pickle.loads(pickle.dumps(self.worker(at_worker), protocol=pickle.HIGHEST_PROTOCOL))
        # to the front end: each record's fields as one array-like entry (vLLM encodes its structs that way)
        pickle.dumps([tuple(vars(o).values()) for o in self.outputs(plan, reply)], protocol=pickle.HIGHEST_PROTOCOL)


def per_step_s(n_seqs: int, repeats: int) -> float:
    """The fastest of five timings of ``repeats`` steps with ``n_seqs`` running sequences, per step (CPU time)."""
    best = float("inf")
    for _ in range(5):
        host = HostStep(n_seqs)
        t0 = time.process_time()
        for _ in range(repeats):
            host.step()
        best = min(best, (time.process_time() - t0) / repeats)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=32)
    ap.add_argument("--large", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()
    if not 1 <= args.small < args.large <= 4096 or not 1 <= args.repeats <= 10_000:
        raise SystemExit(f"need 1 <= --small < --large <= 4096 and 1 <= --repeats <= 10000, got "
                         f"{args.small} / {args.large} / {args.repeats}")
    small, large = per_step_s(args.small, args.repeats), per_step_s(args.large, args.repeats)
    print(f"{args.small} sequences: {small * 1e6:.1f} us per step; {args.large}: {large * 1e6:.1f} us per step")
    print(f"host time per sequence per step (slope): {(large - small) / (args.large - args.small) * 1e6:.2f} us")


if __name__ == "__main__":
    main()
