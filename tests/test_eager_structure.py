"""The eager step's structure (twin.cost.eager_steps, a cost model's ``eager_structure``; issue 33 round 18, a trial,
not embedded): the host time's split, the step times it gives on the step-by-step and array paths, one-line errors,
and the trial / reading scripts' argument checks and the trial's scoped swap of the embedded structure."""

from __future__ import annotations

import numpy as np
import pytest
from core_helpers import step_shape as _step

from twin.cost import eager_steps
from twin.cost.eager_steps import EAGER_STRUCTURES, host_split_s
from twin.cost.factory import build_cost_model
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.hardware.catalog import resolve_model


def test_the_embedded_structure_is_max():
    assert eager_steps.EMBEDDED_STRUCTURE == "max" and EAGER_STRUCTURES == ("max", "additive", "moe_additive")
    assert _kimi().eager_structure == "max" and _kimi(structure="additive").eager_structure == "additive"


def test_each_structure_splits_the_host_time_into_overlapped_and_serial():
    kimi, llama = resolve_model("kimi-k2.5"), resolve_model("llama-3.1-70b")
    assert host_split_s(kimi, 1e-3, 2e-3, "max") == pytest.approx((61e-3 + 120e-3, 0.0))
    assert host_split_s(kimi, 1e-3, 2e-3, "additive") == pytest.approx((0.0, 61e-3 + 120e-3))
    assert host_split_s(kimi, 1e-3, 2e-3, "moe_additive") == pytest.approx((61e-3, 120e-3))
    assert host_split_s(llama, 1e-3, 2e-3, "moe_additive") == pytest.approx((80e-3, 0.0))   # dense: as max
    with pytest.raises(TwinInputError, match="eager_structure = 'sum': allowed"):
        host_split_s(kimi, 1e-3, 2e-3, "sum")
    assert host_split_s(kimi, 1e-3, 2e-3) == host_split_s(kimi, 1e-3, 2e-3, "max")       # None: the embedded one
    with pytest.raises(TwinInputError, match="allowed: max, additive, moe_additive"):
        _kimi(structure="per_layer")
    with pytest.raises(TwinInputError, match="eager_structure: unknown parameter"):      # other kinds: unknown
        build_cost_model("constant", "kimi-k2.5", "B200", params={"step_s": 0.01, "eager_structure": "max"})
    scenario_cost = build_cost_model("roofline", "kimi-k2.5", "B200", 4, ("nvfp4", "fp8"), params={
        "eager_structure": "additive", "cudagraph_tokens": (8, 8), "eager_layer_host_s": 1e-3})
    assert scenario_cost.eager_floor_s == (0.0, pytest.approx(61e-3 + scenario_cost.eager_moe_layer_host_s * 60))


def _kimi(limits=(8, 8), per_layer=1e-3, structure=None):
    return RooflineCostModel("kimi-k2.5", "B200", 4, "nvfp4", "fp8", eager_layer_host_s=per_layer,
                             eager_moe_layer_host_s=1e-3, cudagraph_tokens=limits, eager_structure=structure)


@pytest.mark.parametrize("per_layer", [1e-3, 0.2e-3])
def test_step_times_by_structure_on_both_paths(per_layer):
    prompt = _step([1000, 1, 1], [0, 500, 500])
    gpu = RooflineCostModel("kimi-k2.5", "B200", 4, "nvfp4", "fp8", eager_layer_host_s=0.0,
                            eager_moe_layer_host_s=0.0, cudagraph_tokens=(8, 8)).step_time_s(prompt)
    dense, moe = 61 * per_layer, 60e-3
    assert 61 * 0.2e-3 < gpu < 61e-3                 # 1 ms: the dense launches bind; 0.2 ms: the GPU does
    expected = {"max": max(gpu, dense + moe), "additive": gpu + dense + moe, "moe_additive": max(gpu, dense) + moe}
    tokens, seqs = np.array([1002, 4]), np.array([3, 4])
    context, pairs = np.array([1000, 2000]), np.array([1000 + 1000 * 1001 / 2 + 2, 2004])
    for name, want in expected.items():
        cost = _kimi(per_layer=per_layer, structure=name)
        assert cost.eager_host_s_per_step == pytest.approx(dense + moe)
        assert cost.step_time_s(prompt) == pytest.approx(want, rel=1e-12)
        arr = cost.step_times_s(tokens, seqs, seqs, context, pairs)
        assert arr[0] == pytest.approx(want, rel=1e-12)             # the fit's array path agrees
        assert arr[1] == cost.step_time_from_sums(4, 4, 2000, 0, 4, 0)  # a graphed decode: no host time


def test_decodes_above_the_graphs_take_the_structure_too():
    cost = _kimi(limits=(2, 2), structure="additive")
    plain = RooflineCostModel("kimi-k2.5", "B200", 4, "nvfp4", "fp8", eager_layer_host_s=0.0,
                              eager_moe_layer_host_s=0.0, cudagraph_tokens=(2, 2))
    host = 61e-3 + 60e-3
    assert cost.decode_step_times_s(4, 4000, 2) == pytest.approx([t + host for t in
                                                                  plain.decode_step_times_s(4, 4000, 2)])
    assert cost.decode_step_times_s(2, 4000, 1) == plain.decode_step_times_s(2, 4000, 1)   # graphed


def test_max_keeps_the_embedded_methods():
    cost = _kimi()
    assert cost.eager_floor_s == (pytest.approx(61e-3 + 60e-3), 0.0)
    assert eager_steps.EMBEDDED_STRUCTURE == "max"


def test_the_trial_script_needs_a_structure_and_fidelity_reals_arguments(capsys):
    from benchmark_module import load_benchmark
    script = load_benchmark("eager_structure_trial")
    assert script.split_at_dashes(["--structure", "max", "--", "--folds", "GPU"]) == (["--structure", "max"],
                                                                                    ["--folds", "GPU"])
    import sys
    old = sys.argv
    try:
        sys.argv = ["x", "--structure", "additive"]
        with pytest.raises(TwinInputError, match="after --"):
            script.main()
        sys.argv = ["x", "--structure", "sum", "--", "--folds", "GPU"]
        with pytest.raises(SystemExit):
            script.main()
    finally:
        sys.argv = old


def test_the_trial_swaps_the_embedded_structure_for_its_run_only(monkeypatch):
    from benchmark_module import load_benchmark
    script = load_benchmark("eager_structure_trial")
    seen = []

    def fake_run(args):
        seen.append((list(args), _kimi().eager_structure, _kimi().eager_floor_s))
        raise RuntimeError("the run failed")

    monkeypatch.setattr(script, "run_fidelity_real", fake_run)
    monkeypatch.setattr("sys.argv", ["x", "--structure", "moe_additive", "--", "--folds", "GPU"])
    with pytest.raises(RuntimeError):
        script.main()
    assert seen == [(["--folds", "GPU"], "moe_additive", (pytest.approx(61e-3), pytest.approx(60e-3)))]
    assert eager_steps.EMBEDDED_STRUCTURE == "max" and _kimi().eager_floor_s[1] == 0.0   # restored, even on error


def test_the_reading_states_each_structures_step():
    from benchmark_module import load_benchmark
    script = load_benchmark("eager_structure_reading")
    assert script.structure_step_s("max", 0.03, 61, 60, 1e-3, 1e-3) == pytest.approx(0.121)
    assert script.structure_step_s("additive", 0.03, 61, 60, 1e-3, 1e-3) == pytest.approx(0.151)
    assert script.structure_step_s("moe_additive", 0.07, 61, 60, 1e-3, 1e-3) == pytest.approx(0.13)
    assert script.alone_per_layer_s("max", 0.02, 0.03, 10) is None
    assert script.alone_per_layer_s("additive", 0.05, 0.03, 10) == pytest.approx(0.002)
    rows = [{"gpu_s": 0.03, "layers": 80, "moe_layers": 0, "step_s": 0.03 + 80 * 0.4e-3} for _ in range(3)]
    a, b = script.fit_terms("additive", rows)
    assert a == pytest.approx(0.4e-3, rel=1e-4) and b == 0.0
    with pytest.raises(TwinInputError, match="structure 'x'"):
        script.structure_step_s("x", 0.03, 61, 60, 1e-3, 1e-3)
