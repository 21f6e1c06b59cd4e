"""Measure real engine steps for fitting: controlled sweeps plus a replay of a small workload.

Sweeps (each point is one step shape, run ``warmup`` times untimed and ``repeats`` times timed; every timed
run is kept and the median is what the fit uses):

* ``prefill``: one chunk of ``n`` tokens after ``c`` tokens already in the cache (``c = 0``: a whole prompt);
* ``decode``: ``B`` sequences of one new token, each after ``c`` cached tokens;
* ``mixed``: a decode batch with one prefill chunk riding along (what chunked prefill schedules);
* ``random``: seeded heterogeneous batches (decodes at different contexts plus chunks), as serving makes them;
* ``replay``: the steps a small workload produces when served through the serving core's scheduler on the real
  engine (:mod:`calibration.serve_steps`).

Timing (``calibration.timing``): the device is synchronised before the clock is read at both ends of a step,
warm-up runs are discarded, and on a GPU CUDA events time the device work as well. The KV of the context a
point needs is not computed: the paged cache is preallocated (and zero-filled, so its memory is touched) and
every sequence gets its own distinct blocks, so attention reads as many bytes as in serving; the values do not
change the time of dense kernels.

The whole run respects a time budget: points are ordered coarse to fine (each sweep's extremes first, then
midpoints) and interleaved across kinds, so a short budget still covers the range; the replay gets a share of
the budget and whatever the sweeps leave. The first ``min_points`` points are measured whatever the budget
(a fit needs a few samples per feature). Budget left once the plan and the replay are done goes to further
passes over the sweep points, adding timed runs spread over the whole run (robust medians on a busy machine).
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import re
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from calibration.engine import ModelRunner, SeqInput, segment_token_ids
from calibration.model import ModelShape
from calibration.samples import StepSample
from calibration.timing import synchronize

Progress = Callable[[float, str], None]

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}


# ---------------------------------------------------------------------------------------------------- the plan

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
    known = {f.name for f in dataclasses.fields(SweepPlan)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"plan: unknown field {unknown[0]!r}; allowed: {', '.join(sorted(known))}")
    values = dict(overrides)
    if "mixed" in values:
        values["mixed"] = [tuple(m) for m in values["mixed"]]
    for key in ("replay_prompt", "replay_output"):
        if key in values:
            values[key] = tuple(values[key])
    return dataclasses.replace(plan, **values)


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


# ---------------------------------------------------------------------------------------------------- runner

def torch_dtype(name: str | torch.dtype | None, device: str) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    if name in (None, "auto"):
        return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    key = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}.get(str(name), str(name))
    if key not in TORCH_DTYPES:
        raise ValueError(f"dtype: {name!r} is not one of {', '.join(TORCH_DTYPES)}")
    return TORCH_DTYPES[key]


def pool_blocks(plan: SweepPlan, points: Sequence[Point]) -> int:
    """KV blocks the plan needs (the largest point, or the replay's whole running set), plus the null block."""
    bs = plan.block_size
    need = max((p.blocks(bs) for p in points), default=1)
    replay = plan.replay_max_num_seqs * -(-(plan.replay_prompt[1] + plan.replay_shared_prefix
                                            + plan.replay_output[1]) // bs)
    cap = max(1, plan.max_pool_tokens // bs)
    return 1 + min(max(need, replay), cap)


def build_runner(shape: Any, device: str = "cpu", dtype: Any = None, *, num_blocks: int,
                 block_size: int = 16, seed: int = 0) -> ModelRunner:
    return ModelRunner(ModelShape.from_any(shape), device, torch_dtype(dtype, device), num_blocks=num_blocks,
                       block_size=block_size, seed=seed)


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


# ---------------------------------------------------------------------------------------------------- replay

def replay_specs(plan: SweepPlan, *, mean_interarrival_s: float = 0.0, seed: int | None = None,
                 max_model_len: int | None = None) -> list[Any]:
    """A small seeded workload: about half the requests open with one of two shared system prompts
    (``replay_shared_prefix`` tokens), prompts and outputs log-uniform in the plan's ranges, Poisson arrivals
    (all at 0 when ``mean_interarrival_s`` is 0)."""
    from twin.workload.spec import RequestSpec

    rng = np.random.default_rng(plan.seed + 1 if seed is None else seed)
    lo, hi = plan.replay_prompt
    olo, ohi = plan.replay_output
    t = 0.0
    specs = []
    for i in range(plan.replay_requests):
        if mean_interarrival_s > 0 and i:
            t += float(rng.exponential(mean_interarrival_s))
        suffix = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))))
        out = int(rng.integers(olo, ohi + 1))
        segs: list[tuple[Any, int]] = []
        if plan.replay_shared_prefix and rng.random() < 0.5:
            segs.append((("replay-system", int(rng.integers(0, 2))), plan.replay_shared_prefix))
        segs.append((("replay-prompt", i), suffix))
        n_prompt = sum(n for _, n in segs)
        if max_model_len is not None and n_prompt + out >= max_model_len:
            continue
        specs.append(RequestSpec(i, t, n_prompt, out, tuple(segs), task_class="replay"))
    return specs


def run_replay(runner: ModelRunner, plan: SweepPlan, *, deadline: float | None = None,
               mean_decode_step_s: float = 0.0, progress: Callable[[int], None] | None = None):
    """Serve the replay workload on ``runner`` through the V1 scheduler; returns the ``ServeResult``."""
    from calibration.serve_steps import serve
    from twin.core.scheduler_config import SchedulerConfig

    max_len = min(plan.max_seq_len, runner.shape.max_position_embeddings)
    mean_out = sum(plan.replay_output) / 2
    # arrivals so that about half of max_num_seqs are in flight at the measured decode speed
    gap = mean_out * mean_decode_step_s / max(1.0, plan.replay_max_num_seqs / 2)
    specs = replay_specs(plan, mean_interarrival_s=gap, max_model_len=max_len)
    tokens = max(plan.replay_max_batched_tokens, plan.replay_max_num_seqs)
    config = SchedulerConfig(max_num_seqs=plan.replay_max_num_seqs, max_num_batched_tokens=tokens,
                             max_model_len=max_len, block_size=runner.block_size,
                             enable_prefix_caching=True, enable_chunked_prefill=True)
    return serve(runner, specs, config, repeats=plan.replay_repeats, deadline_s=deadline,
                 on_step=(lambda k, _res: progress(k)) if progress else None)


# ---------------------------------------------------------------------------------------------------- environment

def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def device_name(device: str | torch.device) -> str:
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return cpu_name()


def catalog_device(device: str | torch.device, name: str | None = None) -> str | None:
    """The twin catalog's name for the device (``H200-SXM`` for "NVIDIA H200"), or None if unknown."""
    from twin.hardware.catalog import list_gpus, resolve_gpu
    from twin.errors import TwinInputError

    if torch.device(device).type == "cpu":
        return "CPU"
    name = name or device_name(device)
    try:
        return resolve_gpu(name).name
    except TwinInputError:
        pass
    key = name.lower().replace("nvidia", "").replace("geforce", "").strip()
    best = None
    for g in list_gpus():
        for alias in (g.name, *g.aliases):
            a = alias.lower().replace("nvidia", "").strip()
            if a and re.search(rf"(?<![a-z0-9]){re.escape(a)}(?![a-z0-9])", key) and (best is None or len(a) > best[0]):
                best = (len(a), g.name)
    return best[1] if best else None


def _git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parents[1]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment(runner: ModelRunner) -> dict[str, Any]:
    """Where and how the samples were measured."""
    import scipy

    dev = runner.device
    env: dict[str, Any] = {
        "device_type": dev.type,
        "device_name": device_name(dev),
        "catalog_device": catalog_device(dev),
        "dtype": DTYPE_NAMES.get(runner.dtype, str(runner.dtype)),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "cpu_count": os.cpu_count(),
        "cpu": cpu_name(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "block_size": runner.block_size,
        "num_kv_blocks": runner.kv_cache.num_blocks,
        "kv_cache_bytes": runner.kv_cache.nbytes,
        "model_params": runner.shape.num_params,
        "model_shape": asdict(runner.shape),
        "git_commit": _git_commit(),
    }
    if hasattr(os, "getloadavg"):
        env["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        env.update(gpu_total_memory_bytes=props.total_memory, gpu_sm_count=props.multi_processor_count,
                   gpu_capability=f"{props.major}.{props.minor}")
    return env


# ---------------------------------------------------------------------------------------------------- the run

@dataclass
class ProfileRun:
    samples: list[StepSample]
    environment: dict[str, Any]
    plan: dict[str, Any]
    replay: dict[str, Any] | None = None
    wall_s: float = 0.0
    points_planned: int = 0
    points_measured: int = 0
    notes: list[str] = field(default_factory=list)
    canary: list[list[float]] = field(default_factory=list)   # [seconds into the run, canary step median]
    drift_pct: float | None = None
    extra_passes: int = 0                                     # passes of more runs after the plan was done


# a small fixed step timed throughout the run to watch the machine's speed
CANARY = Point("decode", [1] * 4, [128] * 4)


def speed_drift_pct(canary: Sequence[Sequence[float]]) -> float | None:
    """Spread of the canary step's time over the run: (p90 - p10) / median, in percent."""
    if len(canary) < 3:
        return None
    t = np.array([c[1] for c in canary])
    return float((np.percentile(t, 90) - np.percentile(t, 10)) / np.median(t) * 100.0)


def profile_engine(runner: ModelRunner, plan: SweepPlan, budget_s: float, *, replay: bool = True,
                   progress: Progress | None = None) -> ProfileRun:
    """Run the sweeps and the replay on ``runner`` within ``budget_s`` seconds (warm-up included)."""
    t0 = time.perf_counter()
    end = t0 + budget_s
    sweep_end = t0 + budget_s * (1.0 - (plan.replay_share if replay else 0.0))
    prog = progress or (lambda f, label: None)
    points = plan_points(plan)
    warm_up(runner)
    samples: list[StepSample] = []
    notes: list[str] = []
    group = max(1, plan.interleave)
    canary_inputs = point_inputs(runner, CANARY, -1)
    canary: list[list[float]] = []

    def check_speed(force: bool = False) -> None:
        """Time the canary step (at most about once a second): the machine's speed over the run (a busy shared
        machine drifts)."""
        now = time.perf_counter() - t0
        if not force and canary and now - canary[-1][0] < 1.0:
            return
        times = [runner.execute_batch(canary_inputs).elapsed_s for _ in range(3)]
        canary.append([round(now, 3), round(statistics.median(times), 7)])

    by_point: dict[int, StepSample] = {}
    for i in range(0, len(points), group):
        enough = len(by_point) >= plan.min_points
        if enough and time.perf_counter() >= sweep_end:
            break
        check_speed()
        prog(min(1.0, (time.perf_counter() - t0) / budget_s), f"sweep points {i + 1}-{min(i + group, len(points))}"
             f" of {len(points)}")
        try:
            got = measure_points(runner, points[i:i + group], warmup=plan.warmup, repeats=plan.repeats,
                                 first_index=i, deadline=sweep_end if enough else None)
        except torch.OutOfMemoryError:
            got = _one_by_one(runner, points[i:i + group], plan, i, sweep_end if enough else None, notes)
        by_point.update((i + j, s) for j, s in enumerate(got) if s is not None)
    samples.extend(by_point[k] for k in sorted(by_point))
    check_speed(force=True)
    run = ProfileRun(samples, environment(runner), plan.to_dict(), points_planned=len(points),
                     points_measured=len(samples), canary=canary)
    run.notes.extend(notes)
    if len(samples) < len(points):
        run.notes.append(f"measured {len(samples)} of {len(points)} sweep points (time budget or memory)")
    if replay and time.perf_counter() < end:
        decode = [s.median_s for s in samples
                  if s.kind == "decode" and len(s.num_new_tokens) <= plan.replay_max_num_seqs]
        est = statistics.median(decode) if decode else 0.0
        res = run_replay(runner, plan, deadline=end, mean_decode_step_s=est,
                         progress=lambda k: prog(min(1.0, (time.perf_counter() - t0) / budget_s),
                                                 f"replay step {k}"))
        samples.extend(res.samples)
        run.replay = {
            "num_steps": len(res.samples), "stopped_early": res.stopped_early, "engine_time_s": res.end_s,
            "num_requests": len(res.requests),
            "num_finished": sum(1 for r in res.requests if r.status == "finished"),
            "num_preemptions": res.num_preemptions, "prefix_cache_hit_tokens": res.prefix_cache_hit_tokens,
            "prefix_cache_query_tokens": res.prefix_cache_query_tokens, "scheduler_config": res.config,
            "step_records": {name: res.steps.column(name).tolist() for name in _STEP_COLUMNS},
        }
        if res.stopped_early:
            run.notes.append(f"time budget: the replay stopped after {len(res.samples)} steps")
    if plan.fill_budget and len(by_point) == len(points) and time.perf_counter() < end - 0.5:
        # the sweep points and the replay's step shapes (a step's time depends on its shape, not on which
        # blocks hold its context), each getting more runs
        targets = [(points[k], by_point[k]) for k in sorted(by_point)]
        replayed = [(Point("replay", list(x.num_new_tokens), list(x.num_computed_before)), x)
                    for x in samples if x.kind == "replay"]
        # shared prefix blocks counted once in serving may not fit the pool as private copies: leave those
        targets += [(p, x) for p, x in replayed if p.blocks(runner.block_size) < runner.kv_cache.num_blocks]
        passes = _more_runs(runner, targets, plan, end, check_speed,
                            lambda label: prog(min(1.0, (time.perf_counter() - t0) / budget_s), label))
        run.extra_passes = passes
    check_speed(force=True)
    run.environment["load_average_end"] = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") \
        else None
    run.drift_pct = speed_drift_pct(canary)
    if run.drift_pct is not None and run.drift_pct > 15:
        run.notes.append(f"the machine's speed drifted by {run.drift_pct:.0f}% during the run (canary step "
                         f"{CANARY.kind} x{len(CANARY.n)} at context {CANARY.c[0]}): a busy machine; expect a "
                         f"poorer fit")
    run.wall_s = time.perf_counter() - t0
    prog(1.0, "done")
    return run


def _more_runs(runner: ModelRunner, targets: Sequence[tuple[Point, StepSample]], plan: SweepPlan, end: float,
               check_speed: Callable[[], None], prog: Callable[[str], None]) -> int:
    """Spend what is left of the budget on more timed runs of measured steps, pass after pass (each pass
    interleaved as the first): medians over runs spread across the whole run resist a busy machine's bursts
    and drift. Returns the number of passes begun."""
    group = max(1, plan.interleave)
    repeats = max(1, plan.repeats // 2)
    passes = 0
    while time.perf_counter() < end:
        passes += 1
        for i in range(0, len(targets), group):
            if time.perf_counter() >= end:
                break
            check_speed()
            prog(f"extra pass {passes}: steps {i + 1}-{min(i + group, len(targets))} of {len(targets)}")
            chunk = targets[i:i + group]
            try:
                got = measure_points(runner, [p for p, _ in chunk], warmup=1, repeats=repeats, first_index=i,
                                     deadline=end)
            except torch.OutOfMemoryError:
                _free_cached_memory(runner)
                continue
            for (_, sample), new in zip(chunk, got):
                if new is None:
                    continue
                sample.times_s.extend(new.times_s)
                if new.device_times_s and sample.device_times_s is not None:
                    sample.device_times_s.extend(new.device_times_s)
    return passes


def _one_by_one(runner: ModelRunner, points: Sequence[Point], plan: SweepPlan, first: int,
                deadline: float | None, notes: list[str]) -> list[StepSample | None]:
    """A group ran out of device memory: measure its points one at a time, leaving out those that still do."""
    out: list[StepSample | None] = []
    for j, p in enumerate(points):
        _free_cached_memory(runner)
        try:
            out.append(measure_point(runner, p, warmup=plan.warmup, repeats=plan.repeats, index=first + j,
                                     deadline=deadline))
        except torch.OutOfMemoryError:
            notes.append(f"out of device memory: left out {p.kind} x{len(p.n)} ({sum(p.n)} tokens, longest "
                         f"{p.max_len})")
            out.append(None)
    _free_cached_memory(runner)
    return out


def _free_cached_memory(runner: ModelRunner) -> None:
    if runner.device.type == "cuda":
        torch.cuda.empty_cache()


def _step_columns() -> tuple[str, ...]:
    from twin.results.records import STEP_COLUMN_NAMES

    return STEP_COLUMN_NAMES


_STEP_COLUMNS = _step_columns()
