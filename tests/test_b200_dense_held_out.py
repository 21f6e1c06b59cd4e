"""benchmarks/b200_dense_held_out.py's pure helpers (issue 33, round 20): a row's shape, the two steps read per
row, the parts table and its shares, the terms a dense Blackwell deployment resolves."""

from __future__ import annotations

import pytest

from tests.benchmark_module import load_benchmark
from twin.errors import TwinInputError

dense = load_benchmark("b200_dense_held_out")


def test_row_shape_exact():
    name = "2026_04_06_llama_3_1_70b_b200_sxm_vllm_fp8_agg_8192x1024_c64_tp1_ep1_486"
    assert dense.row_shape(name) == (8192, 1024, 64)
    with pytest.raises(TwinInputError, match="not a silicon row name"):
        dense.row_shape("stage_1_general")


def test_step_shapes_chunk_and_decode_context():
    steps = dense.step_shapes(8192, 1024, 4, 2048)
    assert steps["prompt"].num_new_tokens == [2048] and steps["prompt"].num_computed_before == [0]
    assert steps["decode"].num_new_tokens == [1] * 4
    assert steps["decode"].num_computed_before == [8192 + 512] * 4
    assert steps["decode"].num_spec_tokens == [0] * 4
    assert dense.step_shapes(1024, 8, 1, 8192)["prompt"].num_new_tokens == [1024]
    with pytest.raises(TwinInputError, match="must be >= 1"):
        dense.step_shapes(1024, 0, 1, 8192)


def test_part_rows_values_and_differences():
    ex = {"held": {"a_s": 1.0, "b_s": 3.0, "z_s": 0.0, "total_s": 4.0},
          "other": {"a_s": 1.0, "b_s": 1.0, "total_s": 2.0},
          "ref": {"a_s": 2.0, "total_s": 2.0}}
    rows = dense.part_rows(ex, "held", "ref")
    assert [r[0] for r in rows] == ["a_s", "b_s", "total_s"]          # a part zero everywhere is left out
    assert rows[0][1] == [1.0, 1.0, 2.0] and rows[1][1] == [3.0, 1.0, 0.0]   # a part a set lacks reads 0
    assert [r[2] for r in rows] == [-1.0, 3.0, 2.0]                    # held - ref


def test_resolved_terms_scope_and_fallback():
    from types import SimpleNamespace
    from twin.fitting.provenance import embedded_start
    from twin.hardware.catalog import resolve_gpu, resolve_model
    dep = SimpleNamespace(gpu=resolve_gpu("B200"), model=resolve_model("llama-3.1-70b"), weight_formats=None,
                          kv_pool=SimpleNamespace(weight_dtype="fp8", kv_dtype="fp8"),
                          scheduler_config=SimpleNamespace(async_scheduling=True))
    fold = {"memory_efficiency": 0.9, "layer_token_overhead_s": 1e-9,
            "layer_token_overhead_s@hopper+experts_mxfp4": 1.5e-7, "eager_layer_host_s@blackwell": 9e-4}
    got = dense.resolved_terms(fold, dep)
    assert got["memory_efficiency"] == 0.9 and got["layer_token_overhead_s"] == 1e-9
    assert got["eager_layer_host_s"] == 9e-4
    assert got["compute_efficiency"] == embedded_start(("compute_efficiency@blackwell",))["compute_efficiency@blackwell"]
    insample = dense.resolved_terms({}, dep)
    assert insample["layer_token_overhead_s"] == embedded_start(("layer_token_overhead_s@blackwell",))[
        "layer_token_overhead_s@blackwell"]
