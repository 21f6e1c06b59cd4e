"""benchmarks/gptoss_b200_ttft_structure.py: the exact helpers of round 17's reading of gpt-oss's B200 TTFT (the
TP split ``a + b / TP``, the per-token line through two prompt lengths, the ordering breaks, the error cell), on
hand-made numbers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmark_module import load_benchmark
from twin.errors import TwinInputError

ROOT = Path(__file__).resolve().parents[1]


def test_tp_split_recovers_a_and_b_exactly():
    s = load_benchmark("gptoss_b200_ttft_structure")
    a, b = s.tp_split([(tp, 20.0 + 24.0 / tp) for tp in (1, 2, 4, 8)])
    assert a == pytest.approx(20.0, abs=1e-9) and b == pytest.approx(24.0, abs=1e-9)
    a, b = s.tp_split([(1, 10.0), (2, 10.0)])                 # nothing TP divides
    assert a == pytest.approx(10.0) and b == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(TwinInputError, match="distinct TP sizes"):
        s.tp_split([(2, 10.0), (2, 11.0)])
    with pytest.raises(TwinInputError, match="distinct TP sizes"):
        s.tp_split([(0, 10.0), (2, 11.0)])


def test_per_token_line_through_two_prompt_lengths():
    s = load_benchmark("gptoss_b200_ttft_structure")
    intercept, slope = s.per_token(20.0 + 0.004 * 922, 20.0 + 0.004 * 7372, 922, 7372)
    assert intercept == pytest.approx(20.0) and slope == pytest.approx(0.004)
    with pytest.raises(TwinInputError, match="must exceed"):
        s.per_token(1.0, 2.0, 100, 100)


def test_violations_flag_both_orderings_beyond_the_noise_only():
    s = load_benchmark("gptoss_b200_ttft_structure")
    rows = [("1k/8k", 32, 2, 82.6), ("1k/8k", 64, 2, 63.8), ("1k/8k", 64, 4, 95.1), ("1k/8k", 32, 4, 80.0),
            ("1k/1k", 32, 2, 50.0)]
    bad = s.violations(rows, 0.15)
    assert (rows[0], rows[1], "larger CONC faster") in bad            # 63.8 x 1.15 < 82.6
    assert (rows[1], rows[2], "larger TP slower") in bad              # 95.1 > 63.8 x 1.15
    assert not any(p[0][0] != p[1][0] for p in bad)                   # never across shapes
    assert (rows[0], rows[3], "larger TP slower") not in bad          # 80.0 < 82.6: in order
    assert len(bad) == 2
    assert len(s.violations(rows, 0.6)) == 0                          # within a wide noise band
    with pytest.raises(TwinInputError, match="must be a finite number >= 0"):
        s.violations(rows, -0.1)


def test_median_cell():
    s = load_benchmark("gptoss_b200_ttft_structure")
    assert s.median_cell([-0.1, 0.2, -0.3]) == "20.0 (-10.0)"
    assert s.median_cell([]) == "-"


@pytest.mark.parametrize("argv, message", [
    (["--loaded", "--noise", "-1"], "--noise -1.0: must be a finite number >= 0"),
    (["--loaded", "--noise", "nan"], "--noise nan: must be a finite number >= 0"),
    (["--loaded", "--noise", "inf"], "--noise inf: must be a finite number >= 0"),
    (["--noise", "0.1"], "--noise applies to --loaded only")])
def test_bad_noise_fails_in_one_line(argv, message):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gptoss_b200_ttft_structure.py"), *argv],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {message}"
