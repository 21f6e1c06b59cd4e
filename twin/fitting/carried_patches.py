"""A trial script's table patches carried to every simulation worker (issue 33, round 23).

A trial script changes a cost-model table for one ``fidelity_real.py`` run (``mock.patch.object`` /
``mock.patch.dict`` in its own process). A worker process started by ``fork`` inherits the change; one started by
``spawn`` or ``forkserver`` (Python 3.14's default on Linux) imports the tables afresh, at their embedded values, so
the folds' simulations there never saw the trial: a wrong figure with no error. ``carried(Patch(...), ...)`` makes
the change in this process for a block AND records it; ``twin.fitting.switches.map_jobs`` takes the record when it
is called and has each job apply it in the worker (``reapplied``) where the worker does not already hold it (a
forked worker, or a job run in this process, holds it: nothing is applied twice).

A ``Patch`` names its module and attribute by text and carries a value that pickles (a table, a number, a name): a
patch that cannot travel (a closure, a missing attribute, a dict patch on a non-dict) is a one-line error when the
block opens, never a silent parent-only change. A patch read only above the simulations (fold planning in the
parent, e.g. a term's declared evidence) needs no carrying: keep it a plain ``mock.patch`` in the script.
"""

from __future__ import annotations

import importlib
import pickle
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from unittest import mock

from twin.errors import TwinInputError

KINDS = ("object", "dict")      # object: the attribute replaced; dict: the listed keys of the attribute's dict set
_open: list["Patch"] = []       # the patches this process holds now, in the order they were applied


@dataclass(frozen=True, eq=True)
class Patch:
    """One table change: ``module``'s ``attribute`` replaced by ``value`` (``kind`` "object") or updated with
    ``value``'s keys (``kind`` "dict")."""

    module: str
    attribute: str
    value: object
    kind: str = "object"

    def describe(self) -> str:
        return f"{self.module}.{self.attribute}"


def _checked(p: object) -> Patch:
    if not isinstance(p, Patch):
        raise TwinInputError(f"carried patches: {p!r} is not a Patch")
    if p.kind not in KINDS:
        raise TwinInputError(f"carried patches: {p.describe()}: kind {p.kind!r}; allowed: {', '.join(KINDS)}")
    try:
        module = importlib.import_module(p.module)
    except ImportError as e:
        raise TwinInputError(f"carried patches: {p.describe()}: module {p.module!r} does not import ({e})") from None
    if not hasattr(module, p.attribute):
        raise TwinInputError(f"carried patches: {p.describe()}: module {p.module} has no {p.attribute!r}")
    if p.kind == "dict" and not (isinstance(getattr(module, p.attribute), MutableMapping)
                                 and isinstance(p.value, Mapping)):
        raise TwinInputError(f"carried patches: {p.describe()}: a dict patch needs a dict attribute and a dict value")
    try:
        pickle.dumps(p)
    except Exception as e:      # noqa: BLE001 - any pickling failure means the patch cannot reach a worker
        raise TwinInputError(f"carried patches: {p.describe()}: its value cannot travel to a worker process "
                             f"({type(e).__name__}); carry a table or a number, or keep the patch in this process "
                             "and run with --workers 1") from None
    return p


def _entered(stack: ExitStack, p: Patch) -> None:
    module = importlib.import_module(p.module)
    if p.kind == "dict":
        stack.enter_context(mock.patch.dict(getattr(module, p.attribute), p.value))
    else:
        stack.enter_context(mock.patch.object(module, p.attribute, p.value))


@contextmanager
def _applied(patches: tuple[Patch, ...]) -> Iterator[tuple[Patch, ...]]:
    with ExitStack() as stack:
        depth = len(_open)
        try:
            for p in patches:
                _entered(stack, p)
                _open.append(p)
            yield patches
        finally:
            del _open[depth:]


def carried(*patches: Patch):
    """``patches`` applied in this process for the block and carried to every ``map_jobs`` worker started or fed
    inside it; restored when the block ends (also on error). A bad patch: one line naming it."""
    return _applied(tuple(_checked(p) for p in patches))


def current() -> tuple[Patch, ...]:
    """The carried patches this process holds now (what ``map_jobs`` sends with each job)."""
    return tuple(_open)


def reapplied(patches: tuple[Patch, ...]):
    """In a worker, around one job: the parent's ``patches`` less those this process already holds (all of them in
    a forked worker or in the parent itself; none in a spawned one). A worker holding others: one line."""
    held = current()
    if patches[:len(held)] != held:
        raise TwinInputError("carried patches: this worker holds "
                             f"{', '.join(p.describe() for p in held)}, not the parent's; start its pool afresh")
    return _applied(patches[len(held):])
