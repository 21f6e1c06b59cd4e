"""Where jobs run: in this process, on a local process pool, or on a Ray cluster; and the wave driver that
lets searches (bisection, pruned grids, the planner) run many independent searches side by side.

Every backend's ``map(fn, items)`` returns results in the order of ``items``, whatever order they finish in,
so a deterministic ``fn`` gives the same results on every backend and any number of workers.

A *search* is a generator that yields a list of jobs and receives their results (same order), as often as it
likes, and finally returns its answer. ``drive(search, executor)`` runs it; ``gather(searches)`` runs several
as one search, batching each round's jobs into one wave, so they share the pool. Decisions happen only
between waves, on complete results, so the outcome never depends on which worker finished first.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Generator, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

from twin.errors import TwinInputError

BACKENDS = ("process", "ray", "serial")
Search = Generator[list, list, Any]
OnDone = Callable[[int], None]


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover
        return max(1, os.cpu_count() or 1)


class SerialExecutor:
    """Runs jobs here, one after the other (tests, debugging, one core)."""

    backend = "serial"

    def __init__(self) -> None:
        self.workers = 1

    def map(self, fn: Callable, items: Sequence, on_done: OnDone | None = None) -> list:
        out = []
        for item in items:
            out.append(fn(item))
            if on_done:
                on_done(1)
        return out

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _run_chunk(fn: Callable, items: Sequence) -> list:
    return [fn(item) for item in items]


def _chunks(items: Sequence, workers: int) -> list[list]:
    """About four chunks per worker (fewer round trips for small jobs, still balanced for big ones)."""
    size = max(1, -(-len(items) // (workers * 4)))
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def _pool_context():
    # fork is cheapest (workers inherit the imported modules and the parsed traces); spawn elsewhere
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


class ProcessExecutor(SerialExecutor):
    """A local ``concurrent.futures.ProcessPoolExecutor``; the pool lives until ``close``. Jobs travel in
    chunks (about four per worker) so that small simulations are not dominated by round trips."""

    backend = "process"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or default_workers()
        self._pool: ProcessPoolExecutor | None = None

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=_pool_context())
        return self._pool

    def map(self, fn: Callable, items: Sequence, on_done: OnDone | None = None) -> list:
        if not items:
            return []
        if self.workers == 1 or len(items) == 1:
            return super().map(fn, items, on_done)
        pool = self._get_pool()
        chunks = _chunks(items, self.workers)
        futures = [pool.submit(_run_chunk, fn, chunk) for chunk in chunks]
        size = {f: len(c) for f, c in zip(futures, chunks)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            if on_done:
                on_done(sum(size[f] for f in done))
        return [r for f in futures for r in f.result()]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class RayExecutor(SerialExecutor):
    """Ray tasks: a local Ray (``address=None``: started here with ``workers`` CPUs, no dashboard) or a
    running cluster (``address="ray://host:10001"`` or ``"auto"``). On a remote cluster the ``twin``
    package is shipped with the job (``runtime_env.py_modules``) unless the cluster already has it."""

    backend = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None, ship_code: bool | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise TwinInputError("backend ray: the ray package is not installed; pip install 'ray>=2.9' "
                                 "(or the project's [plan] extra), or use --backend process") from None
        self._ray = ray
        self._started = False
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                      "ignore_reinit_error": True}
            if address:
                kwargs["address"] = address
                if ship_code is None or ship_code:
                    import twin

                    kwargs["runtime_env"] = {"py_modules": [os.path.dirname(twin.__file__)]}
            else:
                kwargs["num_cpus"] = workers or default_workers()
            ray.init(**kwargs)
            self._started = True
        self.workers = int(ray.cluster_resources().get("CPU", workers or 1))
        self._remote: dict[Callable, Any] = {}

    def map(self, fn: Callable, items: Sequence, on_done: OnDone | None = None) -> list:
        if not items:
            return []
        ray = self._ray
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = ray.remote(num_cpus=1)(_run_chunk)
        chunks = _chunks(items, self.workers)
        refs = [remote.remote(fn, chunk) for chunk in chunks]
        size = {ref: len(c) for ref, c in zip(refs, chunks)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            if on_done:
                on_done(sum(size[r] for r in done))
        return [r for chunk in ray.get(refs) for r in chunk]

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()
            self._started = False


def make_executor(backend: str = "process", workers: int | None = None, ray_address: str | None = None):
    """An executor by name: ``process`` (default), ``ray`` (local, or ``ray_address``) or ``serial``."""
    if ray_address and backend == "process":
        backend = "ray"
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise TwinInputError(f"workers: {workers!r}: must be an integer >= 1")
    if backend == "serial":
        return SerialExecutor()
    if backend == "process":
        return ProcessExecutor(workers)
    if backend == "ray":
        return RayExecutor(workers, ray_address)
    raise TwinInputError(f"backend: {backend!r}: allowed: {', '.join(BACKENDS)}")


# ---------------------------------------------------------------------------------------------------------
# searches
# ---------------------------------------------------------------------------------------------------------
class Runner:
    """Runs job lists on an executor, remembering results by ``job.key()`` (a search that asks for the same
    simulation twice gets it once) and counting what ran."""

    def __init__(self, executor, fn: Callable | None = None, on_done: OnDone | None = None) -> None:
        from twin.plan.evaluate import evaluate

        self.executor = executor
        self.fn = fn or evaluate
        self.on_done = on_done
        self.cache: dict[str, Any] = {}
        self.num_run = 0
        self.num_waves = 0

    def run(self, jobs: Sequence) -> list:
        keys = [job.key() for job in jobs]
        todo: dict[str, Any] = {}
        for key, job in zip(keys, jobs):
            if key not in self.cache and key not in todo:
                todo[key] = job
        if todo:
            results = self.executor.map(self.fn, list(todo.values()), self.on_done)
            self.cache.update(zip(todo.keys(), results))
            self.num_run += len(todo)
            self.num_waves += 1
        return [self.cache[k] for k in keys]

    def drive(self, search: Search) -> Any:
        """Run a search to its end and return its answer."""
        try:
            jobs = next(search)
            while True:
                jobs = search.send(self.run(jobs))
        except StopIteration as stop:
            return stop.value


def gather(searches: Iterable[Search]) -> Search:
    """Several searches as one: each wave carries every unfinished search's next jobs; returns their answers
    in order."""
    searches = list(searches)
    answers: list[Any] = [None] * len(searches)
    pending: dict[int, list] = {}

    def advance(i: int, value: list | None) -> None:
        try:
            jobs = next(searches[i]) if value is None else searches[i].send(value)
            while not jobs:  # nothing to run: answer at once
                jobs = searches[i].send([])
            pending[i] = jobs
        except StopIteration as stop:
            answers[i] = stop.value

    for i in range(len(searches)):
        advance(i, None)
    while pending:
        order = sorted(pending)
        batch = [job for i in order for job in pending[i]]
        results = yield batch
        pos = 0
        current = {i: pending.pop(i) for i in order}
        for i in order:
            n = len(current[i])
            advance(i, results[pos:pos + n])
            pos += n
    return answers


def run_once(jobs: list) -> Search:
    """A search that runs one list of jobs and returns their results."""
    if not jobs:
        return []
    results = yield jobs
    return results
