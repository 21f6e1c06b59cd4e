"""What the profiler measures: the sweep plan (grids of step shapes, the replay workload's ranges, the
limits), its defaults per device, and the ordered list of points it expands to.

Points are ordered coarse to fine (each sweep's extremes first, then midpoints) and interleaved across kinds,
so a run cut short by its time budget still covers the whole range. A point is one step shape: every
sequence's new tokens ``n`` and cached context ``c``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass
class SweepPlan:
    """What to measure. Every list is a grid; points that need more KV than ``max_pool_tokens`` or longer
    sequences than ``max_seq_len`` are left out."""

    prefill_chunks: list[int]
    prefill_contexts: list[int]
    decode_batches: list[int]
    decode_contexts: list[int]
    mixed: list[tuple[int, int, int, int]]        # (decode batch, decode context, chunk, chunk context)
    num_random: int = 16
    random_max_batch: int = 32
    random_max_context: int = 1024
    random_max_chunk: int = 256
    warmup: int = 2
    repeats: int = 5
    interleave: int = 8                           # points whose timed runs are interleaved (see measure_points)
    min_points: int = 24                          # measured whatever the budget (a fit needs a few per feature)
    fill_budget: bool = True                      # spend budget left at the end on more runs of the points
    # the replay: a small workload with shared prefixes, served by the V1 scheduler
    replay_requests: int = 24
    replay_prompt: tuple[int, int] = (16, 256)
    replay_output: tuple[int, int] = (8, 48)
    replay_shared_prefix: int = 64
    replay_max_num_seqs: int = 16
    replay_max_batched_tokens: int = 256
    replay_repeats: int = 3
    replay_share: float = 0.25                    # of the budget, reserved for the replay
    max_pool_tokens: int = 1 << 17
    max_seq_len: int = 4096
    block_size: int = 16
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mixed"] = [list(m) for m in self.mixed]
        return d


def default_plan(device_type: str = "cpu", *, quick: bool = False, max_seq_len: int = 4096,
                 max_pool_tokens: int | None = None, seed: int = 0) -> SweepPlan:
    """The grids used by ``twin calibrate``: CPU (the tiny model, seconds per step at most) and GPU (an 8B-class
    model: contexts to 8k, chunks to 8k tokens, batches to 256); ``quick`` thins them (about a minute on a
    CPU)."""
    if device_type == "cuda":
        plan = SweepPlan(
            prefill_chunks=[16, 64, 128, 256, 512, 1024, 2048, 4096, 8192],
            prefill_contexts=[0, 1024, 4096],
            decode_batches=[1, 2, 4, 8, 16, 32, 64, 128, 256],
            decode_contexts=[128, 512, 2048, 8192],
            mixed=[(b, c, n, c2) for b in (8, 64) for c in (512, 2048) for n, c2 in ((256, 0), (1024, 1024))],
            num_random=32, random_max_batch=128, random_max_context=4096, random_max_chunk=2048,
            warmup=3, repeats=10,
            replay_requests=64, replay_prompt=(64, 2048), replay_output=(16, 128), replay_shared_prefix=512,
            replay_max_num_seqs=64, replay_max_batched_tokens=2048, replay_repeats=3, replay_share=0.25,
            max_pool_tokens=max_pool_tokens or 1 << 18, max_seq_len=max_seq_len, seed=seed)
        if quick:
            plan.prefill_chunks = [16, 128, 512, 2048, 8192]
            plan.prefill_contexts = [0, 2048]
            plan.decode_batches = [1, 4, 16, 64, 256]
            plan.decode_contexts = [128, 2048]
            plan.num_random, plan.replay_requests, plan.repeats = 12, 24, 5
        return plan
    plan = SweepPlan(
        prefill_chunks=[8, 16, 32, 64, 128, 256, 512, 1024, 2048],
        prefill_contexts=[0, 256, 1024, 2048],
        decode_batches=[1, 2, 4, 8, 16, 32, 64, 128],
        decode_contexts=[1, 16, 128, 512, 1024, 2048],
        mixed=[(b, c, n, c2) for b in (4, 16, 48) for c in (64, 512) for n, c2 in ((64, 0), (256, 256))],
        num_random=48, random_max_batch=64, random_max_context=2048, random_max_chunk=512,
        warmup=2, repeats=7,
        replay_requests=48, replay_prompt=(16, 512), replay_output=(8, 64), replay_shared_prefix=64,
        replay_max_num_seqs=32, replay_max_batched_tokens=512, replay_repeats=3, replay_share=0.2,
        max_pool_tokens=max_pool_tokens or 1 << 17, max_seq_len=max_seq_len, seed=seed)
    if quick:
        plan.prefill_chunks = [8, 32, 128, 512, 1024]
        plan.prefill_contexts = [0, 512]
        plan.decode_batches = [1, 4, 16, 48]
        plan.decode_contexts = [1, 128, 1024]
        plan.mixed = [(b, 256, n, c2) for b in (4, 24) for n, c2 in ((32, 0), (192, 256))]
        plan.num_random, plan.random_max_batch, plan.random_max_context = 20, 32, 1024
        plan.random_max_chunk = 256
        plan.warmup, plan.repeats = 2, 5
        plan.replay_requests, plan.replay_prompt, plan.replay_output = 20, (16, 256), (8, 40)
        plan.replay_max_num_seqs, plan.replay_max_batched_tokens = 16, 256
    return plan


def apply_overrides(plan: SweepPlan, overrides: dict[str, Any]) -> SweepPlan:
    """A copy of ``plan`` with some fields replaced (e.g. from a ``--plan`` JSON file); unknown fields are an
    error naming them."""
    return dataclasses.replace(plan, **checked_overrides(overrides))


def checked_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` checked field by field (ValueError naming an unknown field, or a field's bad value)."""
    known = {f.name for f in dataclasses.fields(SweepPlan)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"plan: unknown field {unknown[0]!r}; allowed: {', '.join(sorted(known))}")
    return {key: _checked(key, value) for key, value in overrides.items()}


MAX_GRID = 256              # values in one grid list (a plan measures each point: 200,000 of them never ends)
MAX_TOKENS = 1 << 20        # a batch, chunk, context or pool size in tokens (or sequences)
GRIDS = {"prefill_chunks": 1, "prefill_contexts": 0, "decode_batches": 1, "decode_contexts": 0}   # field: least
COUNTS = {"num_random": (0, 10_000), "random_max_batch": (1, MAX_TOKENS), "random_max_context": (1, MAX_TOKENS),
          "random_max_chunk": (1, MAX_TOKENS), "warmup": (0, 100), "repeats": (1, 100), "interleave": (1, 1000),
          "min_points": (0, 10_000), "replay_requests": (1, 10_000), "replay_shared_prefix": (0, MAX_TOKENS),
          "replay_max_num_seqs": (1, 4096), "replay_max_batched_tokens": (1, MAX_TOKENS), "replay_repeats": (1, 100),
          "max_pool_tokens": (1, 2**31 - 1), "max_seq_len": (1, MAX_TOKENS), "block_size": (1, 1024),
          "seed": (0, 2**32 - 1)}


def _whole(value: Any, lo: int, hi: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


def _checked(key: str, value: Any) -> Any:
    """A plan field's value from a ``--sweep-plan`` file, in the field's form (lists as tuples where the plan
    keeps tuples); ValueError naming the field, what it may hold and the value otherwise."""
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    if key in GRIDS:
        lo = GRIDS[key]
        if not isinstance(value, list) or len(value) > MAX_GRID or not all(_whole(v, lo, MAX_TOKENS) for v in value):
            raise ValueError(f"plan: {key} = {shown}: must be a list of at most {MAX_GRID} whole numbers {lo} to "
                             f"{MAX_TOKENS:,}")
        return value
    if key == "mixed":
        if not isinstance(value, list) or len(value) > MAX_GRID or not all(
                isinstance(m, list) and len(m) == 4 and all(_whole(v, 0, MAX_TOKENS) for v in m)
                and m[0] >= 1 and m[2] >= 1 for m in value):
            raise ValueError(f"plan: mixed = {shown}: must be a list of at most {MAX_GRID} [decode batch >= 1, "
                             f"decode context, chunk >= 1, chunk context] whole numbers to {MAX_TOKENS:,}")
        return [tuple(m) for m in value]
    if key in ("replay_prompt", "replay_output"):
        if not isinstance(value, list) or len(value) != 2 or not all(_whole(v, 1, MAX_TOKENS) for v in value) \
                or value[0] > value[1]:
            raise ValueError(f"plan: {key} = {shown}: must be [least, most] tokens, 1 <= least <= most <= "
                             f"{MAX_TOKENS:,}")
        return tuple(value)
    if key == "fill_budget":
        if not isinstance(value, bool):
            raise ValueError(f"plan: fill_budget = {shown}: must be true or false")
        return value
    if key == "replay_share":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise ValueError(f"plan: replay_share = {shown}: must be a number in [0, 1), the budget's share")
        return float(value)
    lo, hi = COUNTS[key]
    if not _whole(value, lo, hi):
        raise ValueError(f"plan: {key} = {shown}: must be a whole number {lo} to {hi:,}")
    return value


@dataclass
class Point:
    kind: str
    n: list[int]
    c: list[int]

    def blocks(self, block_size: int) -> int:
        return sum(-(-(n + c) // block_size) for n, c in zip(self.n, self.c))

    @property
    def max_len(self) -> int:
        return max(n + c for n, c in zip(self.n, self.c))


def _spread_order(k: int) -> list[int]:
    """Indices 0..k-1 ordered coarse to fine: both ends, then midpoints of the gaps, recursively."""
    if k <= 2:
        return list(range(k))
    order, seen = [0, k - 1], {0, k - 1}
    gaps = [(0, k - 1)]
    while gaps:
        nxt = []
        for lo, hi in gaps:
            if hi - lo > 1:
                mid = (lo + hi) // 2
                if mid not in seen:
                    order.append(mid)
                    seen.add(mid)
                nxt += [(lo, mid), (mid, hi)]
        gaps = nxt
    return order


def _grid_order(rows: Sequence[Any], cols: Sequence[Any]) -> list[tuple[Any, Any]]:
    """A 2-D grid, coarse to fine along both axes."""
    ro, co = _spread_order(len(rows)), _spread_order(len(cols))
    rank = {(i, j): (max(ro.index(i), co.index(j)), ro.index(i) + co.index(j)) for i in ro for j in co}
    return [(rows[i], cols[j]) for i, j in sorted(rank, key=rank.get)]


def plan_points(plan: SweepPlan) -> list[Point]:
    """Every sweep point of ``plan`` that fits its limits, kinds interleaved, each kind coarse to fine."""
    rng = np.random.default_rng(plan.seed)
    bs = plan.block_size
    by_kind: dict[str, list[Point]] = {"decode": [], "prefill": [], "mixed": [], "random": []}
    for b, c in _grid_order(sorted(plan.decode_batches), sorted(plan.decode_contexts)):
        by_kind["decode"].append(Point("decode", [1] * b, [c] * b))
    for n, c in _grid_order(sorted(plan.prefill_chunks), sorted(plan.prefill_contexts)):
        by_kind["prefill"].append(Point("prefill", [n], [c]))
    for b, c, n, c2 in plan.mixed:
        by_kind["mixed"].append(Point("mixed", [1] * b + [n], [c] * b + [c2]))

    def loguniform(lo: int, hi: int) -> int:
        return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))) if hi > lo else lo

    for _ in range(plan.num_random):
        b = loguniform(1, plan.random_max_batch)
        n = [1] * b
        c = [loguniform(1, plan.random_max_context) for _ in range(b)]
        for _ in range(int(rng.integers(0, 3))):
            n.append(loguniform(2, plan.random_max_chunk))
            c.append(0 if rng.random() < 0.5 else loguniform(1, plan.random_max_context))
        order = rng.permutation(len(n))
        by_kind["random"].append(Point("random", [n[i] for i in order], [c[i] for i in order]))

    def fits(p: Point) -> bool:
        return p.blocks(bs) * bs <= plan.max_pool_tokens and p.max_len <= plan.max_seq_len

    lists = [[p for p in by_kind[k] if fits(p)] for k in ("decode", "prefill", "mixed", "random")]
    out: list[Point] = []
    i = 0
    while any(i < len(lst) for lst in lists):
        for lst in lists:
            if i < len(lst):
                out.append(lst[i])
        i += 1
    return out


def pool_blocks(plan: SweepPlan, points: Sequence[Point]) -> int:
    """KV blocks the plan needs (the largest point, or the replay's whole running set), plus the null block."""
    bs = plan.block_size
    need = max((p.blocks(bs) for p in points), default=1)
    replay = plan.replay_max_num_seqs * -(-(plan.replay_prompt[1] + plan.replay_shared_prefix
                                            + plan.replay_output[1]) // bs)
    cap = max(1, plan.max_pool_tokens // bs)
    return 1 + min(max(need, replay), cap)
