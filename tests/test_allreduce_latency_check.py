"""benchmarks/allreduce_latency_check.py: the Blackwell all-reduce latency reaches the B200 rows it should and no
others (a TP >= 2 row decodes faster at a lower latency; since round 10 a TP1 row too: twin.cost.unsharded_decode)."""

from __future__ import annotations

import pytest
from benchmark_module import load_benchmark
from twin.fitting.joint import gpu_of
from twin.fitting.silicon import silicon_cases


def _module():
    return load_benchmark("allreduce_latency_check")


def test_latency_reaches_tp2_b200_rows_only():
    try:
        cases = silicon_cases(max_requests=24)[0]
    except Exception as exc:  # noqa: BLE001 - the ground truth lives outside the repository
        pytest.skip(f"no silicon ground truth here: {exc}")
    b200 = [c for c in cases if gpu_of(c) == "B200"]
    tp1 = next((c for c in b200 if c.target.tensor_parallel_size == 1 and c.row.concurrency <= 8), None)
    # a server without the all-reduce + RMSNorm fusion (a fused one's layers take fused_allreduce_latency_s)
    tp2 = next((c for c in b200 if c.target.tensor_parallel_size == 2 and c.row.concurrency <= 8
                and not c.run.server.get("fuse_allreduce_rms")), None)
    h100 = next((c for c in cases if gpu_of(c) == "H100-SXM" and c.target.tensor_parallel_size >= 2
                 and c.row.concurrency <= 8), None)
    if tp1 is None or tp2 is None or h100 is None:
        pytest.skip("no low-concurrency B200 TP1/TP2 or H100 TP>=2 row in the ground truth")
    errs = _module().scan([tp1, tp2, h100], [24.7, 10.2])
    hi, lo = errs[24.7], errs[10.2]
    # TP1: no all-reduce, but the per-layer floor the latency carries at TP > 1 (twin.cost.unsharded_decode)
    assert lo[0]["mean_tpot_ms"] < hi[0]["mean_tpot_ms"]
    assert hi[2] == lo[2]                                          # H100: the scoped term does not reach it
    assert lo[1]["mean_tpot_ms"] < hi[1]["mean_tpot_ms"]           # TP2 B200: faster decode
