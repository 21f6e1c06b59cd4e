"""Time step shapes on the engine: a point's inputs (distinct KV blocks per sequence, deterministic token
ids), interleaved timed runs of a group of points, and the untimed warm-up.

The KV of a point's context is not computed: the paged cache is preallocated (zero-filled, so its memory is
touched) and every sequence gets its own blocks, so attention reads as many bytes as in serving; the values do
not change the time of dense kernels. Timing is :mod:`calibration.timing`'s: the device synchronised at both
ends of a step, warm-up runs discarded, CUDA events on a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from calibration.engine import ModelRunner, SeqInput
from calibration.environment import torch_dtype
from calibration.model import ModelShape
from calibration.samples import StepSample
from calibration.sweep_plan import Point
from calibration.timing import synchronize
from calibration.token_ids import segment_token_ids


def build_runner(shape: Any, device: str = "cpu", dtype: Any = None, *, num_blocks: int,
                 block_size: int = 16, seed: int = 0, cuda_graphs: bool = False) -> ModelRunner:
    return ModelRunner(ModelShape.from_any(shape), device, torch_dtype(dtype, device), num_blocks=num_blocks,
                       block_size=block_size, seed=seed, cuda_graphs=cuda_graphs)


class _Blocks:
    """Distinct block tables for a point's sequences, always from block 1 up (points run one at a time)."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks, self.bs = num_blocks, block_size

    def tables(self, point: Point) -> list[list[int]]:
        nxt, out = 1, []
        for n, c in zip(point.n, point.c):
            k = -(-(n + c) // self.bs)
            out.append(list(range(nxt, nxt + k)))
            nxt += k
        if nxt > self.num_blocks:
            raise ValueError(f"point needs {nxt - 1} KV blocks, the cache has {self.num_blocks - 1}")
        return out


def point_inputs(runner: ModelRunner, point: Point, index: int = 0) -> list[SeqInput]:
    tables = _Blocks(runner.kv_cache.num_blocks, runner.block_size).tables(point)
    vocab = runner.shape.vocab_size
    return [SeqInput(segment_token_ids(("calibration", index, i), c, c + n, vocab).tolist(), c, bt, 1)
            for i, (n, c, bt) in enumerate(zip(point.n, point.c, tables))]


def measure_point(runner: ModelRunner, point: Point, *, warmup: int, repeats: int, index: int = 0,
                  deadline: float | None = None) -> StepSample | None:
    """Time one point on its own (None if the deadline passes before one timed run)."""
    return measure_points(runner, [point], warmup=warmup, repeats=repeats, first_index=index,
                          deadline=deadline)[0]


def measure_points(runner: ModelRunner, points: Sequence[Point], *, warmup: int, repeats: int,
                   first_index: int = 0, deadline: float | None = None) -> list[StepSample | None]:
    """Time a group of points with their runs interleaved: every point's warm-up, then ``repeats`` rounds of
    one run of each point. A burst of background load then lands on one run of several points rather than on
    every run of one, and the medians shrug it off. A point whose every timed run was cut by the deadline
    gives None. (The points' block tables overlap; what their K/V writes leave behind does not change the
    time of the next.)"""
    inputs = [point_inputs(runner, p, first_index + i) for i, p in enumerate(points)]
    times: list[list[float]] = [[] for _ in points]
    dev: list[list[float]] = [[] for _ in points]

    def late() -> bool:
        return deadline is not None and time.perf_counter() > deadline

    for seqs in inputs:
        for _ in range(warmup):
            if late():
                return [None] * len(points)
            runner.execute_batch(seqs)
    for _ in range(repeats):
        for i, seqs in enumerate(inputs):
            if late():
                break
            out = runner.execute_batch(seqs)
            times[i].append(out.elapsed_s)
            if out.device_s is not None:
                dev[i].append(out.device_s)
        if late():
            break
    return [StepSample(p.kind, list(p.n), list(p.c), t, d or None) if t else None
            for p, t, d in zip(points, times, dev)]


def warm_up(runner: ModelRunner, rounds: int = 3) -> None:
    """Exercise every code path once or more (allocator, kernel selection, cuBLAS handles), untimed."""
    shapes = [Point("decode", [1], [16]), Point("decode", [1] * 4, [64] * 4), Point("prefill", [64], [0]),
              Point("prefill", [16], [32]), Point("mixed", [1, 1, 48], [40, 8, 16])]
    for _ in range(rounds):
        for i, p in enumerate(shapes):
            if p.blocks(runner.block_size) < runner.kv_cache.num_blocks:
                runner.execute_batch(point_inputs(runner, p, i))
    synchronize(runner.device)
