"""benchmarks/moe_kernel_path_check.py: its variant syntax and the fusion switch it applies to a case."""

from __future__ import annotations

import pytest
from benchmark_module import load_benchmark


def _module():
    return load_benchmark("moe_kernel_path_check")


def test_variants_parse_to_parameters_and_the_fusion_switch():
    m = _module()
    assert m.parse_variant("base:nofusion=1") == ("base", {}, True)
    assert m.parse_variant("fused:") == ("fused", {}, False)
    assert m.parse_variant("x:moe_layer_overhead_s@experts_fp8=4e-05,layer_overhead_s@blackwell=2e-05") == \
        ("x", {"moe_layer_overhead_s@experts_fp8": 4e-05, "layer_overhead_s@blackwell": 2e-05}, False)


def test_without_fusion_turns_a_fused_rows_flag_off_and_keeps_the_rest():
    from twin.fitting.silicon import silicon_cases
    try:
        cases = silicon_cases(max_requests=24)[0]
    except Exception as exc:  # noqa: BLE001 - the ground truth lives outside the repository
        pytest.skip(f"no silicon ground truth here: {exc}")
    fused = next(c for c in cases if c.run.server.get("fuse_allreduce_rms"))
    off = _module().without_fusion(fused)
    assert off.run.server == fused.run.server | {"fuse_allreduce_rms": False}
    assert off.target == fused.target and off.row == fused.row and fused.run.server["fuse_allreduce_rms"] is True
