"""Host time per sequence of vLLM V1's decode step WITHOUT async scheduling, measured on this machine's CPU: the
stated prior of ``per_seq_overhead_s@sync`` where a fold has no sync server (``twin.fitting.held_priors``;
docs/fidelity.md "Round 9: Kimi and Qwen3 held out").

Without async scheduling the engine core's CPU work between two GPU steps is not hidden (twin.cost.sync_host).
This script re-enacts the part of that work that grows with the batch, one statement for each statement of
vLLM 0.12's plain decode path (written from reading the release's V1 engine, not copied), with the same kinds of
Python objects (request objects with token lists, dicts keyed by request id, numpy token / block tables, a CPU
torch tensor of sampled ids, pickled messages between processes):

* scheduler ``schedule``: each running request's new tokens, ``allocate_slots`` (blocks needed; a new block every
  16 tokens, hashed for the prefix cache when full), the scheduled lists and dicts; ``_make_cached_request_data``
  (ids, new block ids, computed and output token counts) and ``_update_after_schedule``;
* the multiproc executor (TP > 1, every Qwen3 row): the ``SchedulerOutput`` pickled into the broadcast queue and
  unpickled by the worker;
* model runner ``_update_states`` (the cached request's state, its block ids, the input batch's computed tokens
  and block table row) and ``_prepare_inputs``' per-request scheduled-token list;
* the sampled ids' ``tolist()`` and ``_bookkeeping_sync`` (token table, counts, the request state's output list);
  ``ModelRunnerOutput`` (ids, an id -> index dict copy, the sampled lists) pickled back to the engine;
* scheduler ``update_from_output``: the request's sampled ids, ``append_output_token_ids``, ``check_stop``, one
  ``EngineCoreOutput`` per request; the outputs serialised for the front end (vLLM: msgpack of msgspec's
  array-like structs; msgspec is not installed here, so each output's fields are pickled as one tuple).

Not re-enacted (so the figure is a LOWER bound of the server's per-sequence host time): logging and stats per
request, the attention backend's metadata build (vectorised), the GIL hand-offs between the engine core's busy
loop and its I/O threads, and the front-end process (detokenisation, SSE), which runs beside the engine core.

    python benchmarks/sync_host_prior.py [--small 32] [--large 256] [--repeats 50]

It prints microseconds per sequence per step: (time at --large - time at --small) / (large - small), each the
fastest of five timings of the process's CPU time, so per-step constants cancel. The server's host (a recent Xeon or EPYC) may be faster or
slower than the machine this runs on; the figure is a prior, not a fit.
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BLOCK = 16                       # tokens per KV block (vLLM's default block size)
MAX_BLOCKS = 512


class _Params:
    def __init__(self) -> None:
        self.max_tokens, self.ignore_eos, self.stop_token_ids, self.logprobs = 1024, True, [], None


class _Req:
    """The engine core's request: token lists and counters (vLLM ``Request``)."""

    def __init__(self, rid: str, prompt_len: int, client_index: int = 0) -> None:
        self.request_id, self.client_index = rid, client_index
        self.prompt_token_ids = list(range(prompt_len))
        self._output_token_ids: list[int] = []
        self._all_token_ids = list(self.prompt_token_ids)
        self.spec_token_ids: list[int] = []
        self.num_computed_tokens = prompt_len
        self.num_output_placeholders = 0
        self.sampling_params = _Params()
        self.eos_token_id = 2
        self.status, self.stop_reason, self.num_cached_tokens = 2, None, 0
        self.use_structured_output, self.has_encoder_inputs, self.events = False, False, []
        self.trace_headers = None
        self.block_hashes: list[int] = []

    @property
    def num_tokens(self) -> int:
        return len(self._all_token_ids)

    @property
    def num_tokens_with_spec(self) -> int:
        return len(self._all_token_ids) + len(self.spec_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self._output_token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self._output_token_ids

    def append_output_token_ids(self, token_id: int) -> None:
        self._output_token_ids.append(token_id)
        self._all_token_ids.append(token_id)

    def get_finished_reason(self):
        return None if self.status < 5 else self.status

    def take_events(self):
        if not self.events:
            return None
        events, self.events = self.events, []
        return events


class _BlockPool:
    def __init__(self, n: int) -> None:
        self.free = list(range(n, 0, -1))
        self.cached: dict[int, int] = {}

    def get_new_blocks(self, n: int) -> list[int]:
        return [self.free.pop() for _ in range(n)]

    def get_num_free_blocks(self) -> int:
        return len(self.free)


class _KVManager:
    """``allocate_slots`` of the single-type KV cache manager, prefix caching on (vLLM 0.12's default)."""

    def __init__(self, pool: _BlockPool, max_model_len: int) -> None:
        self.pool, self.max_model_len = pool, max_model_len
        self.req_to_blocks: dict[str, list[int]] = {}
        self.num_cached_block: dict[str, int] = {}

    def allocate_slots(self, request: _Req, num_new_tokens: int):
        num_computed_tokens = request.num_computed_tokens
        num_tokens_need_slot = min(num_computed_tokens + num_new_tokens, self.max_model_len)
        req_blocks = self.req_to_blocks.setdefault(request.request_id, [])
        num_required = -(-num_tokens_need_slot // BLOCK)
        num_to_allocate = max(0, num_required - len(req_blocks))
        if num_to_allocate > self.pool.get_num_free_blocks():
            return None
        new_blocks = self.pool.get_new_blocks(num_to_allocate) if num_to_allocate > 0 else []
        req_blocks.extend(new_blocks)
        num_tokens_to_cache = min(num_computed_tokens + num_new_tokens, request.num_tokens)
        num_full = num_tokens_to_cache // BLOCK                    # cache_blocks: newly full blocks hashed
        done = self.num_cached_block.get(request.request_id, 0)
        if num_full > done:
            for b in range(done, num_full):
                h = hash((request.block_hashes[-1] if request.block_hashes else None,
                          tuple(request._all_token_ids[b * BLOCK:(b + 1) * BLOCK])))
                request.block_hashes.append(h)
                self.pool.cached[h] = req_blocks[b]
            self.num_cached_block[request.request_id] = num_full
        return (new_blocks,)


@dataclass
class _CachedRequestData:
    req_ids: list[str]
    resumed_req_ids: set[str]
    new_token_ids: list[list[int]]
    new_block_ids: list
    num_computed_tokens: list[int]
    num_output_tokens: list[int]


@dataclass
class _SchedulerOutput:
    scheduled_new_reqs: list
    scheduled_cached_reqs: _CachedRequestData
    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    scheduled_spec_decode_tokens: dict = field(default_factory=dict)
    finished_req_ids: set = field(default_factory=set)


@dataclass
class _ModelRunnerOutput:
    req_ids: list[str]
    req_id_to_index: dict[str, int]
    sampled_token_ids: list[list[int]]
    logprobs: object = None
    prompt_logprobs_dict: dict = field(default_factory=dict)
    num_nans_in_logits: object = None


@dataclass
class _EngineCoreOutput:
    request_id: str
    new_token_ids: list[int]
    finish_reason: object = None
    new_logprobs: object = None
    new_prompt_logprobs_tensors: object = None
    pooling_output: object = None
    stop_reason: object = None
    events: object = None
    kv_transfer_params: object = None
    trace_headers: object = None
    num_cached_tokens: int = 0


class _ReqState:
    def __init__(self, req: _Req) -> None:
        self.req_id, self.output_token_ids = req.request_id, []
        self.num_computed_tokens = req.num_computed_tokens
        self.block_ids: tuple[list[int], ...] = ([],)


class Engine:
    """One engine core and one worker (rank 0) in one process, their per-request work in vLLM 0.12's order."""

    def __init__(self, n_seqs: int, prompt_len: int = 1000, max_model_len: int = 10240) -> None:
        self.max_model_len, self.budget = max_model_len, 8192
        self.kv = _KVManager(_BlockPool(n_seqs * MAX_BLOCKS), max_model_len)
        self.running = [_Req(f"cmpl-{i:032x}-0", prompt_len) for i in range(n_seqs)]
        self.requests = {r.request_id: r for r in self.running}
        for r in self.running:                       # the prompt's blocks, already cached
            self.kv.allocate_slots(r, 0)
            r.append_output_token_ids(7)              # the prompt step's token
        # the worker's side
        self.states = {r.request_id: _ReqState(r) for r in self.running}
        self.req_ids = [r.request_id for r in self.running]
        self.req_id_to_index = {rid: i for i, rid in enumerate(self.req_ids)}
        self.num_computed_tokens_cpu = np.zeros(n_seqs, dtype=np.int32)
        self.block_table = np.zeros((n_seqs, MAX_BLOCKS), dtype=np.int32)
        self.num_blocks_per_row = np.zeros(n_seqs, dtype=np.int32)
        self.token_ids_cpu = np.zeros((n_seqs, max_model_len), dtype=np.int32)
        self.is_token_ids = np.zeros((n_seqs, max_model_len), dtype=bool)
        self.num_tokens_no_spec = np.full(n_seqs, prompt_len + 1, dtype=np.int32)
        self.num_tokens = np.full(n_seqs, prompt_len + 1, dtype=np.int32)
        self.sampled = torch.randint(3, 150_000, (n_seqs, 1), dtype=torch.int64)

    # ---- the engine core: schedule()
    def schedule(self) -> _SchedulerOutput:
        scheduled_running_reqs, req_to_new_blocks, num_scheduled_tokens = [], {}, {}
        token_budget, req_index = self.budget, 0
        while req_index < len(self.running) and token_budget > 0:
            request = self.running[req_index]
            num_new_tokens = (request.num_tokens_with_spec + request.num_output_placeholders
                              - request.num_computed_tokens)
            num_new_tokens = min(num_new_tokens, token_budget)
            num_new_tokens = min(num_new_tokens, self.max_model_len - 1 - request.num_computed_tokens)
            if request.has_encoder_inputs:
                pass
            if num_new_tokens == 0:
                req_index += 1
                continue
            while True:
                new_blocks = self.kv.allocate_slots(request, num_new_tokens)
                if new_blocks is not None:
                    break
            scheduled_running_reqs.append(request)
            req_to_new_blocks[request.request_id] = new_blocks
            num_scheduled_tokens[request.request_id] = num_new_tokens
            token_budget -= num_new_tokens
            req_index += 1
            if request.spec_token_ids:
                pass
        req_ids, new_block_ids, num_computed, num_output = [], [], [], []
        for req in scheduled_running_reqs:                       # _make_cached_request_data
            req_id = req.request_id
            req_ids.append(req_id)
            blocks = req_to_new_blocks[req_id]
            new_block_ids.append(tuple(list(b) for b in blocks) if any(blocks) else None)
            num_computed.append(req.num_computed_tokens)
            num_output.append(req.num_output_tokens + req.num_output_placeholders)
        out = _SchedulerOutput([], _CachedRequestData(req_ids, set(), [], new_block_ids, num_computed, num_output),
                               num_scheduled_tokens, self.budget - token_budget)
        for req_id, n in num_scheduled_tokens.items():          # _update_after_schedule
            request = self.requests[req_id]
            request.num_computed_tokens += n
            if request.use_structured_output:
                pass
        return out

    # ---- the worker (rank 0): _update_states, _prepare_inputs, the sampled ids' book-keeping
    def worker_step(self, so: _SchedulerOutput) -> _ModelRunnerOutput:
        req_data = so.scheduled_cached_reqs
        for i, req_id in enumerate(req_data.req_ids):
            req_state = self.states[req_id]
            num_computed_tokens = req_data.num_computed_tokens[i]
            new_block_ids = req_data.new_block_ids[i]
            resumed = req_id in req_data.resumed_req_ids
            req_state.num_computed_tokens = num_computed_tokens
            if not resumed and new_block_ids is not None:
                for block_ids, new_ids in zip(req_state.block_ids, new_block_ids):
                    block_ids.extend(new_ids)
            req_index = self.req_id_to_index.get(req_id)
            self.num_computed_tokens_cpu[req_index] = num_computed_tokens
            if new_block_ids is not None:                     # block_table.append_row
                ids = new_block_ids[0]
                start = self.num_blocks_per_row[req_index]
                self.num_blocks_per_row[req_index] += len(ids)
                self.block_table[req_index, start:start + len(ids)] = ids
            so.scheduled_spec_decode_tokens.get(req_id, ())
        tokens = [so.num_scheduled_tokens[i] for i in self.req_ids]       # _prepare_inputs
        np.array(tokens, dtype=np.int32)
        valid_sampled_token_ids = self.sampled.tolist()                  # _bookkeeping_sync
        req_ids = self.req_ids
        for req_idx in range(len(valid_sampled_token_ids)):
            sampled_ids = valid_sampled_token_ids[req_idx]
            if not sampled_ids:
                continue
            start_idx = self.num_tokens_no_spec[req_idx]
            end_idx = start_idx + len(sampled_ids)
            self.token_ids_cpu[req_idx, start_idx:end_idx] = sampled_ids
            self.is_token_ids[req_idx, start_idx:end_idx] = True
            self.num_tokens_no_spec[req_idx] = end_idx
            self.num_tokens[req_idx] = end_idx
            self.states[req_ids[req_idx]].output_token_ids.extend(sampled_ids)
        return _ModelRunnerOutput(list(req_ids), dict(self.req_id_to_index), valid_sampled_token_ids)

    # ---- the engine core: update_from_output()
    def update_from_output(self, so: _SchedulerOutput, mro: _ModelRunnerOutput) -> list[_EngineCoreOutput]:
        outputs: list[_EngineCoreOutput] = []
        sampled_token_ids = mro.sampled_token_ids
        for req_id, num_tokens_scheduled in so.num_scheduled_tokens.items():
            request = self.requests.get(req_id)
            if request is None:
                continue
            req_index = mro.req_id_to_index[req_id]
            generated_token_ids = sampled_token_ids[req_index] if sampled_token_ids else []
            if so.scheduled_spec_decode_tokens.get(req_id):
                pass
            stopped, new_logprobs, new_token_ids, kv_transfer_params = False, None, generated_token_ids, None
            if new_token_ids:
                for num_new, output_token_id in enumerate(new_token_ids, 1):
                    request.append_output_token_ids(output_token_id)
                    stopped = self._check_stop(request)
                    if stopped:
                        del new_token_ids[num_new:]
                        break
            if request.sampling_params is not None and request.sampling_params.logprobs is not None:
                pass
            if new_token_ids or kv_transfer_params or stopped:
                outputs.append(_EngineCoreOutput(
                    request_id=req_id, new_token_ids=new_token_ids, finish_reason=request.get_finished_reason(),
                    new_logprobs=new_logprobs, stop_reason=request.stop_reason, events=request.take_events(),
                    kv_transfer_params=kv_transfer_params, trace_headers=request.trace_headers,
                    num_cached_tokens=request.num_cached_tokens))
        return outputs

    def _check_stop(self, request: _Req) -> bool:
        if request.num_tokens >= self.max_model_len or request.num_output_tokens >= request.sampling_params.max_tokens:
            return False      # never reached here: the runs' lengths are within both
        sp = request.sampling_params
        last_token_id = request.output_token_ids[-1]
        if not sp.ignore_eos and last_token_id == request.eos_token_id:
            return True
        if last_token_id in (sp.stop_token_ids or ()):
            return True
        return False

    def step(self) -> None:
        so = self.schedule()
        so_worker = pickle.loads(pickle.dumps(so, protocol=pickle.HIGHEST_PROTOCOL))   # broadcast to the workers
        mro = self.worker_step(so_worker)
        mro_engine = pickle.loads(pickle.dumps(mro, protocol=pickle.HIGHEST_PROTOCOL))  # rank 0's reply
        outputs = self.update_from_output(so, mro_engine)
        # to the front end: msgspec encodes its array-like structs field by field, as a tuple per output
        pickle.dumps([(o.request_id, o.new_token_ids, o.finish_reason, o.new_logprobs, o.new_prompt_logprobs_tensors,
                       o.pooling_output, o.stop_reason, o.events, o.kv_transfer_params, o.trace_headers,
                       o.num_cached_tokens) for o in outputs], protocol=pickle.HIGHEST_PROTOCOL)


def per_step_s(n_seqs: int, repeats: int) -> float:
    """The fastest of five timings of ``repeats`` steps of an engine with ``n_seqs`` running requests, per step."""
    best = float("inf")
    for _ in range(5):
        engine = Engine(n_seqs)
        t0 = time.process_time()          # CPU time: the machine may be shared, a wall clock would count waits
        for _ in range(repeats):
            engine.step()
        best = min(best, (time.process_time() - t0) / repeats)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=32)
    ap.add_argument("--large", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()
    if not 1 <= args.small < args.large:
        raise SystemExit(f"--small / --large: need 1 <= small < large, got {args.small} / {args.large}")
    small, large = per_step_s(args.small, args.repeats), per_step_s(args.large, args.repeats)
    print(f"{args.small} sequences: {small * 1e6:.1f} us per step; {args.large}: {large * 1e6:.1f} us per step")
    print(f"host time per sequence per step (slope): {(large - small) / (args.large - args.small) * 1e6:.2f} us")


if __name__ == "__main__":
    main()
