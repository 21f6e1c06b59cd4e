"""benchmarks/pool_edge.py's Little's-law reading of a closed loop (issue 33, round 13)."""

from __future__ import annotations

import pytest

from tests.benchmark_module import load_benchmark

edge = load_benchmark("pool_edge")


def test_running_requests_exact():
    # 512 users; each request waits 302,655 ms, then decodes 7,372 tokens at 9.7 ms: (7373 - 1) x 9.7 ms = 71,508 ms
    n = edge.running_requests(512, 302655.0, 9.7, 7373.0)
    assert n == pytest.approx(512 * 71508.4 / (302655.0 + 71508.4))
    assert 97 < n < 98
    # no waiting: every user is decoding
    assert edge.running_requests(64, 0.0, 10.0, 100.0) == 64
    # waiting as long as decoding: half of them
    assert edge.running_requests(64, 990.0, 10.0, 100.0) == pytest.approx(32)
