"""Writes a ``fidelity_real.py`` held-out report as it grows: after each finished fold a partial report, at the end
the whole one, each file replaced atomically so that an interrupted run (a timeout, a machine reclaimed, a kill at
any moment) leaves the folds it finished in a readable file, never a broken one.

Issue 33, round 22 (33zB). Two top-level keys are new in the ``--json`` report (docs/result-formats.md):

- ``complete``: false in a partial report, true in the final one (a report made before round 22 has no such key and
  is whole);
- ``folds_done``: {fold kind: [held-out group, ...]} in the order they finished.

A partial report holds ``args``, ``names`` and, per fold kind begun, ``folds[kind]["folds"]`` (each finished fold's
document, as in the final report); a kind's ``pooled`` / ``pooled_default``, ``moe_vs_dense``, ``intervals`` and
``markdown`` come when the kind or the run ends. Its ``--markdown`` file is the finished folds' rows under a line
saying it is partial. The final report is today's content plus the two keys, appended last.

A kill between the temporary file's write and its rename leaves the previous version in place and the temporary
file ``NAME.HOST-PID.tmp`` beside it (round 23: visible, named for the machine and process that wrote it; removed on
any error the writer sees, and by the next write to ``NAME`` from this machine once that process is gone)."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import socket
from pathlib import Path

from twin.fitting.targets import markdown

COMPLETE_KEY = "complete"
FOLDS_DONE_KEY = "folds_done"
ROWS_KEY = "parameter_rows"     # a partial report's own: the finished folds' parameter table rows (--resume reads them)


HOST = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname()) or "host"     # in a temporary file's name


def temp_path(path: Path, pid: int | None = None) -> Path:
    """The file ``write_atomic`` writes ``path``'s next version to before the rename: ``NAME.HOST-PID.tmp`` beside
    it (the machine and process writing it)."""
    return path.with_name(f"{path.name}.{HOST}-{os.getpid() if pid is None else pid}.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):     # another user's process, or no such pid: keep it
        return True
    return True


def stale_temps(path: Path) -> list[Path]:
    """``path``'s temporary files left by a process of this machine that is gone (a run killed mid-write): the
    next write removes them. One of a live process or of another machine (a shared folder) is kept: it may be
    mid-write."""
    prefix = f"{path.name}.{HOST}-"
    out = []
    for p in Path(path).parent.glob(glob.escape(path.name) + ".*.tmp"):
        pid = p.name[len(prefix):-len(".tmp")] if p.name.startswith(prefix) else ""
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            out.append(p)
    return sorted(out)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` by a temporary file in the same folder (``temp_path``), flushed to disk,
    then renamed over ``path``: a reader sees the old file or the new one, whole, never part of one. Stale
    temporary files of ``path`` (``stale_temps``) are removed first."""
    path = Path(path)
    tmp = temp_path(path)
    for old in [*stale_temps(path), tmp]:        # this pid's own: a former process's of the same number
        with contextlib.suppress(FileNotFoundError):
            old.unlink()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)    # the umask applies: a plain file's mode
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def report_json(report: dict) -> str:
    """The report as ``fidelity_real.py`` has always written it (indent 1, anything else as its ``str``)."""
    return json.dumps(report, indent=1, default=str)


class ReportWriter:
    """The ``--json`` and ``--markdown`` files of one run (either may be None: not written)."""

    def __init__(self, json_path: Path | None, markdown_path: Path | None) -> None:
        self.json_path, self.markdown_path = json_path, markdown_path
        self.done: dict[str, list[str]] = {}

    def fold_done(self, report: dict, kind: str, fold_docs: list[dict], md_rows: list, param_rows=()) -> None:
        """After the ``kind`` fold ``fold_docs[-1]`` finished: the partial report (``report`` as it stands, with
        the ``kind`` folds finished so far, and ``param_rows``, the finished folds' parameter table rows) and the
        finished folds' markdown rows."""
        self.done.setdefault(kind, []).append(fold_docs[-1]["held_out"])
        folds = dict(report["folds"])
        folds[kind] = {"folds": list(fold_docs)}
        partial = {**report, "folds": folds, COMPLETE_KEY: False, FOLDS_DONE_KEY: self._done(),
                   ROWS_KEY: [list(row) for row in param_rows]}
        self._write(partial, self.partial_markdown(md_rows))

    def final(self, report: dict, text: str | None) -> None:
        """The whole report (``report`` plus ``complete: true`` and ``folds_done``) and ``text`` as the markdown
        (None: no markdown file, as ``--defaults-only`` writes none)."""
        self._write({**report, COMPLETE_KEY: True, FOLDS_DONE_KEY: self._done()}, text)

    def partial_markdown(self, md_rows: list) -> str:
        done = "; ".join(f"{kind}: {', '.join(groups)}" for kind, groups in self.done.items())
        return (f"PARTIAL report (fidelity_real.py has not finished; folds done: {done}): the finished folds' "
                "held-out medians; no pooled cells, verdicts or intervals yet\n\n" + markdown(md_rows) + "\n")

    def _done(self) -> dict[str, list[str]]:
        return {kind: list(groups) for kind, groups in self.done.items()}

    def _write(self, report: dict, text: str | None) -> None:
        if self.json_path is not None:
            write_atomic(self.json_path, report_json(report))
        if self.markdown_path is not None and text is not None:
            write_atomic(self.markdown_path, text)
