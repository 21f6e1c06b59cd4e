"""``fidelity_real.py --resume FILE``: finish the run an interrupted one began, from the partial report it left
(``benchmarks/report_writer.py``: ``complete: false``, ``folds_done``), and write the report one uninterrupted run
would have written.

Issue 33, round 23 (33zD). The partial report must come from a run of the same options (its ``args``, but
``--workers``, which no result depends on; the harness's switches are among them: ``args.switches``,
``twin.fitting.switches``) fitting the same parameters (``names``), else one line names the first that differs. Each
fold it finished is taken as it stands: its document (``folds[kind]["folds"]``) and its rows of the parameter table
(``parameter_rows``, a partial report's own key); the others are run. The pooled cells, MoE vs dense, verdicts and
intervals are computed from every fold's per-case errors as one run computes them (``joint.summarize_errors`` of the
same errors: the same numbers; JSON keeps a float exactly). Only the markdown's elapsed seconds differ (this run's).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.fold_report import finite_number, load_report
from benchmarks.report_writer import COMPLETE_KEY, FOLDS_DONE_KEY, ROWS_KEY, report_json
from twin.errors import TwinInputError
from twin.fitting.joint import METRICS

FREE_ARGS = ("workers", "json", "markdown")      # options a resumed run may change: no result depends on them


def _shown(args: dict, key: str) -> str:
    return repr(args[key]) if key in args else "nothing"


def check_args(source: str, theirs: object, ours: dict, names: Sequence[str], their_names: object) -> None:
    """One line naming the first option (``args`` key) that differs between the partial report and this run (its
    ``args`` as the report writes them, ``ours``), or the fitted parameters if they differ."""
    if not isinstance(theirs, dict):
        raise TwinInputError(f"{source}: no args object (the options it was made with)")
    ours = json.loads(report_json(ours))           # as the report holds them (paths as text)
    for key in [*ours, *(k for k in theirs if k not in ours)]:
        if key not in FREE_ARGS and ((key in ours) != (key in theirs) or ours.get(key) != theirs.get(key)):
            raise TwinInputError(f"--resume {source}: made with {key} = {_shown(theirs, key)}, this run "
                                 f"{_shown(ours, key)} (resume with the options of the run it finishes; only "
                                 f"{', '.join('--' + k for k in FREE_ARGS)} may differ)")
    if their_names != list(names):
        raise TwinInputError(f"--resume {source}: made fitting {their_names!r}, this run {list(names)!r} (the "
                             "script's fitted terms changed: rerun without --resume)")


def _summary(source: str, where: str, value: object) -> dict:
    """A fold's ``summary`` as the report writes it: per metric ``n`` and ``abs`` / ``signed`` (numbers or null)."""
    ok = isinstance(value, dict) and all(
        isinstance(value.get(key), dict) and isinstance(value[key].get("n"), int)
        and all(finite_number(value[key].get(s)) or value[key].get(s) is None for s in ("abs", "signed"))
        for key, _ in METRICS)
    if not ok:
        raise TwinInputError(f"{source}: {where}: summary is not the per-metric n / abs / signed object a fold writes")
    return value


class Resumed:
    """The folds a partial report finished, by (kind, held-out group): (document, parameter rows)."""

    def __init__(self, source: str = "", done: dict | None = None) -> None:
        self.source, self.done = source, done or {}

    def fold(self, kind: str, group: str, cases: Sequence, group_of: Callable) -> tuple | None:
        """(the held-out cases, their errors, the fold's document, its parameter rows) of a finished fold; None
        for a fold to run."""
        if (kind, group) not in self.done:
            return None
        doc, rows = self.done[kind, group]
        held = [c for c in cases if group_of(c) == group]
        return held, [doc["errors"][c.run.name] for c in held], doc, rows


def load_resumed(path: Path, ours: dict, names: Sequence[str], planned: dict[str, list[str]], cases: Sequence,
                 folds: dict[str, Callable]) -> Resumed:
    """The finished folds of the partial report ``path`` for this run (``ours``: its ``args`` as the report writes
    them; ``names``: the parameters it fits; ``planned``: {fold kind: held-out groups it runs}; ``folds``: each
    kind's grouping of ``cases``); else one line naming the file and what differs."""
    rep = load_report(path, partial_ok=True)
    data, source = rep.data, str(path)
    if data.get(COMPLETE_KEY) is not False:
        raise TwinInputError(f"--resume {source}: a complete report, nothing to resume (rerun without --resume to "
                             "make it again)")
    check_args(source, data.get("args"), ours, names, data.get("names"))
    done_by_kind, rows = data.get(FOLDS_DONE_KEY), data.get(ROWS_KEY)
    if not isinstance(done_by_kind, dict) or not isinstance(rows, list) or not all(
            isinstance(r, list) and len(r) == 6 and all(isinstance(x, str) for x in r) for r in rows):
        raise TwinInputError(f"{source}: no {FOLDS_DONE_KEY} object or {ROWS_KEY} list of 6 strings each (a partial "
                             "report fidelity_real.py wrote before --resume existed cannot be resumed: rerun it)")
    done: dict[tuple[str, str], tuple[dict, list]] = {}
    for kind, groups in done_by_kind.items():
        if not isinstance(groups, list):
            raise TwinInputError(f"{source}: {FOLDS_DONE_KEY}[{kind!r}] is not a list of held-out groups")
        for group in groups:
            if group not in planned.get(kind, []) or (kind, group) in done:
                raise TwinInputError(f"{source}: {FOLDS_DONE_KEY} has {kind} {group!r}, which this run does not "
                                     "hold out (once)")
            doc = rep.fold(kind, group)
            where = f"the {kind} fold holding {group!r} out"
            errs = rep.errors(doc)
            held = {c.run.name for c in cases if folds[kind](c) == group}
            if set(errs) != held or not isinstance(doc.get("plan"), list):
                raise TwinInputError(f"{source}: {where} holds other cases out than this run (or has no plan list): "
                                     "made from other ground truth?")
            _summary(source, where, doc.get("summary"))
            done[kind, group] = (doc, [tuple(r) for r in rows if r[:2] == [kind, group]])
    strays = [r for r in rows if (r[0], r[1]) not in done]
    if strays:
        raise TwinInputError(f"{source}: {ROWS_KEY} has a row of {strays[0][0]} {strays[0][1]!r}, not a finished fold")
    return Resumed(source, done)
