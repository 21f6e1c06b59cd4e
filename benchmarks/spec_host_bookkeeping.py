"""Host time per sequence of speculative decoding's bookkeeping in a synchronous engine step (vLLM 0.11 V1),
measured on this machine's CPU: the prior of ``twin.spec_decode.step_cost.SPEC_SEQ_HOST_S``.

Without async scheduling the engine core's CPU work between two GPU steps is not hidden, and speculation adds,
for every running request and every step, Python-level work in the scheduler and the model runner on top of the
plain decode path (whose per-sequence cost the ground-truth fit already holds in the target's cost model).
This script re-enacts that added work with the same kinds of Python objects (request objects with token lists,
dicts keyed by request id, a numpy token table, a CPU torch tensor of sequence lengths), one statement for
each statement of vLLM 0.11's spec-decode path, written from reading the release (not copied):

* scheduler ``schedule``: the request's tokens with its drafts, the drafts trimmed to the budget and recorded
  in ``scheduled_spec_decode_tokens``;
* model runner ``_update_states``: the drafts written into the input batch's token table, its token count;
* model runner ``_calc_spec_decode_metadata`` input: the request's draft count looked up by request id;
* rejection sampler ``parse_output``: the verified row masked and turned into a Python list;
* EAGLE proposer ``prepare_next_token_ids_padded``: the backup next token, ``get_token_id`` of the request at
  its sequence length (a CPU tensor ``.item()`` per request);
* engine ``take_draft_token_ids``: the drafts' row as a list;
* scheduler ``update_from_output``: drafts and accepted counted, the rejected ones rolled back, the
  per-position acceptance stats observed;
* scheduler ``update_draft_token_ids``: the request looked up, finished and structured-output checks, the new
  drafts stored.

    python benchmarks/spec_host_bookkeeping.py [--seqs 64] [--k 4] [--repeats 200]

It prints microseconds per sequence per step. The server's host (a recent Xeon or EPYC) may be faster than the
machine this runs on; the figure is a prior, not a fit.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cli_checks import bounded, positive_int  # noqa: E402

PLACEHOLDER = -1


class _Req:
    __slots__ = ("request_id", "prompt_token_ids", "output_token_ids", "spec_token_ids", "num_computed_tokens",
                 "status", "use_structured_output")

    def __init__(self, rid: str, prompt_len: int) -> None:
        self.request_id = rid
        self.prompt_token_ids = list(range(prompt_len))
        self.output_token_ids = [1] * 16
        self.spec_token_ids: list[int] = []
        self.num_computed_tokens = prompt_len + 15
        self.status = 2
        self.use_structured_output = False

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def num_tokens_with_spec(self) -> int:
        return self.num_tokens + len(self.spec_token_ids)

    def is_finished(self) -> bool:
        return self.status > 4

    def get_token_id(self, idx: int) -> int:
        n = len(self.prompt_token_ids)
        return self.prompt_token_ids[idx] if idx < n else self.output_token_ids[idx - n]


class _Stats:
    def __init__(self, k: int) -> None:
        self.num_drafts = self.num_draft_tokens = self.num_accepted_tokens = 0
        self.per_pos = [0] * k

    def observe(self, drafted: int, accepted: int) -> None:
        self.num_drafts += 1
        self.num_draft_tokens += drafted
        self.num_accepted_tokens += accepted
        for i in range(accepted):
            self.per_pos[i] += 1


def one_step(reqs, index, k, token_table, num_tokens, num_tokens_no_spec, seq_lens_cpu, verified, drafts, stats,
             budget=8192):
    scheduled: dict[str, list[int]] = {}
    for r in reqs:                                          # schedule
        new = r.num_tokens_with_spec - r.num_computed_tokens
        new = min(new, budget)
        if r.spec_token_ids:
            n_spec = new + r.num_computed_tokens - r.num_tokens
            if n_spec > 0:
                spec = r.spec_token_ids
                if len(spec) > n_spec:
                    del spec[n_spec:]
                scheduled[r.request_id] = spec
    for r in reqs:                                          # _update_states
        spec = scheduled.get(r.request_id, ())
        if spec:
            i = index[r.request_id]
            start = int(num_tokens_no_spec[i])
            token_table[i, start:start + len(spec)] = spec
            num_tokens[i] += len(spec)
    counts = np.zeros(len(reqs), dtype=np.int32)            # _calc_spec_decode_metadata's input
    for rid, ids in scheduled.items():
        counts[index[rid]] = len(ids)
    valid = (verified != PLACEHOLDER)                       # parse_output
    outputs = [row[valid[i]].tolist() for i, row in enumerate(verified)]
    backup = np.array([reqs[i].get_token_id(seq_lens_cpu[i].item()) for i in range(len(reqs))])  # backup ids
    draft_lists = drafts.tolist()                           # take_draft_token_ids
    for r, gen in zip(reqs, outputs):                       # update_from_output
        ids = scheduled.get(r.request_id)
        if ids:
            n_draft, n_acc = len(ids), len(gen) - 1
            r.num_computed_tokens -= n_draft + 1 - len(gen)
            stats.observe(n_draft, n_acc)
    for rid, spec in zip([r.request_id for r in reqs], draft_lists):   # update_draft_token_ids
        r = reqs[index[rid]]
        if r is None or r.is_finished():
            continue
        if r.use_structured_output:
            spec = spec[:k]
        r.spec_token_ids = spec
    return counts, backup



def best_of_5(step, repeats: int) -> float:
    """The fastest of five timings of ``repeats`` calls of ``step``, per call (seconds)."""
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeats):
            step()
        best = min(best, (time.perf_counter() - t0) / repeats)
    return best

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqs", type=positive_int, default=64)
    ap.add_argument("--k", type=bounded(True, 1, high=4096 - 208),   # the token table's free columns
                    default=4)
    ap.add_argument("--repeats", type=positive_int, default=200)
    a = ap.parse_args()
    n, k = a.seqs, a.k
    reqs = [_Req(f"req-{i}", 192) for i in range(n)]
    for r in reqs:
        r.spec_token_ids = [7] * k
    index = {r.request_id: i for i, r in enumerate(reqs)}
    token_table = np.zeros((n, 4096), dtype=np.int32)
    num_tokens = np.full(n, 208, dtype=np.int32)
    num_tokens_no_spec = num_tokens.copy()
    seq_lens_cpu = torch.full((n,), 200, dtype=torch.int32)
    verified = np.full((n, k + 1), PLACEHOLDER, dtype=np.int64)
    verified[:, 0] = 5                                      # acceptance 0: the target's own token only
    drafts = torch.zeros((n, k), dtype=torch.int64)
    stats = _Stats(k)
    def reset_requests() -> None:
        for r in reqs:
            r.spec_token_ids = [7] * k
            r.num_computed_tokens = r.num_tokens

    def one_reset_step() -> None:
        reset_requests()
        one_step(reqs, index, k, token_table, num_tokens, num_tokens_no_spec, seq_lens_cpu, verified, drafts, stats)

    best = best_of_5(one_reset_step, a.repeats)
    reset = best_of_5(reset_requests, a.repeats)    # the reset is not vLLM's work: timed alone and taken off
    per_seq_us = (best - reset) / n * 1e6
    print(f"{n} sequences, k={k}: {per_seq_us:.1f} us per sequence per step (best of 5 x {a.repeats} steps)")


if __name__ == "__main__":
    main()
