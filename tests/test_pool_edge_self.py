"""benchmarks/pool_edge_self.py: Little's law on the twin's own pool-edge runs (issue 33, round 15)."""

from __future__ import annotations

import pytest

from tests.benchmark_module import load_benchmark

me = load_benchmark("pool_edge_self")


def test_self_reading_exact():
    # a row read as N = 50 running of 64, holding 5,000 tokens each per rank (dp 1): 250,000 tokens
    rec = {"effective_pool_tokens": 250_000.0, "running": 50.0, "dp": 1}
    # the twin's own run of it: TTFT 1,000 ms, 99 decode steps of 10 ms -> 64 x 990 / 1990 running
    s = me.self_reading(rec, 64, 100.0, 1000.0, 10.0, 200_000)
    n = 64 * 990.0 / 1990.0
    assert s["running"] == pytest.approx(n)
    assert s["self"] == pytest.approx(n * 5000.0 / 200_000)
    # two DP ranks: the running set splits, the tokens per request per rank stay
    rec2 = {"effective_pool_tokens": 125_000.0, "running": 50.0, "dp": 2}
    s2 = me.self_reading(rec2, 64, 100.0, 1000.0, 10.0, 100_000)
    assert s2["self"] == pytest.approx(n / 2 * 5000.0 / 100_000)


def test_parse_server():
    assert me.parse_server(["async_free_after_next_schedule=true", "max_num_seqs=64", "policy=fcfs"]) == {
        "async_free_after_next_schedule": True, "max_num_seqs": 64, "policy": "fcfs"}
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        me.parse_server(["no_equals_sign"])
