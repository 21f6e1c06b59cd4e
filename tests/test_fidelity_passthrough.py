"""The reading scripts' hand-over to fidelity_real.py (benchmarks/fidelity_passthrough.py): the split at ``--`` and
that each script that runs the folds in its own process reaches fidelity_real's own options."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.fidelity_passthrough import split_at_dashes

ROOT = Path(__file__).resolve().parents[1]


def test_split_at_dashes():
    assert split_at_dashes(["--count", "--", "--folds", "GPU"]) == (["--count"], ["--folds", "GPU"])
    assert split_at_dashes(["--count"]) == (["--count"], [])
    assert split_at_dashes(["--", "--x", "--", "y"]) == ([], ["--x", "--", "y"])     # the first -- only
    assert split_at_dashes([]) == ([], [])


@pytest.mark.parametrize("script, own", [
    ("kimi_int4_floor.py", ()), ("eager_family_floor.py", ()), ("kimi_eager_mla_count.py", ()),
    ("minimax_fp8_chain.py", ("heldout",)), ("nvfp4_decode_rows.py", ("heldout",)),
    ("dense_stream_occupancy.py", ("heldout",)), ("eager_structure_trial.py", ("--structure", "max")),
])
def test_scripts_hand_over_to_fidelity_real(script, own):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *own, "--", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert "usage: fidelity_real.py" in out.stdout and "Traceback" not in out.stderr
