"""Run one ``twin`` command line the way a user would (click's CliRunner on ``twin.cli.main.main``), in a forked
child with a wall-clock bound and a memory bound, and classify what happened.

A fork keeps each case cheap (the parent has imported everything once) and makes a hang or runaway memory
growth a finding instead of a stuck test run: the parent kills a child that passes its time bound, and the
child's address space is capped so an allocation that would exhaust the machine raises MemoryError (which
surfaces as a traceback finding)."""

from __future__ import annotations

import json
import os
import resource
import select
import signal
import time
import traceback
from dataclasses import dataclass

from click.testing import CliRunner

from twin.cli.main import main

# what the child may allocate beyond what the parent already holds
MEMORY_HEADROOM_BYTES = 3 << 30


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


def _child(args: list[str], write_fd: int) -> None:
    try:
        with open("/proc/self/statm") as f:
            vm_pages = int(f.read().split()[0])
        limit = vm_pages * os.sysconf("SC_PAGE_SIZE") + MEMORY_HEADROOM_BYTES
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        result = CliRunner().invoke(main, args, catch_exceptions=True)
        tb = None
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            tb = "".join(traceback.format_exception(*result.exc_info))
        payload = {"exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr,
                   "traceback": tb}
    except BaseException:  # noqa: BLE001 - the harness reports anything at all
        payload = {"exit_code": 1, "stdout": "", "stderr": "", "traceback": traceback.format_exc()}
    data = json.dumps(payload).encode()
    view = memoryview(data)
    while view:
        n = os.write(write_fd, view)
        view = view[n:]
    os.close(write_fd)
    os._exit(0)


def run_cli(args: list[str], timeout_s: float) -> Outcome:
    """``twin ARGS`` in a forked child; a child still running after ``timeout_s`` is killed and is a hang."""
    read_fd, write_fd = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_fd)
        _child(args, write_fd)
    os.close(write_fd)
    chunks: list[bytes] = []
    hung = False
    deadline = start + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            hung = True
            os.kill(pid, signal.SIGKILL)
            break
        ready, _, _ = select.select([read_fd], [], [], left)
        if ready:
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    seconds = time.monotonic() - start
    if hung or not chunks:
        return Outcome(None, "", "", None if hung else "child died without reporting", hung, seconds)
    payload = json.loads(b"".join(chunks))
    tb = payload["traceback"]
    printed = payload["stdout"] + payload["stderr"]
    if tb is None and "Traceback (most recent call last)" in printed:
        tb = printed
    return Outcome(payload["exit_code"], payload["stdout"], payload["stderr"], tb, False, seconds)
