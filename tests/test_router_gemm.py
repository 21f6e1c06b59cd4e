"""Issue 33, round 6: MiniMax-M2's FP32 router GEMM (twin.cost.router_gemm), its server knob
(``server.float32_matmul_precision``) and the MiniMax silicon rows' launch flag."""

from __future__ import annotations

from dataclasses import replace

import pytest
from core_helpers import step_shape as step

from twin.cost.roofline import RooflineCostModel
from twin.cost.router_gemm import fp32_gemm_rate, router_fp32_token_s
from twin.errors import TwinInputError
from twin.hardware.catalog import resolve_gpu, resolve_model
from twin.scenario import ScenarioBody
from twin.sim.deployment import resolve_deployment

# MiniMax-M2.5: 62 MoE layers, hidden 3072, 256 experts: 2 x 62 x 3072 x 256 FLOPs per token
MINIMAX_ROUTER_FLOPS = 97_517_568


def test_router_flops_and_rates_by_precision():
    mm, b200, h100 = resolve_model("minimax-m2.5"), resolve_gpu("B200"), resolve_gpu("H100-SXM")
    assert mm.router_fp32 and 2 * mm.moe_layers * mm.hidden_size * mm.num_experts == MINIMAX_ROUTER_FLOPS
    # the datasheets' FP32 (CUDA cores) and bf16 tensor rates; TF32 at half the bf16 rate
    assert fp32_gemm_rate(b200, "highest") == 75.0e12 and fp32_gemm_rate(h100, "highest") == 67.0e12
    assert fp32_gemm_rate(b200, "high") == 1125.0e12 and fp32_gemm_rate(b200, "medium") == 2250.0e12
    # 97,517,568 / (75e12 x 0.6) = 2.16706 us per token on B200; 97,517,568 / (67e12 x 0.6) = 2.42581 us on H100
    assert router_fp32_token_s(mm, b200, "highest", 0.6) == pytest.approx(2.1670571e-6, rel=1e-7)
    assert router_fp32_token_s(mm, b200, None, 0.6) == router_fp32_token_s(mm, b200, "highest", 0.6)
    assert router_fp32_token_s(mm, h100, None, 0.6) == pytest.approx(2.4258102e-6, rel=1e-7)
    assert router_fp32_token_s(mm, b200, "high", 0.6) == pytest.approx(0.14447047e-6, rel=1e-7)
    assert router_fp32_token_s(mm, b200, "medium", 0.5) == pytest.approx(MINIMAX_ROUTER_FLOPS / 1125.0e12, rel=1e-12)


def test_only_an_fp32_router_costs():
    b200 = resolve_gpu("B200")
    assert router_fp32_token_s(resolve_model("mixtral-8x7b"), b200, None, 0.6) == 0.0        # bf16 gate
    assert router_fp32_token_s(resolve_model("qwen3-235b-a22b-fp8"), b200, None, 0.6) == 0.0
    with pytest.raises(TwinInputError, match="float32_matmul_precision: 'low'"):
        router_fp32_token_s(resolve_model("mixtral-8x7b"), b200, "low", 0.6)
    # a GPU without an FP32 rate: no cost to price for a bf16 router, a one-line error for an FP32 one
    no_fp32 = b200.model_copy(update={"peak_flops": {"bf16": 2250.0e12, "fp8": 4500.0e12}})
    assert router_fp32_token_s(resolve_model("mixtral-8x7b"), no_fp32, None, 0.6) == 0.0
    with pytest.raises(TwinInputError, match="no rate for fp32"):
        router_fp32_token_s(resolve_model("minimax-m2.5"), no_fp32, None, 0.6)


def test_roofline_adds_the_router_per_token_on_every_rank_and_explains_it():
    mm = resolve_model("minimax-m2.5")
    plain = replace(mm, router_fp32=False)
    s = step([920, 1, 1], [0, 500, 700])          # a 920-token prompt beside two decodes: 922 tokens
    for tp in (2, 4):                              # TP does not split a replicated layer
        with_router = RooflineCostModel(mm, "B200", tensor_parallel_size=tp, weight_dtype="fp8")
        without = RooflineCostModel(plain, "B200", tensor_parallel_size=tp, weight_dtype="fp8")
        k = MINIMAX_ROUTER_FLOPS / (75.0e12 * with_router.compute_efficiency)
        assert with_router.step_time_s(s) - without.step_time_s(s) == pytest.approx(922 * k, rel=1e-9)
        parts = with_router.explain(s)
        assert parts["router_fp32_s"] == pytest.approx(922 * k, rel=1e-12)
        assert "router_fp32_s" not in without.explain(s)
        assert sum(v for n, v in parts.items() if n != "total_s") == pytest.approx(parts["total_s"], rel=1e-12)
    high = RooflineCostModel(mm, "B200", tensor_parallel_size=2, weight_dtype="fp8", float32_matmul_precision="high")
    assert high.explain(s)["router_fp32_s"] == pytest.approx(922 * MINIMAX_ROUTER_FLOPS / (1125.0e12 * 0.6),
                                                              rel=1e-12)


def _body(precision: str | None) -> ScenarioBody:
    server = {"vllm_version": "0.19"} | ({"float32_matmul_precision": precision} if precision else {})
    return ScenarioBody.model_validate({
        "name": "x", "deployment": {"gpu": "B200", "model": "minimax-m2.5", "tensor_parallel_size": 4},
        "server": server,
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": 1.0}, "num_requests": 1,
                     "classes": [{"name": "x", "share": 1.0, "prompt": {"suffix_tokens": 8}, "output_tokens": 2}]}})


def test_server_knob_reaches_the_cost_model():
    s = step([1000], [0])
    default, high = resolve_deployment(_body(None)), resolve_deployment(_body("high"))
    assert default.float32_matmul_precision is None and high.float32_matmul_precision == "high"
    k_highest = MINIMAX_ROUTER_FLOPS / (75.0e12 * 0.6)
    k_high = MINIMAX_ROUTER_FLOPS / (1125.0e12 * 0.6)
    assert default.cost_model_factory().explain(s)["router_fp32_s"] == pytest.approx(1000 * k_highest, rel=1e-9)
    assert high.cost_model_factory().explain(s)["router_fp32_s"] == pytest.approx(1000 * k_high, rel=1e-9)
    with pytest.raises(Exception, match="float32_matmul_precision"):
        _body("low")


def test_minimax_rows_carry_their_scripts_precision_flag():
    from twin.fitting.silicon import minimax_b200_tf32_router, model_family, row_server
    from twin.fitting.silicon_rows import CSV_NAME, read_silicon, silicon_dir
    path = silicon_dir() / CSV_NAME
    if not path.is_file():
        pytest.skip(f"no silicon ground truth here: {path}")
    seen: dict[tuple[str, bool], set] = {}
    for r in read_silicon(path):
        if model_family(r.model_path) != "minimax":
            continue
        flag = row_server(r).get("float32_matmul_precision")
        assert (flag == "high") == minimax_b200_tf32_router(r)
        seen.setdefault((r.system, (r.measured or "") >= "2026-04-21"), set()).add(flag)
    # 41ed82dc1 / 13962fcfa (2026-04-21): the B200 rows measured 2026-04-22 ran "high"; every other MiniMax row
    # (B200 March / early April, H100) vLLM's default
    assert seen[("b200_sxm", True)] == {"high"} and seen[("b200_sxm", False)] == {None}
    assert seen[("h100_sxm", False)] == {None}
