"""Benchmark scripts that read the ground truth fail like the CLI: one line, exit 2, no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from twin.errors import TwinInputError, run_script

ROOT = Path(__file__).resolve().parents[1]


def test_run_script_turns_bad_input_into_one_line_and_exit_2(capsys):
    def main() -> None:
        raise TwinInputError("measurements.csv: no such file")
    with pytest.raises(SystemExit) as exit_:
        run_script(main)
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "error: measurements.csv: no such file\n"


def test_fidelity_report_without_its_ground_truth_says_so_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fidelity_real.py"), "--ground-truth",
                           str(tmp_path), "--defaults-only"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'vllm-silicon-h100-b200' / 'measurements.csv'}: no such file (the silicon "
        "measurements; --ground-truth names their folder)"]
