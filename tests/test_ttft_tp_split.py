"""benchmarks/ttft_tp_split.py: the light-load gap split into a part TP does not divide and one it does (exact)."""

from __future__ import annotations

import csv

import pytest

from tests.benchmark_module import load_benchmark

tp_split = load_benchmark("ttft_tp_split")
FIELDS = ("set", "gpu", "family", "version", "month", "precision", "isl", "conc", "tp", "gap_ms")


def _write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(dict(zip(FIELDS, r)) for r in rows)


def test_a_gap_of_a_plus_c_over_tp_is_split_exactly_and_one_tp_size_is_not_split(tmp_path):
    path = tmp_path / "light.csv"
    rows = [("defaults", "B200", "gpt-oss", "0.15.1", "2026-02", "fp4", 1024, c, tp, 2.0 + 16.0 / tp)
            for tp in (1, 2, 4, 8) for c in (4, 8)]
    rows += [("defaults", "B200", "gpt-oss", "0.15.1", "2026-02", "fp4", 1024, 16, 1, 99.0),   # over --max-conc
             ("other", "B200", "gpt-oss", "0.15.1", "2026-02", "fp4", 1024, 4, 1, 99.0),      # not the defaults
             ("defaults", "B200", "kimi", "0.17.0", "2026-04", "fp4", 1024, 4, 8, 22.0)]
    _write(path, rows)
    groups = tp_split.groups(str(path), max_conc=8)
    gpt = groups[("B200", "gpt-oss", "0.15.1", "2026-02", "fp4", 1024)]
    assert len(gpt) == 8
    a, c = tp_split.split(gpt)
    assert a == pytest.approx(2.0, abs=1e-9) and c == pytest.approx(16.0, abs=1e-9)
    assert tp_split.split(groups[("B200", "kimi", "0.17.0", "2026-04", "fp4", 1024)]) is None
