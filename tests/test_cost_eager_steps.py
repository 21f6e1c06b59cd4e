"""The eager-step floor (twin.cost.eager_steps): vLLM's CUDA-graph capture limits, the host launch floor on
steps no graph covers, its explain() part and parameters, the deployment's knobs and the silicon launch facts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from core_helpers import step_shape as _step

from twin.cost.eager_steps import capture_size_tokens, eager_host_s, graph_limits
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.hardware.catalog import resolve_model
from twin.scenario import ScenarioBody
from twin.sim.deployment import resolve_deployment


def test_capture_size_is_vllms_default_rule_or_the_flag_capped_at_the_budget():
    assert capture_size_tokens(4, 8192) == 8                    # min(2 x 4, 512)
    assert capture_size_tokens(1024, 8192) == 512               # the 512 cap
    assert capture_size_tokens(40, 8192, num_speculative_tokens=3) == 320   # 40 x (1 + 3) x 2
    assert capture_size_tokens(4, 8192, 2048) == 2048            # --max-cudagraph-capture-size
    assert capture_size_tokens(4, 1000, 2048) == 1000            # never above max_num_batched_tokens


def test_graph_limits_by_cudagraph_mode():
    assert graph_limits(None, 512) == (512, 512)
    assert graph_limits("piecewise", 512) == (512, 512)
    assert graph_limits("FULL_DECODE_ONLY", 512) == (512, 0)     # a step with a prompt is never graphed
    assert graph_limits("none", 512) == (0, 0)
    with pytest.raises(TwinInputError, match="cudagraph_mode"):
        graph_limits("sometimes", 512)


def test_host_time_is_per_layer_plus_per_moe_layer():
    llama, kimi = resolve_model("llama-3.1-70b"), resolve_model("kimi-k2.5")
    assert eager_host_s(llama, 1e-3, 5e-3) == pytest.approx(80 * 1e-3)          # dense: no MoE layers
    assert eager_host_s(kimi, 1e-3, 5e-3) == pytest.approx(61 * 1e-3 + kimi.moe_layers * 5e-3)
    assert kimi.moe_layers == 60
    for bad in (-1e-3, math.inf, "x"):
        with pytest.raises(TwinInputError, match="eager_layer_host_s"):
            eager_host_s(llama, bad, 0.0)


def _models(limits=(512, 0), host=1e-3):
    plain = RooflineCostModel("llama-3.1-70b", "B200", 8, "fp8", "fp8", eager_layer_host_s=0.0,
                              eager_moe_layer_host_s=0.0, cudagraph_tokens=limits)
    eager = RooflineCostModel("llama-3.1-70b", "B200", 8, "fp8", "fp8", eager_layer_host_s=host,
                              eager_moe_layer_host_s=0.0, cudagraph_tokens=limits)
    return plain, eager


def test_an_eager_step_takes_the_longer_of_its_gpu_time_and_the_host_time():
    plain, eager = _models()
    prompt = _step([1000, 1, 1, 1], [0, 500, 500, 500])
    assert plain.step_time_s(prompt) < 0.080                      # the GPU time is shorter than 80 x 1 ms
    assert eager.step_time_s(prompt) == 0.080
    parts = eager.explain(prompt)
    assert parts["total_s"] == 0.080
    assert parts["eager_host_floor_s"] == pytest.approx(0.080 - plain.step_time_s(prompt), abs=1e-15)
    assert sum(v for k, v in parts.items() if k != "total_s") == pytest.approx(0.080, abs=1e-15)
    decode = _step([1] * 8, [500] * 8)                           # a graphed pure decode: unchanged
    assert eager.step_time_s(decode) == plain.step_time_s(decode)
    assert "eager_host_floor_s" not in eager.explain(decode)
    long = _step([8000], [0])                                     # GPU time beyond the floor: unchanged
    assert plain.step_time_s(long) > 0.080 and eager.step_time_s(long) == plain.step_time_s(long)


def test_graphed_steps_and_the_priors_leave_step_times_bit_identical():
    _, eager = _models(limits=(512, 2048))
    base = RooflineCostModel("llama-3.1-70b", "B200", 8, "fp8", "fp8")
    prompt = _step([1000, 1, 1, 1], [0, 500, 500, 500])
    assert eager.step_time_s(prompt) == base.step_time_s(prompt)            # 1003 tokens <= 2048: graphed
    prior = RooflineCostModel("llama-3.1-70b", "B200", 8, "fp8", "fp8", eager_layer_host_s=0.0,
                              eager_moe_layer_host_s=0.0, cudagraph_tokens=(0, 0))
    assert prior.step_time_s(prompt) == base.step_time_s(prompt)            # host time 0: no floor
    assert prior.step_time_from_sums.__func__ is RooflineCostModel.step_time_from_sums  # hot path untouched


def test_decodes_above_the_captured_size_are_floored_on_every_path():
    _, eager = _models(limits=(4, 4), host=1e-3)
    times = eager.decode_step_times_s(8, 4000, 3)
    assert times == [0.080] * 3
    assert eager.decode_step_times_s(4, 4000, 2) == [eager.step_time_from_sums(4, 4, 4000 + 4 * i, 0, 4, 0)
                                                     for i in (0, 1)]
    assert all(t < 0.080 for t in eager.decode_step_times_s(4, 4000, 2))
    # the fit's array path agrees with the step-by-step path
    tokens, seqs = np.array([8, 4, 1003]), np.array([8, 4, 4])
    context, pairs = np.array([4000, 4000, 1500]), np.array([4008, 4004, 1500 + 1000 * 1001 / 2 + 3])
    arr = eager.step_times_s(tokens, seqs, seqs, context, pairs)
    assert arr[0] == 0.080 and arr[2] == 0.080 and arr[1] < 0.080


def test_the_embedded_default_is_blackwells_and_hopper_keeps_0():
    b200 = RooflineCostModel("kimi-k2.5", "B200", 8, "nvfp4", "fp8", cudagraph_tokens=(8, 8))
    h100 = RooflineCostModel("kimi-k2.5", "H100-SXM", 8, "fp8", "bf16", cudagraph_tokens=(8, 8))
    assert (b200.eager_layer_host_s, b200.eager_moe_layer_host_s) == (0.84e-3, 1.15e-3)
    assert b200.eager_host_s_per_step == pytest.approx(61 * 0.84e-3 + 60 * 1.15e-3)
    assert (h100.eager_layer_host_s, h100.eager_moe_layer_host_s, h100.eager_host_s_per_step) == (0.0, 0.0, 0.0)


def test_parameters_report_the_floor_only_when_set():
    plain, eager = _models()
    assert "eager_layer_host_s" not in plain.parameters()
    p = eager.parameters()
    assert (p["eager_layer_host_s"], p["eager_moe_layer_host_s"], p["cudagraph_tokens"]) == (1e-3, 0.0, [512, 0])


def _body(server: dict) -> ScenarioBody:
    return ScenarioBody.model_validate({
        "name": "x", "deployment": {"gpu": "B200", "model": "llama-3.1-70b", "tensor_parallel_size": 8},
        "server": server,
        "workload": {"arrivals": {"process": "poisson", "rate_per_s": 1.0}, "num_requests": 1,
                     "classes": [{"name": "x", "share": 1.0, "prompt": {"suffix_tokens": 8}, "output_tokens": 2}]}})


def test_the_deployment_resolves_the_servers_graph_limits():
    assert resolve_deployment(_body({"max_num_seqs": 4})).cudagraph_tokens == (8, 8)
    assert resolve_deployment(_body({})).cudagraph_tokens == (512, 512)          # max_num_seqs 1024: the cap
    dep = resolve_deployment(_body({"max_num_seqs": 4, "max_cudagraph_capture_size": 2048,
                                    "cudagraph_mode": "full_decode_only"}))
    assert dep.cudagraph_tokens == (2048, 0)
    assert dep.cost_model_factory().cudagraph_tokens == (2048, 0)
    for bad in ({"max_cudagraph_capture_size": 0}, {"cudagraph_mode": "sometimes"}):
        with pytest.raises(Exception, match="max_cudagraph_capture_size|cudagraph_mode"):
            _body(bad)


def test_silicon_rows_carry_their_scripts_cuda_graph_facts():
    from twin.fitting.replay import deployment_for
    from twin.fitting.silicon import silicon_cases
    from twin.fitting.silicon_rows import CSV_NAME, silicon_dir
    if not (silicon_dir() / CSV_NAME).exists():
        pytest.skip("no silicon ground truth here")
    seen = {}
    for c in silicon_cases()[0]:
        r = c.row
        key = (r.model_path.split("/")[1][:4], r.system, r.month, r.concurrency)
        if key in (("Llam", "b200_sxm", "2025-10", 4), ("Kimi", "b200_sxm", "2026-03", 4),
                   ("Kimi", "b200_sxm", "2026-04", 4), ("Mini", "b200_sxm", "2026-03", 4)):
            seen[key[0] + key[2]] = deployment_for(c.run, c.target).cudagraph_tokens
    # Llama B200: FULL_DECODE_ONLY (decode graphs to min(2 x 512, 512)); Kimi March: --max-num-seqs CONC, so
    # 2 x CONC; Kimi NVFP4 April: --max-cudagraph-capture-size 2048; MiniMax March: vLLM's 512
    assert seen == {"Llam2025-10": (512, 0), "Kimi2026-03": (8, 8), "Kimi2026-04": (2048, 2048),
                    "Mini2026-03": (512, 512)}


def test_the_intercept_script_prints_the_one_over_conc_test(capsys):
    from benchmark_module import load_benchmark
    script = load_benchmark("ttft_intercept")
    rows = [{"family": "llama", "gpu": "B200", "month": "2025-10", "version": "0.10.2", "isl": 1024, "conc": c,
             "gap_ms": g} for c, g in ((4, 40.0), (8, 20.0), (16, 40.0))]
    script.section_b(rows)
    out = capsys.readouterr().out
    assert "C4:    +40  C8:    +20  C16:    +40" in out and "ratio to C4: +0.50  +1.00" in out
