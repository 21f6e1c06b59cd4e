"""Execute one scheduled engine step for real, on the paged KV cache, and time it.

The serving core (``twin``) decides each step which tokens of which requests to compute; this module runs exactly
that step through :class:`~calibration.model.LlamaDecoder`:

* every new token of every scheduled sequence (prefill chunks, decodes, speculative verification) goes through the
  GEMMs as one flattened ``[total_tokens, hidden]`` batch;
* their K/V are scattered into the paged cache at ``block_table[pos // block_size] * block_size + pos %
  block_size``; attention then reads each sequence's whole context ``[0, end)`` back from the cache by its block
  table, so positions computed in earlier steps, or shared prefix-cache blocks, are used and not recomputed;
* attention is batched: sequences are grouped by similar (query length, context length) so that padding stays
  bounded, each group's KV is gathered from the cache into a padded batch and handled by one
  ``scaled_dot_product_attention`` call with a causal-with-offset mask (grouped-query heads folded into the query
  length, so KV is never repeated); a long prefill from position 0 runs alone with ``is_causal`` and no gather;
* a sequence whose chunk reaches its last real token samples (greedy, or temperature sampling from a seeded
  generator): one token, or one per verified position with draft tokens.

The core API takes plain lists (:class:`SeqInput`); :meth:`ModelRunner.execute` is a thin adapter from
``twin.core.scheduler_output.SchedulerOutput``. Requests that carry synthetic segments instead of token ids get
deterministic token ids per segment (:mod:`calibration.token_ids`), so two requests sharing a segment share tokens,
and hence KV, exactly where the prefix cache says they do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from calibration.decode_graphs import DecodeGraphs
from calibration.model import LlamaDecoder, ModelShape, default_dtype
from calibration.paged_attention import AttentionGroup, PagedAttention, set_cudnn_attention
from calibration.paged_kv import PagedKVCache
from calibration.timing import StepTimer
from calibration.token_ids import request_token_ids

# ---- plain step inputs and outputs -------------------------------------------------------------------------

@dataclass
class SeqInput:
    """One sequence's share of a step.

    ``token_ids`` are the tokens at positions ``[start_pos, start_pos + len(token_ids))``; positions before
    ``start_pos`` must already be in the cache blocks of ``block_table``. The last ``num_sampled`` positions are
    sampled (0: a partial prefill chunk; 1: a normal step; k + 1: verifying k draft tokens)."""

    token_ids: Sequence[int]
    start_pos: int
    block_table: Sequence[int]
    num_sampled: int = 1
    temperature: float | None = None     # None: the runner's default

    @property
    def end_pos(self) -> int:
        return self.start_pos + len(self.token_ids)


@dataclass
class StepOutputs:
    sampled_token_ids: list[list[int]]   # per sequence, in batch order; [] for a partial prefill chunk
    elapsed_s: float                     # synchronised wall time of the step (input prep, forward, sampling)
    device_s: float | None = None        # CUDA-event time of the device work (None on CPU)
    num_tokens: int = 0
    num_attention_calls: int = 0         # SDPA calls per layer (groups)
    graph: bool = False                  # run as a padded decode bucket (a CUDA graph on a GPU)
    logits: list[torch.Tensor] | None = None   # with return_logits: fp32 CPU [num_new_tokens, vocab] per sequence


# ---- the runner ---------------------------------------------------------------------------------------------

class ModelRunner:
    """Owns the model, the paged KV cache and the sampler; executes and times steps.

    ``group_padding_factor`` and ``group_slack`` bound attention padding: a group's padded work
    ``G * (Qmax + 1) * Lmax`` may exceed the sum of its members' ``(q + 1) * L`` by at most this factor plus
    this slack (below which a separate kernel launch costs more than the padding). ``causal_min_tokens``: a chunk
    starting at position 0 with at least this many tokens runs alone with ``is_causal`` (no gather, no mask).
    ``cuda_graphs``: pure greedy decode steps run padded to a bucket, as CUDA graphs on a GPU
    (:mod:`calibration.decode_graphs`); ``use_graphs`` switches that path off and on again. ``cudnn_attention``
    allows PyTorch's cuDNN attention backend on a GPU (off by default:
    :func:`calibration.paged_attention.set_cudnn_attention` says why)."""

    def __init__(self, model_shape: Any, device: str | torch.device = "cpu", dtype: torch.dtype | None = None,
                 num_blocks: int = 1024, block_size: int = 16, seed: int = 0, *,
                 checkpoint: str | None = None, temperature: float = 0.0,
                 group_padding_factor: float = 2.0, group_slack: int = 1 << 16, causal_min_tokens: int = 32,
                 cuda_graphs: bool = False, cudnn_attention: bool = False) -> None:
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("device: CUDA was asked for but torch.cuda.is_available() is false")
        if self.device.type == "cuda":
            set_cudnn_attention(cudnn_attention)
        self.dtype = dtype or default_dtype(self.device)
        self.shape = ModelShape.from_any(model_shape)
        self.block_size = block_size
        self.temperature = float(temperature)
        self.group_padding_factor, self.group_slack = group_padding_factor, group_slack
        self.causal_min_tokens = causal_min_tokens
        self.model = LlamaDecoder(self.shape, dtype=self.dtype, device=self.device, seed=seed,
                                  checkpoint=checkpoint).eval()
        s = self.shape
        self.kv_cache = PagedKVCache(s.num_hidden_layers, num_blocks, block_size, s.num_key_value_heads,
                                     s.head_dim, dtype=self.dtype, device=self.device)
        self.generator = torch.Generator(device=self.device).manual_seed(int(seed) + 1)
        self.decode_graphs = DecodeGraphs(self) if cuda_graphs else None
        self.use_graphs = bool(cuda_graphs)

    def reseed(self, seed: int) -> None:
        """Restart the sampling stream (weights are unchanged)."""
        self.generator.manual_seed(int(seed) + 1)

    # ---- planning (host side) ---------------------------------------------------------------------------
    def _group_sequences(self, lens: list[int], starts: list[int]) -> list[list[int]]:
        ends = [s + n for s, n in zip(starts, lens)]
        groups: list[list[int]] = []
        rest = []
        for i, (s, n) in enumerate(zip(starts, lens)):
            if s == 0 and n >= self.causal_min_tokens:
                groups.append([i])
            else:
                rest.append(i)
        cur: list[int] = []
        maxq = maxl = actual = 0
        for i in sorted(rest, key=lambda i: (lens[i], ends[i])):
            nq, nl, na = max(maxq, lens[i]), max(maxl, ends[i]), actual + (lens[i] + 1) * ends[i]
            if cur and (len(cur) + 1) * (nq + 1) * nl > self.group_padding_factor * na + self.group_slack:
                groups.append(sorted(cur))
                cur, nq, nl, na = [], lens[i], ends[i], (lens[i] + 1) * ends[i]
            cur.append(i)
            maxq, maxl, actual = nq, nl, na
        if cur:
            groups.append(sorted(cur))
        return groups

    def _plan(self, seqs: Sequence[SeqInput]) -> tuple[torch.Tensor, torch.Tensor, PagedAttention, list[int]]:
        s, bs, dev = self.shape, self.block_size, self.device
        if not seqs:
            raise ValueError("a step needs at least one sequence")
        lens = [len(x.token_ids) for x in seqs]
        starts = [int(x.start_pos) for x in seqs]
        for i, x in enumerate(seqs):
            if lens[i] < 1:
                raise ValueError(f"sequence {i}: no new tokens")
            if starts[i] < 0:
                raise ValueError(f"sequence {i}: start_pos must be >= 0, got {starts[i]}")
            if x.end_pos > s.max_position_embeddings:
                raise ValueError(f"sequence {i}: position {x.end_pos - 1} is beyond max_position_embeddings="
                                 f"{s.max_position_embeddings}")
            if not 0 <= x.num_sampled <= lens[i]:
                raise ValueError(f"sequence {i}: num_sampled={x.num_sampled} must be in [0, {lens[i]}]")
            if len(x.block_table) < -(-x.end_pos // bs):
                raise ValueError(f"sequence {i}: block table has {len(x.block_table)} blocks, positions up to "
                                 f"{x.end_pos} need {-(-x.end_pos // bs)}")
        num_tokens = sum(lens)
        lens_t = torch.tensor(lens, dtype=torch.long)
        starts_t = torch.tensor(starts, dtype=torch.long)
        offs_t = torch.cumsum(lens_t, 0) - lens_t
        seq_index = torch.repeat_interleave(torch.arange(len(seqs)), lens_t)
        positions = torch.arange(num_tokens) - offs_t[seq_index] + starts_t[seq_index]
        input_ids = torch.tensor([t for x in seqs for t in x.token_ids], dtype=torch.long)
        if int(input_ids.min()) < 0 or int(input_ids.max()) >= s.vocab_size:
            raise ValueError(f"token ids must be in [0, {s.vocab_size})")
        bt_all = self.kv_cache.block_table_tensor([x.block_table for x in seqs])
        needed = torch.tensor([-(-x.end_pos // bs) for x in seqs], dtype=torch.long)
        in_use = torch.arange(bt_all.shape[1])[None, :] < needed[:, None]
        if bool(((bt_all == 0) & in_use).any()):
            i = int(torch.nonzero((bt_all == 0) & in_use)[0, 0])
            raise ValueError(f"sequence {i}: its block table uses the null block 0 within its context")
        block_ids, offsets = self.kv_cache.slot_mapping(bt_all, seq_index, positions)

        groups = []
        for members in self._group_sequences(lens, starts):
            if len(members) == 1 and starts[members[0]] == 0 and lens[members[0]] >= self.causal_min_tokens:
                i = members[0]
                lo = int(offs_t[i])
                groups.append(AttentionGroup(True, tok_lo=lo, tok_hi=lo + lens[i]))
                continue
            m = torch.tensor(members, dtype=torch.long)
            qmax = max(lens[i] for i in members)
            rows = torch.arange(qmax)[None, :]
            valid = rows < lens_t[m][:, None]
            q_index = torch.where(valid, offs_t[m][:, None] + rows, 0)
            qpos = torch.where(valid, starts_t[m][:, None] + rows, 0)   # pads attend key 0 only (never all-masked)
            nb = -(-max(starts[i] + lens[i] for i in members) // bs)
            flat_valid = valid.reshape(-1)
            dst = q_index.reshape(-1)[flat_valid]
            identity = (len(members) == len(seqs) and bool(flat_valid.all())
                        and bool((dst == torch.arange(num_tokens)).all()))
            qpos_d = qpos.to(dev, non_blocking=True)
            keys = torch.arange(nb * bs, device=dev)
            mask = keys[None, None, :] <= qpos_d[:, :, None]                       # [G, Qmax, L]
            g = s.num_queries_per_kv
            mask = mask[:, None, None].expand(len(members), 1, g, qmax, nb * bs).reshape(
                len(members), 1, g * qmax, nb * bs)
            groups.append(AttentionGroup(
                False, q_index=q_index.to(dev, non_blocking=True), mask=mask,
                block_table=bt_all[m, :nb].to(dev, non_blocking=True),
                src=torch.nonzero(flat_valid).squeeze(1).to(dev, non_blocking=True),
                dst=dst.to(dev, non_blocking=True), identity=identity))
        attn = PagedAttention(self.kv_cache, s, groups, block_ids.to(dev, non_blocking=True),
                               offsets.to(dev, non_blocking=True), num_tokens)
        return input_ids.to(dev, non_blocking=True), positions.to(dev, non_blocking=True), attn, lens

    # ---- execution --------------------------------------------------------------------------------------
    @torch.inference_mode()
    def execute_batch(self, seqs: Sequence[SeqInput], *, return_logits: bool = False) -> StepOutputs:
        """Run one step over plain inputs; the whole step (input prep, forward, sampling, copy of the sampled
        ids to the host) is timed with device synchronisation."""
        bucket = None
        if self.decode_graphs is not None and self.use_graphs and not return_logits and seqs:
            key = self.decode_graphs.bucket_for(seqs)
            if key is not None:
                self._check_decode(seqs)
                bucket = self.decode_graphs.prepare(key, seqs)   # buffers (on a GPU the capture), untimed
        if bucket is not None:
            with StepTimer(self.device) as timer:
                bucket.load(seqs)
                timer.mark()
                bucket.run()
                tokens = bucket.tokens.tolist()
            return StepOutputs([[tokens[i]] for i in range(len(seqs))], timer.elapsed_s, timer.device_s,
                               num_tokens=len(seqs), num_attention_calls=1, graph=True)
        with StepTimer(self.device) as timer:
            input_ids, positions, attn, lens = self._plan(seqs)
            timer.mark()
            hidden = self.model.forward_hidden(input_ids, positions, attn)
            num_sampled = [x.num_sampled for x in seqs]
            ends = np.cumsum(lens)
            sample_rows = np.concatenate([np.arange(e - k, e) for e, k in zip(ends, num_sampled)]).astype(np.int64)
            all_logits = None
            if return_logits:
                all_logits = self.model.compute_logits(hidden)
                logits = all_logits[torch.from_numpy(sample_rows).to(self.device)]
            elif len(sample_rows):
                logits = self.model.compute_logits(hidden[torch.from_numpy(sample_rows).to(self.device)])
            tokens: list[int] = []
            if len(sample_rows):
                temps = [self.temperature if x.temperature is None else float(x.temperature)
                         for x, k in zip(seqs, num_sampled) for _ in range(k)]
                tokens = self._sample(logits, temps).tolist()
        sampled, pos = [], 0
        for k in num_sampled:
            sampled.append(tokens[pos:pos + k])
            pos += k
        out = StepOutputs(sampled, timer.elapsed_s, timer.device_s, num_tokens=int(sum(lens)),
                          num_attention_calls=len(attn.groups))
        if return_logits:
            out.logits = list(all_logits.cpu().split(lens))
        return out

    def _check_decode(self, seqs: Sequence[SeqInput]) -> None:
        """The checks of :meth:`_plan` for a decode step that skips it (the graph path)."""
        bs, s = self.block_size, self.shape
        for i, x in enumerate(seqs):
            need = -(-x.end_pos // bs)
            if x.start_pos < 0 or x.end_pos > s.max_position_embeddings:
                raise ValueError(f"sequence {i}: position {x.start_pos} is outside [0, {s.max_position_embeddings})")
            if not 0 <= int(x.token_ids[0]) < s.vocab_size:
                raise ValueError(f"token ids must be in [0, {s.vocab_size})")
            if len(x.block_table) < need:
                raise ValueError(f"sequence {i}: block table has {len(x.block_table)} blocks, positions up to "
                                 f"{x.end_pos} need {need}")
            used = list(x.block_table[:need])
            if need and (min(used) < 1 or max(used) >= self.kv_cache.num_blocks):
                raise ValueError(f"sequence {i}: its block table uses the null block 0 or a block outside "
                                 f"[1, {self.kv_cache.num_blocks}) within its context")

    def _sample(self, logits: torch.Tensor, temps: list[float]) -> torch.Tensor:
        greedy = logits.argmax(-1)
        if not any(t > 0 for t in temps):
            return greedy
        t = torch.tensor(temps, dtype=torch.float32).to(self.device, non_blocking=True)
        probs = torch.softmax(logits / t.clamp_min(1e-5)[:, None], dim=-1)
        # exponential race: argmax(p / E), E ~ Exp(1), draws from p (the Gumbel-max trick in another guise)
        e = torch.empty_like(probs).exponential_(generator=self.generator)
        return torch.where(t > 0, (probs / e).argmax(-1), greedy)

    # ---- the adapter from the serving core ---------------------------------------------------------------
    def inputs_from_scheduler_output(self, scheduler_output: Any, block_tables: Sequence[Sequence[int]] | None = None,
                                     *, kv_cache_manager: Any = None) -> list[SeqInput]:
        """Plain inputs for a ``twin.core.scheduler_output.SchedulerOutput``. Block tables come either as a list
        parallel to ``scheduler_output.requests`` or from ``kv_cache_manager.get_block_ids(request_id)``.

        Request i computes positions ``[c, c + n)`` with ``c = num_computed_before[i]``, ``n = num_new_tokens[i]``;
        it samples at every position from its last real token (``request.num_tokens - 1``, before this step's
        outputs are appended) to the chunk's end: nothing for a partial prefill, 1 + verified drafts otherwise."""
        so = scheduler_output
        reqs = so.requests
        if not (len(reqs) == len(so.num_new_tokens) == len(so.num_computed_before)):
            raise ValueError("scheduler output: requests, num_new_tokens and num_computed_before differ in length")
        if block_tables is None:
            if kv_cache_manager is None:
                raise ValueError("give block_tables or kv_cache_manager")
            block_tables = [kv_cache_manager.get_block_ids(r.request_id) for r in reqs]
        elif len(block_tables) != len(reqs):
            raise ValueError(f"{len(block_tables)} block tables for {len(reqs)} scheduled requests")
        vocab = self.shape.vocab_size
        seqs = []
        for req, n, c, bt in zip(reqs, so.num_new_tokens, so.num_computed_before, block_tables):
            end = c + n
            num_sampled = max(0, min(n, end - (req.num_tokens - 1)))
            seqs.append(SeqInput(request_token_ids(req, c, end, vocab), c, list(bt), num_sampled))
        return seqs

    def execute(self, scheduler_output: Any, block_tables: Sequence[Sequence[int]] | None = None, *,
                kv_cache_manager: Any = None, return_logits: bool = False) -> StepOutputs:
        """Execute a ``SchedulerOutput`` (building token ids is the twin's business and is not timed)."""
        seqs = self.inputs_from_scheduler_output(scheduler_output, block_tables, kv_cache_manager=kv_cache_manager)
        return self.execute_batch(seqs, return_logits=return_logits)
