"""Decode steps as CUDA graphs: what vLLM does for decode batches, so a batch-1 step costs the weight read and
not thousands of kernel launches from Python.

A pure-decode step (every sequence computes one new token and samples it greedily) is padded to a bucket:
the batch to the next of :data:`BATCH_BUCKETS`, the context to the next power of two of KV blocks. Each bucket
owns static device buffers (token ids, positions, block tables) and one step over them: K/V written at
``block_table[pos // block_size]``, attention over the gathered blocks with the mask ``key <= pos`` (one
:class:`~calibration.paged_attention.AttentionGroup` for the whole batch), the LM head and the argmax. Padding
rows repeat the first sequence (same token, position and slot: the same K/V written twice, the null block
never touched) and their outputs are dropped.

On a GPU each bucket's step is captured once as a CUDA graph (after warm-up runs on a side stream, all graphs
in one memory pool) the first time a step needs it, outside the step's timing, and replayed from then on. On
the CPU the same padded static step runs eagerly: the path is the same, so tests check it on the CPU against
the ordinary step. Steps that do not qualify (prefill chunks, speculative verification, temperature sampling,
logits asked for, more sequences than the largest bucket, a context past the largest bucket the pool allows)
take the ordinary path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from calibration.paged_attention import AttentionGroup, PagedAttention
from twin.cost.profile_features import blocks_bucket
from twin.cost.profile_features import batch_bucket as _smallest_bucket

BATCH_BUCKETS: tuple[int, ...] = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)


def batch_bucket(batch: int, buckets: Sequence[int] = BATCH_BUCKETS) -> int | None:
    """The smallest bucket holding ``batch`` sequences, or None if none does (the rule the twin's profiles pad
    decode steps by: ``twin.cost.profile_features``)."""
    return _smallest_bucket(batch, buckets)


def qualifies(seqs: Sequence[Any], default_temperature: float) -> bool:
    """Whether a step is a pure greedy decode (each sequence: one new token, sampled, greedily)."""
    for x in seqs:
        t = default_temperature if x.temperature is None else float(x.temperature)
        if len(x.token_ids) != 1 or x.num_sampled != 1 or t > 0:
            return False
    return True


class _Bucket:
    """Static buffers and the step over them for one (batch, blocks) bucket; a CUDA graph once captured."""

    def __init__(self, runner: Any, batch: int, blocks: int) -> None:
        dev = runner.device
        self.runner, self.batch, self.blocks = runner, batch, blocks
        self.input_ids = torch.zeros(batch, dtype=torch.long, device=dev)
        self.positions = torch.zeros(batch, dtype=torch.long, device=dev)
        self.block_table = torch.ones(batch, blocks, dtype=torch.long, device=dev)
        self.tokens = torch.zeros(batch, dtype=torch.long, device=dev)
        self.host = torch.zeros(batch, 2 + blocks, dtype=torch.long,
                                pin_memory=dev.type == "cuda")   # ids, positions, table: one copy
        self.rows = np.zeros((batch, 2 + blocks), dtype=np.int64)
        self.graph: torch.cuda.CUDAGraph | None = None

    def step(self) -> None:
        r = self.runner
        s, bs, dev = r.shape, r.block_size, r.device
        pos = self.positions
        col = torch.div(pos, bs, rounding_mode="floor")
        block_ids = self.block_table.gather(1, col[:, None]).squeeze(1)
        offsets = pos - col * bs
        keys = torch.arange(self.blocks * bs, device=dev)
        g = s.num_queries_per_kv
        mask = (keys[None, :] <= pos[:, None])[:, None, None, :].expand(self.batch, 1, g, self.blocks * bs)
        group = AttentionGroup(False, q_index=torch.arange(self.batch, device=dev)[:, None], mask=mask,
                               block_table=self.block_table, identity=True)
        attn = PagedAttention(r.kv_cache, s, [group], block_ids, offsets, self.batch)
        hidden = r.model.forward_hidden(self.input_ids, pos, attn)
        self.tokens.copy_(r.model.compute_logits(hidden).argmax(-1))

    def load(self, seqs: Sequence[Any]) -> None:
        """Copy a step's inputs into the static buffers in one transfer (rows past the batch repeat row 0;
        table columns past a sequence's own blocks repeat its last block, masked)."""
        rows = self.rows
        for i in range(self.batch):
            x = seqs[i] if i < len(seqs) else seqs[0]
            bt = list(x.block_table[:self.blocks])
            rows[i, 0], rows[i, 1] = int(x.token_ids[0]), int(x.start_pos)
            rows[i, 2:2 + len(bt)] = bt
            rows[i, 2 + len(bt):] = bt[-1]
        self.host.copy_(torch.from_numpy(rows))
        dev = self.host.to(self.runner.device, non_blocking=True)
        self.input_ids.copy_(dev[:, 0])
        self.positions.copy_(dev[:, 1])
        self.block_table.copy_(dev[:, 2:])

    def capture(self, pool: Any) -> None:
        dev = self.runner.device
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(3):
                self.step()
        torch.cuda.current_stream(dev).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            self.step()
        torch.cuda.synchronize(dev)
        self.graph = graph

    def run(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.step()


class DecodeGraphs:
    """The buckets of one runner. The runner calls :meth:`prepare` (untimed: buffers, and on a GPU the capture)
    before it times a step's load and replay, so a capture never lands in a step's time."""

    def __init__(self, runner: Any, *, max_batch: int = BATCH_BUCKETS[-1], capture: bool | None = None) -> None:
        self.runner = runner
        self.buckets = tuple(b for b in BATCH_BUCKETS if b <= max_batch) or (1,)
        self.capture = runner.device.type == "cuda" if capture is None else bool(capture)
        if self.capture and runner.device.type != "cuda":
            raise ValueError("cuda_graphs: capture needs a CUDA device")
        self.pool = torch.cuda.graph_pool_handle() if self.capture else None
        self._buckets: dict[tuple[int, int], _Bucket] = {}
        self.num_captured = 0
        self.error: str | None = None

    def bucket_for(self, seqs: Sequence[Any]) -> tuple[int, int] | None:
        """The (batch, blocks) bucket of a qualifying step, or None when it takes the ordinary path."""
        r = self.runner
        if not qualifies(seqs, r.temperature):
            return None
        b = batch_bucket(len(seqs), self.buckets)
        if b is None:
            return None
        need = max(-(-x.end_pos // r.block_size) for x in seqs)
        nb = blocks_bucket(need)
        if b * nb > 2 * (r.kv_cache.num_blocks - 1) or nb * r.block_size > 2 * r.shape.max_position_embeddings:
            return None          # a bucket past what the pool could ever hold: not worth a graph
        return b, nb

    def prepare(self, key: tuple[int, int], seqs: Sequence[Any]) -> _Bucket | None:
        """The bucket for ``key`` with ``seqs`` loaded, captured first if new (warm-up and capture run the very
        step about to be timed, so the K/V they write are the step's own). None, and the graphs switched off,
        if a capture fails: the runner goes on eagerly and :attr:`error` says why."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(self.runner, *key)
            if self.capture:
                bucket.load(seqs)
                try:
                    bucket.capture(self.pool)
                except RuntimeError as exc:
                    self.error = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
                    self.runner.use_graphs = False
                    return None
                self.num_captured += 1
            self._buckets[key] = bucket
        return bucket
