"""benchmarks/gptoss_decode_gap.py and gptoss_loaded_rows.py: the pure helpers of round 12's reading of gpt-oss's
loaded B200 rows (the experts a step touches under a narrower routing, the least-squares split of a decode gap,
the error summary), on hand-made numbers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmark_module import load_benchmark
from twin.hardware.moe import touched_fraction

ROOT = Path(__file__).resolve().parents[1]


def test_touched_share_is_the_uniform_rule_at_share_one_and_saturates_at_the_share():
    g = load_benchmark("gptoss_decode_gap")
    for tokens in (1, 4, 64, 512):
        assert g.touched_share(128, 4, tokens, 1.0) == pytest.approx(touched_fraction(128, 4, tokens), rel=1e-12)
    assert g.touched_share(128, 4, 1, 0.5) == pytest.approx(4 / 128)          # one token: its top-k, whatever S
    assert g.touched_share(128, 4, 10_000, 0.75) == pytest.approx(0.75)       # a large batch: all of the active set
    assert g.touched_share(128, 4, 64, 0.75) == pytest.approx(96 * (1 - (1 - 4 / 96) ** 64) / 128)
    assert g.touched_share(128, 4, 64, 0.01) == pytest.approx(4 / 128)        # the active set is at least top-k
    assert g.touched_share(128, 4, 0, 0.75) == 0.0


def test_split_gap_recovers_the_part_the_gap_is_made_of():
    g = load_benchmark("gptoss_decode_gap")
    experts = [1.0, 2.0, 4.0, 8.0, 3.0]
    per_seq = [0.5, 0.1, 1.0, 0.2, 2.0]
    gap = [0.25 * e for e in experts]                   # a quarter of the expert stream, nothing per sequence
    fits = g.split_gap(gap, experts, per_seq)
    assert fits["experts"][0] == pytest.approx([0.25]) and fits["experts"][1] == pytest.approx(0.0, abs=1e-12)
    assert fits["both"][0] == pytest.approx([0.25, 0.0], abs=1e-12)
    assert fits["per-seq"][1] > 0.1                     # the wrong part leaves a residual


def test_implied_per_seq_and_active_share_on_one_row():
    g = load_benchmark("gptoss_decode_gap")
    d = {"twin_s": 10e-3, "meas_s": 8e-3, "per_seq_s": 2e-3, "conc": 100, "all_experts_s": 4e-3,
         "num_experts": 128, "top_k": 4}
    assert g.implied_per_seq_s(d) == pytest.approx((8e-3 - 8e-3) / 100, abs=1e-15)
    assert g.with_active_share(d, 1.0) == pytest.approx(10e-3)
    drop = 4e-3 * (touched_fraction(128, 4, 100) - g.touched_share(128, 4, 100, 0.5))
    assert g.with_active_share(d, 0.5) == pytest.approx(10e-3 - drop)


def test_loaded_rows_summary_by_band_and_prompt():
    g = load_benchmark("gptoss_loaded_rows")
    rows = [SimpleNamespace(concurrency=c, isl=i, tpot_ms=10.0, ttft_ms=100.0)
            for c, i in ((4, 1024), (64, 1024), (128, 8192))]
    cases = [SimpleNamespace(row=r) for r in rows]
    replayed = [SimpleNamespace(metrics={"mean_tpot_ms": t, "mean_ttft_ms": f})
                for t, f in ((10.0, 90.0), (12.0, 100.0), (13.0, 130.0))]
    s = g.summary(cases, replayed)
    assert s["TPOT C<=16"] == "0.0% (+0.0%)" and s["TPOT C>=32"] == "25.0% (+25.0%)"
    assert s["TTFT ISL 8k"] == "30.0% (+30.0%)" and s["TTFT ISL 1k"] == "5.0% (-5.0%)"
    assert s["TPOT all"] == "20.0% (+20.0%)"


@pytest.mark.parametrize("script, args, message", [
    ("gptoss_decode_gap.py", ["--active-share", "1.5"], "error: --active-share = 1.5: must be in (0, 1]"),
    ("gptoss_loaded_rows.py", ["--variants", "nope"], "error: --variants: nope unknown; allowed: "),
    ("gptoss_loaded_rows.py", ["--every", "0"], "error: --every = 0: must be >= 1"),
])
def test_bad_arguments_fail_in_one_line(script, args, message):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(message) and len(done.stderr.strip().splitlines()) == 1
