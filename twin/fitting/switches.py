"""The held-out harness's switches as one value that travels with every simulation job (issue 33, round 23).

Three module settings decide model behaviour in the folds:

- ``multimem_allreduce``: ``twin.cost.allreduce_routes.ENABLED`` (opt-in; off: every all-reduce a ring),
- ``cold_start``: ``twin.fitting.cold_start.ENABLED`` (on; off: cold runs replayed warm),
- ``path_token_prior``: ``twin.fitting.path_token_prior.ENABLED`` (on; off: the folds as in round 9).

A trial script flips one for a whole ``fidelity_real.py`` run. A worker process started by ``fork`` inherits its
parent's settings; one started by ``spawn`` or ``forkserver`` (Python 3.14's default on Linux) imports the modules
afresh, at their embedded values, so a flip made in the parent did not reach the folds' simulations there
(docs/fidelity.md "Round 22: gpt-oss-120b's H100 TP 8 prompts held out"). ``map_jobs`` takes the parent's settings
when it is called (``current``) and applies them in the worker around each job (``applied``): every start method
sees the parent's. ``switched`` is how a script flips one for a block of code.

``twin.fitting.path_token_prior`` plans folds, above the simulator (which imports this module), so it registers its
switch here when it is imported (``register``) instead of being imported by it; a module registered inside an
``applied`` block takes the block's value.

A trial script's table patches travel the same way: ``map_jobs`` also takes the parent's carried patches
(``twin.fitting.carried_patches``) and each job applies them in a worker that does not hold them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from types import ModuleType

from twin.cost import allreduce_routes
from twin.errors import TwinInputError
from twin.fitting import carried_patches, cold_start

# each switch's module, once imported (path_token_prior: when it registers)
MODULES: dict[str, ModuleType] = {"multimem_allreduce": allreduce_routes, "cold_start": cold_start}
REPORT_KEY = "switches"       # a fidelity_real.py report's args key, present only where a switch is not embedded


@dataclass(frozen=True)
class Switches:
    """The harness's switches (each one the ``ENABLED`` of its module in ``MODULES``)."""

    multimem_allreduce: bool = False
    cold_start: bool = True
    path_token_prior: bool = True

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, bool):
                raise TwinInputError(f"switches: {f.name} is {value!r}, not true or false")

    def changed(self) -> dict[str, bool]:
        """The switches set otherwise than embedded, by name ({} at the embedded state)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) != getattr(EMBEDDED, f.name)}


EMBEDDED = Switches()
NAMES = tuple(f.name for f in dataclasses.fields(Switches))
_wanted: list[Switches] = []       # the ``applied`` blocks open in this process, innermost last


def register(name: str, module: ModuleType) -> None:
    """``module``'s ``ENABLED`` is the switch ``name`` (set to the innermost open ``applied`` block's value)."""
    if name not in NAMES:
        raise TwinInputError(f"switches: unknown switch {name!r}; allowed: {', '.join(NAMES)}")
    MODULES[name] = module
    if _wanted:
        module.ENABLED = getattr(_wanted[-1], name)


def current() -> Switches:
    """The switches as this process has them now (one whose module is not imported yet: as it will be)."""
    unset = _wanted[-1] if _wanted else EMBEDDED
    return Switches(**{n: MODULES[n].ENABLED if n in MODULES else getattr(unset, n) for n in NAMES})


def _set(switches: Switches) -> None:
    for name, module in MODULES.items():
        module.ENABLED = getattr(switches, name)


@contextmanager
def applied(switches: Switches) -> Iterator[Switches]:
    """``switches`` set in this process for the block, the previous ones put back after it (an error too)."""
    if not isinstance(switches, Switches):
        raise TwinInputError(f"switches: {switches!r} is not a Switches value")
    before = current()
    _wanted.append(switches)
    _set(switches)
    try:
        yield switches
    finally:
        _wanted.pop()
        _set(before)


def switched(**changes: bool) -> AbstractContextManager[Switches]:
    """``applied`` with the named switches changed from the current ones, e.g. ``switched(multimem_allreduce=True)``
    (an unknown name: one line naming the allowed ones)."""
    unknown = [n for n in changes if n not in NAMES]
    if unknown:
        raise TwinInputError(f"switches: unknown switch {unknown[0]!r}; allowed: {', '.join(NAMES)}")
    return applied(dataclasses.replace(current(), **changes))


def report_args(switches: Switches | None = None) -> dict[str, dict[str, bool]]:
    """What a report's ``args`` records of ``switches`` (default: the current ones): {} at the embedded state (a
    report as before round 23), else {``REPORT_KEY``: the changed switches}."""
    changed = (current() if switches is None else switches).changed()
    return {REPORT_KEY: changed} if changed else {}


def _run(job: tuple[Callable, Switches, tuple, object]) -> object:
    fn, switches, patches, payload = job
    with applied(switches), carried_patches.reapplied(patches):
        return fn(payload)


def map_jobs(fn: Callable, jobs: Sequence, workers: int = 1, switches: Switches | None = None,
             mp_context=None) -> Iterator:
    """``fn(job)`` for each of ``jobs``, in order, with ``switches`` (default: this process's at the call) and this
    process's carried patches (``twin.fitting.carried_patches``) set around each: in this process, or in
    ``workers`` processes (``mp_context``: their start method, default the platform's) where there are more than
    one and more than one job."""
    switches = current() if switches is None else switches
    if not isinstance(switches, Switches):
        raise TwinInputError(f"switches: {switches!r} is not a Switches value")
    return _mapped(fn, list(jobs), workers, switches, carried_patches.current(), mp_context)


def _mapped(fn: Callable, jobs: list, workers: int, switches: Switches, patches: tuple, mp_context) -> Iterator:
    if workers > 1 and len(jobs) > 1:
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp_context)
        try:
            yield from pool.map(_run, [(fn, switches, patches, job) for job in jobs])
        finally:
            pool.shutdown()
    else:
        for job in jobs:
            yield _run((fn, switches, patches, job))
