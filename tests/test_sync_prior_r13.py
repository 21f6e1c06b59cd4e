"""Round 13's sync-server pieces (issue 33): the held-out Qwen3 fold's term-by-term variants
(``benchmarks/qwen3_sync_terms.py``) and the vLLM engine-core timing script's guards
(``benchmarks/sync_engine_host.py``)."""

from __future__ import annotations

import sys

import pytest
from benchmark_module import load_benchmark

from twin.errors import TwinInputError
from twin.fitting.held_priors import SYNC_KEY

FOLD = {"per_seq_overhead_s": 12.6e-6, SYNC_KEY: 33.79e-6, "memory_efficiency": 0.969, "step_overhead_s": 1.885e-3,
        "allreduce_latency_s": 24.0e-6, "layer_token_overhead_s": 1e-16}
EMBEDDED = {"per_seq_overhead_s": 18.7e-6, SYNC_KEY: 63.7e-6, "memory_efficiency": 0.978, "step_overhead_s": 1.74e-3,
            "allreduce_latency_s": 24.7e-6, "layer_token_overhead_s": 0.0}


def test_the_variants_change_one_part_of_the_fold_at_a_time():
    v = load_benchmark("qwen3_sync_terms").variants(FOLD, EMBEDDED, 18.19e-6, sync_loop_s=11e-6)
    assert v["fold"] == FOLD and v["defaults"] == EMBEDDED
    assert v["defaults, sync at the fold's"] == EMBEDDED | {SYNC_KEY: 33.79e-6}
    assert v["fold, sync at the embedded 63.7 us"][SYNC_KEY] == 63.7e-6
    # the async part at the embedded 18.7 us: +6.1 us, everything else the fold's
    assert v["fold, async part at the embedded 18.7 us"] == FOLD | {SYNC_KEY: pytest.approx(39.89e-6, rel=1e-12)}
    assert v["fold, no sort sampler"][SYNC_KEY] == pytest.approx(15.6e-6, rel=1e-12)
    # the report's loop part is what the value holds beyond the async part and the sampler (3 us in round 12)
    assert v["fold, no sync loop"][SYNC_KEY] == pytest.approx(12.6e-6 + 18.19e-6, rel=1e-12)
    assert v["fold, sync loop at 11 us"][SYNC_KEY] == pytest.approx(12.6e-6 + 18.19e-6 + 11e-6, rel=1e-12)
    for n in ("memory_efficiency", "step_overhead_s", "allreduce_latency_s", "layer_token_overhead_s"):
        assert v[f"fold, {n} embedded"] == FOLD | {n: EMBEDDED[n]}
    assert not any("sync loop at" in k for k in load_benchmark("qwen3_sync_terms").variants(FOLD, EMBEDDED, 0.0))


def test_the_engine_timing_needs_vllm_and_an_ordered_batch_pair(monkeypatch):
    mod = load_benchmark("sync_engine_host")
    monkeypatch.setitem(sys.modules, "vllm", None)          # not importable
    with pytest.raises(TwinInputError, match="vllm: not importable"):
        mod._vllm()
    monkeypatch.setattr(sys, "argv", ["sync_engine_host.py", "--small", "64", "--large", "32"])
    with pytest.raises(TwinInputError, match="--small 64 / --large 32"):
        mod.main()
