"""benchmarks/frontend_ceiling.py: the rate-dominance test and the short-fall rule (issue 33, round 14)."""

from __future__ import annotations

import math

import pytest

from tests.benchmark_module import load_benchmark

fc = load_benchmark("frontend_ceiling")


def row(rps: float, tok: float, running: float, conc: float = 512, offered: float = math.inf,
        group: str = "gpt-oss h100 tp2 dp1 ep1 v0.11.2 2025-12 1024x1024", source: str = "silicon") -> object:
    return fc.Load(source, f"r{rps}-{tok}-{running}", group, conc, rps, tok, running, 1000.0, offered)


def test_dominates_needs_both_rates_at_least():
    fast, slow = row(21.1, 19416, 91), row(0.9, 6611, 98)
    assert fc.dominates(fast, slow)
    assert not fc.dominates(slow, fast)
    # more requests/s but fewer tokens/s: neither saturates a front end whenever the other does
    a, b = row(21.5, 19835, 88), row(3.6, 26192, 94)
    assert not fc.dominates(a, b) and not fc.dominates(b, a)
    # equal on both: each dominates the other, a row never itself
    c, d = row(5.0, 100, 10), row(5.0, 100, 10)
    assert fc.dominates(c, d) and fc.dominates(d, c)
    assert not fc.dominates(c, c)


def test_short_closed_and_open_loop():
    assert row(1.0, 10, 91).short(0.9)                 # 91 of 512 at once
    assert not row(1.0, 10, 500).short(0.9)             # 500 of 512
    assert not row(1.0, 10, 461, conc=512).short(0.9)   # 461 >= 460.8
    assert row(1.0, 10, 460, conc=512).short(0.9)
    # an open loop: served rate against offered, whatever its concurrency
    assert not row(19.8, 4921, 111, conc=128, offered=20.0).short(0.9)
    assert row(17.0, 4000, 111, conc=128, offered=20.0).short(0.9)


def test_reading_lists_the_rows_above_each_short_row():
    slow_short = row(0.9, 6611, 98)
    fast_short = row(21.1, 19416, 91)
    fast_full = row(22.8, 21034, 987, conc=1024, group="minimax b200 tp2 dp2 ep4 v0.19.0 2026-04 1024x1024")
    unrelated = row(30.0, 100, 20, conc=32)          # short, but below min_conc: neither short nor full
    res = fc.reading([slow_short, fast_short, fast_full, unrelated], 0.9, 64)
    by_id = {d["row"].id: d for d in res["short"]}
    assert set(by_id) == {slow_short.id, fast_short.id}
    assert [r.id for r in by_id[slow_short.id]["full_above"]] == [fast_full.id]
    assert [r.id for r in by_id[slow_short.id]["short_above"]] == [fast_short.id]
    assert [r.id for r in by_id[fast_short.id]["full_above"]] == [fast_full.id]
    assert by_id[fast_short.id]["short_above"] == []
    assert res["full_max_rps"] == 22.8 and res["full_max_tok"] == 21034


def test_fleet_is_family_gpu_and_month():
    assert row(1, 1, 1).fleet == "gpt-oss h100 2025-12"
    assert row(1, 1, 1, source="inference-perf", group="llama-2-7b").fleet == "inference-perf"


def test_gpt_oss_h100_c512_rows_fall_short_by_a_count_not_a_rate():
    """The ground truth: the nine gpt-oss H100 C = 512 rows all run ~88-98 at once, and the slowest of them
    (1k/8k at TP 2: under 1 request/s) is outrun on both rates by rows of the same fleet that fell short by
    the same count."""
    loads = fc.silicon_loads()
    res = fc.reading(loads, 0.9, 64)
    mine = [d for d in res["short"] if "gpt_oss_120b_h100" in d["row"].id]
    assert len(mine) == 9
    assert all(85 < d["row"].running < 100 for d in mine)
    slowest = min(mine, key=lambda d: d["row"].rps)
    assert slowest["row"].rps < 1.0
    same_fleet = [r for r in slowest["short_above"] if r.fleet == slowest["row"].fleet]
    assert len(same_fleet) >= 5 and max(r.rps for r in same_fleet) > 20
