"""How a long ``twin plan`` or ``twin sweep`` shows it is alive, on stderr only (stdout keeps the tables):
rich's bar on a terminal; with stderr piped or redirected (a log file, CI), one plain line when the run starts
and one every ``LINE_EVERY_S`` seconds of wall time with the simulations done so far; nothing with ``--quiet``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from twin.cli.console import err_console
from twin.cli.plan_output import progress_bar

LINE_EVERY_S = 30.0


class LineProgress:
    """The calls the plan makes on rich's ``Progress`` (``add_task``, ``advance``, a context), printing plain
    lines on stderr instead of redrawing a bar."""

    def __init__(self, what: str, every_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.every_s = LINE_EVERY_S if every_s is None else every_s
        self.clock = clock
        self.done = 0
        self.t0 = self.last = 0.0

    def _line(self, text: str) -> None:
        err_console.print(f"{self.what}: {text}", highlight=False, markup=False, soft_wrap=True)

    def __enter__(self) -> LineProgress:
        self.t0 = self.last = self.clock()
        self._line(f"running simulations (a line every {self.every_s:g} s on stderr; -q hides them)")
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def add_task(self, *args: Any, **kwargs: Any) -> int:
        return 0

    def advance(self, task: int, n: float = 1) -> None:
        self.done += int(n)
        now = self.clock()
        if now - self.last >= self.every_s:
            self.last = now
            self._line(f"{self.done} simulations done, {now - self.t0:.0f} s")


def plan_progress(quiet: bool, what: str):
    """rich's bar on a terminal, plain lines without one, nothing (a disabled bar) with ``--quiet``."""
    if quiet or err_console.is_terminal:
        return progress_bar(not quiet, "simulations")
    return LineProgress(what)
