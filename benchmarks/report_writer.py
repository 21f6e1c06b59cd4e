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

A kill between the temporary file's write and its rename leaves the previous version in place and a hidden
``.NAME.*.tmp`` beside it (removed on any error the writer sees)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from twin.fitting.targets import markdown

COMPLETE_KEY = "complete"
FOLDS_DONE_KEY = "folds_done"


def _file_mode() -> int:
    """The mode a plain ``open(path, "w")`` gives a new file (0o666 less the umask): mkstemp's own is 0o600."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` by a temporary file in the same folder, flushed to disk, then renamed
    over ``path``: a reader sees the old file or the new one, whole, never part of one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, _file_mode())
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

    def fold_done(self, report: dict, kind: str, fold_docs: list[dict], md_rows: list) -> None:
        """After the ``kind`` fold ``fold_docs[-1]`` finished: the partial report (``report`` as it stands, with
        the ``kind`` folds finished so far) and the finished folds' markdown rows."""
        self.done.setdefault(kind, []).append(fold_docs[-1]["held_out"])
        folds = dict(report["folds"])
        folds[kind] = {"folds": list(fold_docs)}
        partial = {**report, "folds": folds, COMPLETE_KEY: False, FOLDS_DONE_KEY: self._done()}
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
