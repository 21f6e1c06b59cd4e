"""The shape the engine's loops keep (issue 36): one step, one finishing routine, short loops over it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _function_lines(path: str, qualname: str) -> int:
    tree = ast.parse((ROOT / path).read_text())
    scope: ast.AST = tree
    for name in qualname.split("."):
        scope = next(n for n in ast.iter_child_nodes(scope)
                     if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name)
    body = scope.body
    return body[-1].end_lineno - body[0].lineno + 1


def test_the_replica_loop_and_the_calibration_loop_stay_short():
    assert _function_lines("twin/sim/replica.py", "Replica._run") <= 20
    assert _function_lines("calibration/engine_loop.py", "serve_loop") <= 40


def test_one_finishing_routine():
    """Only ``Request.finish_status`` names the two ways a request finishes by itself, and only
    ``SchedulerBase.retire`` assigns it."""
    hits = []
    for package in ("twin", "calibration"):
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text()
            for word in ("FINISHED_STOPPED", "FINISHED_LENGTH_CAPPED", ".finish_status()"):
                if word in text:
                    hits.append((path.relative_to(ROOT).as_posix(), word))
    assert sorted(set(hits)) == [("twin/core/request.py", "FINISHED_LENGTH_CAPPED"),
                                 ("twin/core/request.py", "FINISHED_STOPPED"),
                                 ("twin/core/scheduler_base.py", ".finish_status()")]
