"""Runs in a worker process that can be ended: the page's Stop (or a new what-if) kills the simulation
instead of leaving it to burn a core, and every run is bounded in time and memory with a clear message.

Workers come from a ``forkserver`` that has the twin imported already, so starting one costs milliseconds,
not an interpreter start; the server's own threads are never forked.

``TWIN_DASHBOARD_RUN_LOG=path`` makes every worker append the scenario mapping it received (one JSON line,
``{"label": ..., "scenario": ...}``) before it runs: the browser tests read it to check that the run got
exactly the what-if the page listed.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import resource
import sys
import threading
import time
import types
from typing import Any, Callable

from twin.errors import TwinInputError

RUN_LOG_ENV = "TWIN_DASHBOARD_RUN_LOG"
RUN_LIMIT_S = 180.0                 # wall time one run may take
MEMORY_LIMIT_BYTES = 4 * 2**30      # data segment one worker may grow to
_PRELOAD = ["twin.dashboard.runs"]
_context: Any = None
_start_lock = threading.Lock()


def context() -> Any:
    global _context
    if _context is None:
        try:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(_PRELOAD)
        except ValueError:  # no forkserver on this platform
            ctx = mp.get_context("spawn")
        _context = ctx
    return _context


def warm_up() -> None:
    """Start the forkserver (and its twin import) now, in the background, so the first run does not wait
    for it."""
    def start() -> None:
        try:
            if context().get_start_method() == "forkserver":
                from multiprocessing import forkserver

                forkserver.ensure_running()
        except Exception:  # warming is an optimisation; the first Job starts it otherwise
            pass

    threading.Thread(target=start, name="twin-forkserver-warm-up", daemon=True).start()


def _limit_memory(limit: int) -> None:
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        cap = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    except (ValueError, OSError):
        pass


def _child(conn: Any, fn: Callable[..., Any], args: tuple, label: str, memory_limit: int) -> None:
    _limit_memory(memory_limit)
    try:
        log = os.environ.get(RUN_LOG_ENV)
        if log and args and isinstance(args[0], dict):
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"label": label, "scenario": args[0]}, sort_keys=True, default=str) + "\n")
        conn.send(("ok", fn(*args)))
    except TwinInputError as exc:
        conn.send(("input", str(exc)))
    except MemoryError:
        conn.send(("input", f"the run needed more than {memory_limit / 2**30:g} GiB of memory; make it smaller "
                            "(fewer requests, a shorter duration or replay window)"))
    except Exception as exc:  # reported on the page as one line, the worker ends either way
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


class Job:
    """``fn(*args)`` in its own process; `done`, `result`, `cancel`."""

    def __init__(self, fn: Callable[..., Any], *args: Any, label: str = "", limit_s: float = RUN_LIMIT_S,
                 memory_limit: int = MEMORY_LIMIT_BYTES) -> None:
        ctx = context()
        self.label = label
        self.limit_s = limit_s
        self._recv, send = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_child, args=(send, fn, args, label, memory_limit), daemon=True)
        self.started = time.monotonic()
        with _start_lock:  # the page is ``__main__`` under Streamlit: a worker must not import it again
            main = sys.modules.get("__main__")
            sys.modules["__main__"] = types.ModuleType("__main__")
            try:
                self.process.start()
            finally:
                if main is not None:
                    sys.modules["__main__"] = main
        send.close()
        self._answer: tuple[str, Any] | None = None

    def done(self) -> bool:
        if self._answer is None:
            if self._recv.poll():
                try:
                    self._answer = self._recv.recv()
                except EOFError:
                    self._answer = ("error", f"the worker ended without an answer (exit {self.process.exitcode})")
                self.process.join(timeout=5)
            elif not self.process.is_alive() and not self._recv.poll():
                code = self.process.exitcode
                self._answer = ("input" if code and code < 0 else "error",
                                f"the worker ended without an answer (exit {code}; out of memory?)")
            elif time.monotonic() - self.started > self.limit_s:
                self.cancel()
                self._answer = ("input", f"the run took longer than {self.limit_s:g} s and was stopped; make it "
                                         "smaller (fewer requests, a shorter duration or replay window)")
        return self._answer is not None

    def result(self) -> Any:
        if not self.done():
            raise RuntimeError("job still running")
        kind, value = self._answer
        if kind == "ok":
            return value
        if kind == "input":
            raise TwinInputError(value)
        raise RuntimeError(value)

    def cancel(self) -> None:
        """End the worker now (idempotent)."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self._recv.close()


def run_jobs(jobs: dict[str, Job], tick: Callable[[list[str]], None], every_s: float = 0.1) -> None:
    """Wait for every job (their answers are then in `Job.result`), calling ``tick(still_running_labels)``
    between polls (the page updates a status line there, which is where Streamlit raises its stop); whatever
    happens, no worker outlives this call."""
    try:
        while True:
            pending = [name for name, job in jobs.items() if not job.done()]
            if not pending:
                return
            tick(pending)
            time.sleep(every_s)
    finally:
        for job in jobs.values():
            job.cancel()
