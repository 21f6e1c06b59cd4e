"""Run one ``twin`` command line the way a user would (click's CliRunner on ``twin.cli.main.main``), in a child
process with a wall-clock bound and a memory bound, and classify what happened.

Children come from a forkserver that has the twin imported (a clean process: forking the test process itself
could copy a lock held by one of its threads and deadlock the child), so each case costs milliseconds, and a
hang or runaway memory growth is a finding instead of a stuck test run: a child past its time bound is
killed, and its address space is capped so an allocation that would exhaust the machine raises MemoryError
(which surfaces as a traceback finding). A named pipe with no writer is waited on for ``PIPE_WAIT_S`` (the
product's ``twin.yaml_input.PIPE_WAIT_S``, shortened so that such a case costs a second)."""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import time
import traceback
from dataclasses import dataclass

from click.testing import CliRunner

from twin.cli.main import main

# what the child may allocate beyond what the parent already holds
MEMORY_HEADROOM_BYTES = 3 << 30
# how long a case's named pipe nothing writes to is waited on (the product waits 10 s; one is enough here)
PIPE_WAIT_S = 1.0


@dataclass
class Outcome:
    exit_code: int | None        # None: killed (hang) or died without reporting
    stdout: str
    stderr: str
    traceback: str | None        # an exception that escaped the command, or "Traceback" printed
    hung: bool
    seconds: float

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def _child(args: list[str], conn) -> None:
    try:
        with open("/proc/self/statm") as f:
            vm_pages = int(f.read().split()[0])
        limit = vm_pages * os.sysconf("SC_PAGE_SIZE") + MEMORY_HEADROOM_BYTES
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        import twin.yaml_input
        twin.yaml_input.PIPE_WAIT_S = PIPE_WAIT_S
        result = CliRunner().invoke(main, args, catch_exceptions=True)
        tb = None
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            tb = "".join(traceback.format_exception(*result.exc_info))
        payload = {"exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr,
                   "traceback": tb}
    except BaseException:  # noqa: BLE001 - the harness reports anything at all
        payload = {"exit_code": 1, "stdout": "", "stderr": "", "traceback": traceback.format_exc()}
    conn.send(payload)
    conn.close()


_CONTEXT = mp.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["twin.cli.main", "twin.sim.run", "twin.plan.planner", "twin.plan.sweep",
                                 "twin.analysis.diagnose", "twin.cli.validate", "twin.cli.calibrate",
                                 "twin.cli.calibrate_results", "twin.fitting.fit", "twin.fitting.readers",
                                 "fuzz_runner"])


def run_cli(args: list[str], timeout_s: float) -> Outcome:
    """``twin ARGS`` in a child; a child still running after ``timeout_s`` is killed and is a hang."""
    start = time.monotonic()
    receiver, sender = _CONTEXT.Pipe(duplex=False)
    child = _CONTEXT.Process(target=_child, args=(list(args), sender), daemon=True)
    child.start()
    sender.close()
    payload = None
    hung = not receiver.poll(timeout_s)
    if not hung:
        try:
            payload = receiver.recv()
        except EOFError:
            payload = None
    receiver.close()
    if hung:
        child.kill()
    child.join()
    seconds = time.monotonic() - start
    if payload is None:
        return Outcome(None, "", "", None if hung else "child died without reporting", hung, seconds)
    tb = payload["traceback"]
    printed = payload["stdout"] + payload["stderr"]
    if tb is None and "Traceback (most recent call last)" in printed:
        tb = printed
    return Outcome(payload["exit_code"], payload["stdout"], payload["stderr"], tb, False, seconds)
