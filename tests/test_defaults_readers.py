"""The scripts that read a ``fidelity_real.py --defaults-only --json`` file (or request_path_readings.py --save's)
read it through ``fold_report.defaults_cases``: a missing file, a directory, non-UTF-8 bytes, invalid JSON or a
wrong-shaped file is one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmark_module import BENCHMARKS, load_benchmark
from twin.errors import TwinInputError, run_script

# (label, script, its arguments around the file under test, whether it asks server rows for attributes)
READERS = [
    ("bias_slices", "bias_slices", lambda p: [p], True),
    ("decode_slices", "decode_slices", lambda p: [p], True),
    ("eager_floor_by_generation", "eager_floor_by_generation", lambda p: [p], False),
    ("expert_request_reading", "expert_request_reading", lambda p: [p], True),
    ("hopper_rows slices", "hopper_rows", lambda p: ["slices", p, p], True),
    ("kimi_request_reading", "kimi_request_reading", lambda p: [p], True),
    ("kimi_request_reading --loaded", "kimi_request_reading", lambda p: ["{light}", "--loaded", p], True),
    ("moe_shape_slices", "moe_shape_slices", lambda p: [p], True),
    ("request_path_readings", "request_path_readings", lambda p: [p], True),
]
# a per-case file that reads cleanly and matches no silicon row (the light-load file --loaded goes with)
LIGHT = {"cases": [{"name": "no-such-row", "source": "silicon", "gpu": "B200", "measured": {}, "predicted": {}}]}
# a server row with every key a script needs of each record, and no row attribute
BARE_ROW = {"name": "a", "source": "silicon", "family": "kimi", "errors": {}, "measured": {}, "predicted": {}}
HOSTILE = [
    ("missing", None, "no such file"),
    ("directory", None, "a directory, not a file"),
    ("non-utf8", b'{"cases": "\xff"}', "not UTF-8 text"),
    ("invalid", b"{", "not valid JSON"),
    ("a list", b"[1]", "a JSON list, not an object"),
    ("no cases", json.dumps({"cases": {}}).encode(), "no list of cases"),
    ("a bare record", json.dumps({"cases": [{"name": "a", "source": "silicon"}]}).encode(), "case 0 ('a'): no "),
    ("a row without attributes", json.dumps({"cases": [BARE_ROW]}).encode(), "(a server row's attribute)"),
]


@functools.cache
def _script(name: str):
    return load_benchmark(name)


def _hostile_path(folder: Path, label: str, content: bytes | None) -> Path:
    """The file under test in ``folder`` (made here): the folder itself, an absent file, or ``content``."""
    folder.mkdir()
    if label == "directory":
        return folder
    path = folder / "d.json"
    if content is not None:
        path.write_bytes(content)
    return path


def _argv(tmp_path: Path, args, path: Path) -> list[str]:
    light = tmp_path / "light.json"
    light.write_text(json.dumps(LIGHT))
    return [a.replace("{light}", str(light)) for a in map(str, args(path))]


@pytest.mark.parametrize("label, content, message", HOSTILE, ids=[h[0] for h in HOSTILE])
@pytest.mark.parametrize("_name, script, args, row_need", READERS, ids=[r[0] for r in READERS])
def test_a_hostile_defaults_file_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, _name, script, args,
                                                        row_need, label, content, message):
    if label == "a row without attributes" and not row_need:
        pytest.skip("this script reads no row attribute of the file (it reads the rows from the ground truth)")
    path = _hostile_path(tmp_path / "in", label, content)
    monkeypatch.setattr(sys, "argv", [script, *_argv(tmp_path, args, path)])
    with pytest.raises(SystemExit) as exit_:
        run_script(_script(script).main)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {path}:"), err
    assert message in err, err


@pytest.mark.parametrize("script", sorted({r[1] for r in READERS}))
def test_each_script_runs_its_main_through_run_script(tmp_path, script):
    """As a program (not only its main): a directory for the file is one line and exit 2, no traceback."""
    args = next(r[2] for r in READERS if r[1] == script)
    done = subprocess.run([sys.executable, str(BENCHMARKS / f"{script}.py"), *_argv(tmp_path, args, tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == f"error: {tmp_path}: a directory, not a file\n"


@pytest.mark.parametrize("args, message", [
    ([], "no args object (make it with fidelity_real.py --defaults-only --json)"),
    ({"silicon_every": 0}, "args.silicon_every is 0, not a whole number >= 1"),
    ({"silicon_every": True}, "args.silicon_every is True, not a whole number >= 1")])
def test_eager_floor_reads_a_checked_silicon_every(tmp_path, args, message):
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"args": args, "cases": [BARE_ROW]}))
    with pytest.raises(TwinInputError) as exc:
        _script("eager_floor_by_generation").silicon_every(path)
    assert str(exc.value) == f"{path}: {message}"
    path.write_text(json.dumps({"args": {}, "cases": [BARE_ROW]}))
    assert _script("eager_floor_by_generation").silicon_every(path) == 3
