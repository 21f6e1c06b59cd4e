"""The calibration engine's one serving loop, over the twin's engine core (``twin.core.engine_core``)::

    out = core.schedule(now); sampled, measured_s = execute(out); core.update(out, sampled)

the same step as the twin's replica, with the cost model replaced by the real forward pass. What differs
between the two ways of serving is a parameter:

- the clock: ``WallClock`` (real time: arrivals are waited for, a step lasts what the wall clock says, update
  included; ``calibration.serve``) or ``EngineClock`` (the engine's own timeline: the sum of measured step
  times, jumping over idle gaps; ``calibration.serve_steps``);
- the feed: where requests come from (``admit(core, t)``: arrivals, rejections, client aborts), when the next
  one is due (``next_s()``, None: no more), what a finished request sets off (``finished(req, t)``), and when
  to stop (``stop(t, has_work)``, asked after the admissions);
- ``execute(out)``: runs the step, returns the sampled token ids per scheduled row and the measured seconds
  (None: the clock measures); ``on_step(out, start, dt)`` records what else the caller keeps.

The request records are written by ``twin.results.request_log`` as the twin writes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from twin.core.engine_core import EngineCore
from twin.results.records import StepRecords
from twin.results.request_log import close_record, close_unfinished, stamp_emissions


def serve_loop(core: EngineCore, feed: Any, clock: Any, execute: Callable, steps: StepRecords,
               on_step: Callable | None = None) -> float:
    """Serve until the feed runs dry and the engine is idle, or the feed says stop; returns the end time."""
    while True:
        t = clock.read()
        feed.admit(core, t)
        has_work = core.has_work()
        if feed.stop(t, has_work):
            break
        empty_step = False
        if has_work:
            out = core.schedule(t)
            if len(out.requests) > out.num_padding:
                start = clock.read()
                sampled, measured_s = execute(out)
                result = core.update(out, sampled)
                end, dt = clock.step_end(start, measured_s)
                stamp_emissions(out.requests, result.num_emitted, end)
                for req in result.finished:
                    close_record(req, end)
                    feed.finished(req, end)
                steps.append_step(start, dt, out)
                if on_step is not None:
                    on_step(out, start, dt)
                continue
            empty_step = True
        if not clock.idle(core, feed.next_s(), empty_step):
            break
    sched = core.scheduler
    close_unfinished(list(sched.running) + list(sched.waiting))
    return clock.read()


class EngineClock:
    """The engine's own timeline: a step lasts its measured time; idle, the clock jumps to what comes next
    (a static batch's wake-up, else the next arrival)."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def read(self) -> float:
        return self.now_s

    def step_end(self, start: float, measured_s: float) -> tuple[float, float]:
        self.now_s = start + measured_s
        return self.now_s, measured_s

    def idle(self, core: EngineCore, next_s: float | None, empty_step: bool) -> bool:
        sched = core.scheduler
        if empty_step:
            wake = getattr(sched, "next_wakeup_s", None)
            if wake is not None and wake > self.now_s:
                self.now_s = wake
                return True
            if next_s is None:
                raise RuntimeError(f"the scheduler produced an empty step with {len(sched.running)} running "
                                   f"and {len(sched.waiting)} waiting requests")
        if next_s is None:
            return False
        self.now_s = max(self.now_s, next_s)
        return True


class WallClock:
    """Real time since the clock was made: a step lasts what the wall clock says (scheduling excluded, the
    update included); idle, it sleeps until the next arrival or client deadline."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.clock, self.sleep = clock, sleep
        self.start_s = clock()

    def read(self) -> float:
        return self.clock() - self.start_s

    def step_end(self, start: float, measured_s: float | None) -> tuple[float, float]:
        end = self.read()
        return end, end - start

    def idle(self, core: EngineCore, next_s: float | None, empty_step: bool) -> bool:
        if next_s is None:
            return core.has_work()       # nothing more to come: stop once the engine is idle
        wait = next_s - self.read()
        if wait > 0:
            self.sleep(wait)
        return True
