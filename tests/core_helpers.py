"""Shared builders and invariant checks for the serving-core tests (block pool, KV cache manager, schedulers)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from twin.core.request import Request, RequestStatus
from twin.core.scheduler_base import SchedulerBase
from twin.core.scheduler_config import SchedulerConfig
from twin.core.scheduler_output import SchedulerOutput
from twin.core.schedulers import make_scheduler


def make_sched(kind: str = "continuous", *, num_gpu_blocks: int = 11, **overrides) -> SchedulerBase:
    """A scheduler on a small pool, vLLM-test style: budget 100, block size 16, 11 blocks (10 usable)."""
    cfg = dict(scheduler=kind, max_num_batched_tokens=100, max_num_seqs=16, block_size=16, max_model_len=100)
    cfg.update(overrides)
    return make_scheduler(SchedulerConfig(**cfg), num_gpu_blocks)


def req(rid: Hashable, prompt: int, out: int = 10, *, arrival: float = 0.0,
        segments: Sequence[tuple[Hashable, int]] | None = None, prefix: tuple[Hashable, int] | None = None,
        **kw) -> Request:
    """A request; ``prefix=(key, n)`` puts a shared n-token segment before a private remainder."""
    if prefix is not None:
        key, n = prefix
        segments = [(key, n)] + ([(("own", rid), prompt - n)] if prompt > n else [])
    return Request(rid, arrival, prompt, out, prompt_segments=segments, **kw)


def ids(requests: Sequence[Request]) -> list:
    return [r.request_id for r in requests]


def block_ids(sched_or_kv, rid: Hashable) -> list[int]:
    return getattr(sched_or_kv, "kv_cache_manager", sched_or_kv).get_block_ids(rid)


def free_ids(sched_or_kv) -> list[int]:
    kv = getattr(sched_or_kv, "kv_cache_manager", sched_or_kv)
    return kv.block_pool.free_block_queue.block_ids()


def ref_cnts(sched_or_kv, block_id_list: Sequence[int]) -> list[int]:
    kv = getattr(sched_or_kv, "kv_cache_manager", sched_or_kv)
    return [kv.block_pool.blocks[b].ref_cnt for b in block_id_list]


def step(sched: SchedulerBase, num_generated: Sequence[int] | None = None, now_s: float | None = None):
    """One engine step: schedule, then apply the default forward-pass output."""
    out = sched.schedule(now_s) if now_s is not None else sched.schedule()
    res = sched.update_from_output(out, num_generated)
    return out, res


def check_free_iff_unreferenced(pool) -> None:
    """vLLM's block-pool invariant on the block objects themselves: every block in the free queue (private
    runs and never-used ids included) has ref count 0, every other block but the null block has ref count > 0."""
    queue = pool.free_block_queue
    blocks = pool.blocks
    free_ids = queue.block_ids()
    assert [blocks[i].ref_cnt for i in free_ids] == [0] * len(free_ids), "a block in the free queue is referenced"
    free_set = set(free_ids)
    held = [b for b in blocks if not b.is_null and b.block_id not in free_set]
    assert all(b.ref_cnt > 0 for b in held), f"unreferenced blocks outside the free queue: {held}"
    assert len(free_ids) == queue.num_free_blocks


def check_pool_invariants(kv) -> None:
    """Structural invariants of a KVCacheManager's block pool."""
    pool = kv.block_pool
    check_free_iff_unreferenced(pool)
    free = pool.free_block_queue.block_ids()
    assert len(free) == pool.free_block_queue.num_free_blocks
    assert len(set(free)) == len(free), "a block appears twice in the free queue"
    free_set = set(free)
    if pool.null_block is not None:
        assert pool.null_block.block_id not in free_set
    in_use = set()
    for block in pool.blocks:
        assert block.ref_cnt >= 0, f"negative ref count on {block}"
        if block.is_null:
            continue
        if block.ref_cnt > 0:
            in_use.add(block.block_id)
            assert block.block_id not in free_set, f"{block} both in use and free"
        else:
            assert block.block_id in free_set, f"{block} idle but not in the free queue"
    assert len(in_use) + len(free) == pool.num_usable_blocks
    # ref counts equal the number of request block tables holding the block
    holders: dict[int, int] = {}
    for blocks in kv.req_to_blocks.values():
        for b in blocks:
            holders[b.block_id] = holders.get(b.block_id, 0) + 1
    for block in pool.blocks:
        if not block.is_null:
            assert block.ref_cnt == holders.get(block.block_id, 0), f"{block}: {holders.get(block.block_id, 0)} holders"
    # the hash map only points at blocks carrying that hash
    for h, block in pool.cached_block_hash_to_block.items():
        assert block.block_hash == h
    for h, dups in pool._duplicates.items():
        assert h in pool.cached_block_hash_to_block
        for block in dups:
            assert block.block_hash == h
    from twin.core.free_block_queue import PRIVATE_HASH

    hashed = [b for b in pool.blocks if b.block_hash is not None and b.block_hash is not PRIVATE_HASH]
    n_mapped = len(pool.cached_block_hash_to_block) + sum(len(d) for d in pool._duplicates.values())
    assert n_mapped == len(hashed), "a hashed block is missing from the map"


def check_sched_invariants(sched: SchedulerBase, out=None) -> None:
    kv = sched.kv_cache_manager
    check_pool_invariants(kv)
    cfg = sched.config
    bs = cfg.block_size
    assert len(sched.running) <= (cfg.static_batch_size if cfg.scheduler == "static" else cfg.max_num_seqs)
    assert len(set(map(id, sched.running))) == len(sched.running)
    for r in sched.running:
        assert r.status == RequestStatus.RUNNING
        assert len(kv.get_blocks(r.request_id)) * bs >= r.num_computed_tokens
        assert r.num_computed_tokens <= r.num_tokens_with_spec
        assert r.num_tokens < cfg.max_model_len or r.is_finished
    for r in sched.waiting:
        assert r.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED)
        assert r.num_computed_tokens == 0
        assert not kv.get_blocks(r.request_id)
    held = {rid for rid, blocks in kv.req_to_blocks.items() if blocks}
    assert held <= {r.request_id for r in sched.running}, "a request not running holds blocks"
    if out is not None and cfg.scheduler != "static":
        assert out.total_num_scheduled_tokens == sum(out.num_new_tokens)
        assert out.total_num_scheduled_tokens <= cfg.max_num_batched_tokens


def step_shape(new: Sequence[int], computed: Sequence[int], spec: Sequence[int] | None = None):
    """A step's shape for the cost models: new tokens and computed context per sequence (no draft tokens)."""
    return SchedulerOutput(step_index=0, num_new_tokens=list(new), num_computed_before=list(computed),
                           num_spec_tokens=[0] * len(new) if spec is None else list(spec))


# a 1,024-token prompt beside three 900-token decodes, and the fit's arrays of it and of a pure decode step: the
# sequences' context before, and the (query, key) pairs as the roofline counts them
PROMPT_PAIRS = 3 * 900 + 0.5 * (1024 * 1024 + 3 + 1027)


def check_prompt_only_term(m, plain, part: str, extra_s: float):
    """A cost model ``m`` whose GPU term ``part`` only prompt steps pay, against ``plain`` without it: the prompt
    step above costs ``extra_s`` more step by step and in ``explain()`` (whose parts still add up), a pure decode
    nothing, and the fit's arrays give the step-by-step values. Returns (the prompt step's ``explain()``, the
    arrays)."""
    import numpy as np
    import pytest

    prompt = step_shape([1024, 1, 1, 1], [0, 900, 900, 900])
    decode = step_shape([1, 1, 1, 1], [900] * 4)
    assert m.step_time_s(prompt) - plain.step_time_s(prompt) == pytest.approx(extra_s, rel=1e-9)
    assert m.step_time_s(decode) == plain.step_time_s(decode)
    e = m.explain(prompt)
    assert e[part] == pytest.approx(extra_s, rel=1e-12)
    assert sum(v for k, v in e.items() if k != "total_s") == pytest.approx(e["total_s"], rel=1e-12)
    assert part not in m.explain(decode)
    arr = m.step_times_s(np.array([1027, 4]), np.array([4, 4]), np.array([4, 4]), np.array([2700, 3600]),
                         np.array([PROMPT_PAIRS, 3604.0]))
    assert arr[0] == pytest.approx(m.step_time_s(prompt), rel=1e-12)
    assert arr[1] == pytest.approx(m.step_time_s(decode), rel=1e-12)
    return e, arr
