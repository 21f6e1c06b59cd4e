"""Property tests of the serving core: random request mixes, pools, budgets and schedulers run to completion,
with the block-pool and scheduler invariants checked after every schedule() and update_from_output()."""

from __future__ import annotations

import os
import random

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from core_helpers import check_sched_invariants
from twin.core.request import Request, RequestStatus
from twin.core.scheduler_config import SchedulerConfig
from twin.core.schedulers import make_scheduler

# TWIN_CORE_EXAMPLES=5000 for a deeper hunt
EXAMPLES = int(os.environ.get("TWIN_CORE_EXAMPLES", "300"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def scenarios(draw):
    """A configuration, a request mix sized to it, and a pool from hopelessly small to roomy."""
    kind = draw(st.sampled_from(["continuous", "continuous", "prefill_first", "static"]))
    block_size = draw(st.sampled_from([1, 2, 4, 16]))
    max_model_len = draw(st.integers(8, 160))
    max_num_seqs = draw(st.integers(1, 8))
    chunked = draw(st.booleans()) if kind == "continuous" else True
    whole = kind == "prefill_first" or not chunked
    lo = max(max_num_seqs, max_model_len if whole and kind != "static" else 1)
    budget = draw(st.integers(lo, max(lo, 200)))
    cfg = SchedulerConfig(
        scheduler=kind,
        block_size=block_size,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=budget,
        enable_chunked_prefill=chunked,
        enable_prefix_caching=draw(st.sampled_from([True, True, False])),
        long_prefill_token_threshold=draw(st.sampled_from([0, 0, 1, 7, 32])),
        policy=draw(st.sampled_from(["fcfs", "priority"])) if kind == "continuous" else "fcfs",
        num_lookahead_tokens=draw(st.sampled_from([0, 0, 2])) if kind == "continuous" else 0,
        reserve_null_block=draw(st.booleans()),
        free_unhashed_blocks_to_head=draw(st.booleans()),
        scheduler_reserve_full_isl=draw(st.booleans()),
        prefix_cache_stats_at_admission=draw(st.booleans()),
        pad_spec_decode_first_step=draw(st.booleans()),
        num_speculative_tokens=draw(st.sampled_from([0, 2])) if kind == "continuous" else 0,
        admission_watermark=draw(st.sampled_from([0.0, 0.0, 0.1])),
        static_batch_size=draw(st.integers(1, 5)),
        static_reserve_max_length=draw(st.booleans()),
        static_pad_finished=draw(st.booleans()),
    )
    n = draw(st.integers(1, 12))
    reqs = []
    for i in range(n):
        if draw(st.integers(0, 19)) == 0:
            prompt = draw(st.integers(max_model_len, max_model_len + 20))  # too long: rejected
        else:
            prompt = draw(st.integers(1, max_model_len - 1))
        out = draw(st.integers(1, 30))
        prefix_key = draw(st.sampled_from([None, "p0", "p0", "p1", "p2"]))
        segments = None
        if prefix_key is not None:
            shared = min(prompt, draw(st.integers(1, max_model_len)))
            segments = [(prefix_key, shared)]
            if prompt > shared:
                segments.append((("own", i), prompt - shared))
        max_tokens = draw(st.one_of(st.none(), st.integers(1, 30)))
        reqs.append(dict(prompt=prompt, out=out, segments=segments, max_tokens=max_tokens,
                         priority=draw(st.integers(0, 2)),
                         arrive_step=draw(st.one_of(st.just(0), st.integers(0, 3), st.integers(0, 20)))))
    reqs.sort(key=lambda r: r["arrive_step"])  # added in id order
    need = [-(-min(r["prompt"] + (r["max_tokens"] or r["out"]), max_model_len) // block_size) for r in reqs]
    extra = 1 if cfg.reserve_null_block else 0
    base = max(2, max(need) + extra + int(cfg.admission_watermark * (max(need) + 1)) + 1)
    mode = draw(st.sampled_from(["tiny", "tight", "tight", "tight", "roomy"]))
    if mode == "tiny":  # some requests can never fit: rejected
        num_gpu_blocks = draw(st.integers(2, base))
    elif mode == "tight":  # everything fits alone, little fits together: preemption
        num_gpu_blocks = draw(st.integers(base, base + max(need)))
    else:
        num_gpu_blocks = draw(st.integers(base, max(base, sum(need) + extra + 2)))
    return cfg, num_gpu_blocks, reqs


def run_to_completion(cfg, num_gpu_blocks, workload, seed, spec_prob):
    rng = random.Random(seed)
    s = make_scheduler(cfg, num_gpu_blocks)
    kv = s.kv_cache_manager
    requests = [Request(i, float(w["arrive_step"]), w["prompt"], w["out"], prompt_segments=w["segments"],
                        max_tokens=w["max_tokens"], priority=w["priority"]) for i, w in enumerate(workload)]
    pending = list(zip((w["arrive_step"] for w in workload), requests))
    accepted: list[Request] = []
    start_order: list[int] = []
    started: set[int] = set()
    total_work = sum(r.num_prompt_tokens + r.target_output_tokens for r in requests)
    max_steps = 40 * total_work + 200
    step_no = 0
    n_spec = 0
    while pending or s.has_unfinished_requests():
        assert step_no < max_steps, "no progress: deadlock or livelock"
        while pending and pending[0][0] <= step_no:
            _, r = pending.pop(0)
            if s.add_request(r):
                accepted.append(r)
        # drafts for running decodes (the engine never proposes past max_tokens)
        for r in s.running:
            if r.num_computed_tokens == r.num_tokens - 1 and rng.random() < spec_prob:
                r.num_spec_tokens = max(0, min(rng.randint(1, 4), r.max_tokens - r.num_output_tokens - 1))
        out = s.schedule(float(step_no))
        check_sched_invariants(s, out)
        n_real = len(out.requests) - out.num_padding
        real = out.requests[:n_real]
        assert len(set(map(id, real))) == n_real
        assert not set(map(id, out.preempted)) & set(map(id, real))
        for r in out.preempted:
            assert r.status == RequestStatus.PREEMPTED and r.num_computed_tokens == 0
        for i, r in enumerate(real):
            assert out.num_new_tokens[i] > 0 or cfg.scheduler != "continuous"
            assert r.num_computed_tokens == out.num_computed_before[i] + out.num_new_tokens[i]
            if cfg.scheduler != "static":
                assert r.num_computed_tokens <= cfg.max_model_len - 1
            if r.request_id not in started:
                started.add(r.request_id)
                start_order.append(r.request_id)
        if cfg.scheduler == "prefill_first":
            # a prefill step holds newly admitted requests only, a decode step none
            assert out.num_new_requests in (0, n_real), "a prefill-first step mixed prefill and decode"
        # the forward pass: one token per finished prefill, plus a random number of accepted drafts
        gen = []
        for i, r in enumerate(out.requests):
            if i >= n_real or r.num_computed_tokens < r.num_tokens:
                gen.append(0)
            else:
                gen.append(1 + rng.randint(0, out.num_spec_tokens[i]))
                n_spec += out.num_spec_tokens[i]
        s.update_from_output(out, num_generated=gen)
        check_sched_invariants(s)
        for r in real:
            assert r.num_spec_tokens == 0  # verified drafts are consumed
        for r in s.running:
            assert r.num_computed_tokens <= r.num_tokens
        step_no += 1
    # everything finished, every block back in the free queue
    for r in requests:
        assert r.is_finished
        if r in accepted:
            assert r.status in (RequestStatus.FINISHED_STOPPED, RequestStatus.FINISHED_LENGTH_CAPPED)
            stop_at = min(r.target_output_tokens, r.max_tokens)
            assert r.num_output_tokens == stop_at or r.num_tokens == cfg.max_model_len
        else:
            assert r.status == RequestStatus.FINISHED_REJECTED and r.reject_reason
    assert set(map(id, s.rejected)) == {id(r) for r in requests if r not in accepted}
    pool = kv.block_pool
    assert pool.get_num_free_blocks() == pool.num_usable_blocks
    assert all(b.ref_cnt == 0 for b in pool.blocks if not b.is_null)
    assert not any(kv.req_to_blocks.values())
    assert kv.usage == 0.0
    event(f"scheduler={cfg.scheduler}")
    event(f"preempted={s.num_preemptions > 0}")
    event(f"rejected={len(s.rejected) > 0}")
    event(f"prefix hits={kv.num_hit_tokens > 0}")
    event(f"evictions={pool.num_evictions > 0}")
    event(f"spec verified={n_spec > 0}")
    return s, accepted, start_order


@SETTINGS
@given(scenarios(), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 0.0, 0.5, 1.0]))
def test_random_mixes_run_to_completion(scenario, seed, spec_prob):
    cfg, num_gpu_blocks, workload = scenario
    s, accepted, start_order = run_to_completion(cfg, num_gpu_blocks, workload, seed, spec_prob)
    if cfg.policy == "fcfs":
        # requests are added in id order; under FCFS they first start in that order (no starvation)
        assert start_order == sorted(start_order)
    assert sorted(start_order) == sorted(r.request_id for r in accepted)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 30), st.sampled_from([1, 4, 16]), st.integers(1, 8), st.integers(0, 2**32 - 1))
def test_equal_arrivals_start_in_order(num_gpu_blocks, block_size, max_num_seqs, seed):
    rng = random.Random(seed)
    cfg = SchedulerConfig(max_num_batched_tokens=64, max_num_seqs=max_num_seqs, block_size=block_size,
                          max_model_len=64)
    workload = [dict(prompt=rng.randint(1, 60), out=rng.randint(1, 20), segments=None, max_tokens=None,
                     priority=0, arrive_step=0) for _ in range(10)]
    _, accepted, start_order = run_to_completion(cfg, num_gpu_blocks, workload, seed, 0.0)
    assert start_order == [r.request_id for r in accepted]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["alloc", "free", "touch", "cache"]), st.integers(0, 50)),
                max_size=80),
       st.integers(2, 12), st.booleans(), st.booleans())
def test_block_pool_random_ops(ops, num_blocks, reserve_null, to_head):
    from twin.core.block_pool import BlockPool
    pool = BlockPool(num_blocks, reserve_null_block=reserve_null, free_unhashed_to_head=to_head)
    held: list = []  # one entry per reference
    for op, x in ops:
        if op == "alloc":
            n = x % 4
            if n <= pool.get_num_free_blocks():
                held.extend(pool.get_new_blocks(n))
        elif op == "free" and held:
            pool.free_blocks([held.pop(x % len(held))])
        elif op == "touch":
            cached = list(pool.cached_block_hash_to_block.values())
            if cached:
                b = cached[x % len(cached)]
                pool.touch([b])
                held.append(b)
        elif op == "cache" and held:
            b = held[x % len(held)]
            if b.block_hash is None:
                pool.cache_block(b, x % 5)
        # invariants
        free = pool.free_block_queue.block_ids()
        assert len(free) == len(set(free)) == pool.get_num_free_blocks()
        for b in pool.blocks:
            if b.is_null:
                continue
            assert b.ref_cnt == sum(1 for h in held if h is b)
            assert (b.ref_cnt == 0) == (b.block_id in free)
        for h, b in pool.cached_block_hash_to_block.items():
            assert b.block_hash == h
        n_hashed = sum(1 for b in pool.blocks if b.block_hash is not None)
        assert n_hashed == len(pool.cached_block_hash_to_block) + sum(map(len, pool._duplicates.values()))
        assert 0.0 <= pool.get_usage() <= 1.0
