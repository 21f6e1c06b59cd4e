"""benchmarks/llama_b200_levers.py's pure helpers (issue 33, round 11): the kernel-bytes bound on the per-token
term and the one-group-at-a-time variants."""

from __future__ import annotations

from tests.benchmark_module import load_benchmark
from twin.cost.default_terms import GENERATION_TERMS

levers = load_benchmark("llama_b200_levers")


def test_replicated_token_bytes_exact():
    # two passes, each: read hidden + residual (2 x 2 B), write residual (2 B), write the FP8 input (1 B) per element
    assert levers.replicated_token_bytes(8192, 2, 1.0) == 2 * 8192 * 7 == 114688
    # NVFP4: half a byte per value plus one 1-byte scale per 16 values
    assert levers.replicated_token_bytes(16, 2, 0.5 + 1 / 16) == 2 * 16 * 6.5625
    # a 16-bit GEMM's input is the activation itself
    assert levers.replicated_token_bytes(4096, 2, 2) == 2 * 4096 * 8


def test_each_leak_variant_changes_only_its_group():
    fold = {"layer_token_overhead_s@blackwell": 1e-9, "eager_layer_host_s@blackwell": 0.0,
            "memory_efficiency@blackwell": 0.9, "step_overhead_s": 2e-3}
    out = levers.variants(fold)
    assert out["fold"] == fold
    changed = {label: {k for k in set(v) | set(fold) if v.get(k) != fold.get(k)} for label, v in out.items()}
    assert changed["token 0.2 us (leak)"] == {levers.TOKEN}
    assert changed["eager 0.84 ms (leak)"] == {levers.EAGER}
    assert changed["bandwidth 0.978 (leak)"] == {levers.BANDWIDTH}
    assert changed["token + eager (leak)"] == {levers.TOKEN, levers.EAGER}
    embedded = GENERATION_TERMS["blackwell"]          # a leak variant sets the embedded (B200-read) value
    assert out["token 0.2 us (leak)"][levers.TOKEN] == embedded["layer_token_overhead_s"]
    assert out["eager 0.84 ms (leak)"][levers.EAGER] == embedded["eager_layer_host_s"]
