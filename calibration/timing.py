"""Timing a device honestly: synchronise before reading the clock, discard warm-up runs, report the median.

On CUDA, kernels run asynchronously: a wall-clock reading without ``torch.cuda.synchronize()`` measures the
launch, not the work. :class:`StepTimer` synchronises at both ends (wall time of the whole step, Python and launch
overheads included, which is what a step costs a serving engine) and also records CUDA events around the
device work (``device_s``: GPU time alone). On the CPU both are the same ``perf_counter`` interval.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


def synchronize(device: str | torch.device | None) -> None:
    """Wait for all queued work on ``device`` (a no-op on the CPU)."""
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


class StepTimer:
    """``with StepTimer(device) as t: ...`` then ``t.elapsed_s`` (synchronised wall time) and ``t.device_s``
    (CUDA-event time on GPU, None on CPU). ``t.mark()`` inside the block starts the device-event interval late
    (e.g. after host-side input preparation)."""

    def __init__(self, device: str | torch.device | None = None, clock: Callable[[], float] = time.perf_counter):
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.clock = clock
        self.cuda = self.device.type == "cuda"
        self.elapsed_s = float("nan")
        self.device_s: float | None = None
        self._start_event = self._end_event = None

    def __enter__(self) -> StepTimer:
        synchronize(self.device)
        if self.cuda:
            self._start_event = torch.cuda.Event(enable_timing=True)
            self._end_event = torch.cuda.Event(enable_timing=True)
        self._t0 = self.clock()
        if self.cuda:
            self._start_event.record()
        return self

    def mark(self) -> None:
        if self.cuda:
            self._start_event.record()

    def __exit__(self, *exc: Any) -> None:
        if self.cuda:
            self._end_event.record()
        synchronize(self.device)
        self.elapsed_s = self.clock() - self._t0
        if self.cuda:
            self.device_s = self._start_event.elapsed_time(self._end_event) / 1e3


@dataclass(frozen=True)
class TimingStats:
    """Repeated measurements of one thing, warm-up excluded. Times in seconds."""

    samples_s: tuple[float, ...]
    num_warmup: int

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    @property
    def mean_s(self) -> float:
        return statistics.fmean(self.samples_s)

    @property
    def min_s(self) -> float:
        return min(self.samples_s)

    @property
    def max_s(self) -> float:
        return max(self.samples_s)

    @property
    def stdev_s(self) -> float:
        return statistics.stdev(self.samples_s) if len(self.samples_s) > 1 else 0.0

    def as_dict(self) -> dict[str, float]:
        return {"median_s": self.median_s, "mean_s": self.mean_s, "min_s": self.min_s, "max_s": self.max_s,
                "stdev_s": self.stdev_s, "repeats": len(self.samples_s), "warmup": self.num_warmup}


def measure(fn: Callable[[], Any], *, warmup: int = 3, repeats: int = 10,
            device: str | torch.device | None = None,
            clock: Callable[[], float] = time.perf_counter) -> TimingStats:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times, each synchronised on ``device`` before and
    after reading ``clock``. Returns every timed sample (the median is the figure to report)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    for _ in range(warmup):
        fn()
    synchronize(device)
    samples = []
    for _ in range(repeats):
        with StepTimer(device, clock) as t:
            fn()
        samples.append(t.elapsed_s)
    return TimingStats(tuple(samples), warmup)
