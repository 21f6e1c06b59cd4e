"""The roofline cost model split by idea (twin.cost.roofline: defaults and the constructor; roofline_steps: the
per-step arithmetic; roofline_explain: explain()): the hot path lives in one class and the constructor does not
override it, explain() is roofline_explain's, and the trial switches are arguments with the embedded defaults."""

from __future__ import annotations

from core_helpers import step_shape as _step

from twin.cost import block_fp8_chain, eager_steps
from twin.cost.roofline import RooflineCostModel
from twin.cost.roofline_explain import RooflineExplain
from twin.cost.roofline_steps import RooflineSteps

HOT_PATH = ("step_time_s", "step_time_from_sums", "decode_step_times_s", "_decode_terms_of", "step_times_s")


def test_the_hot_path_is_roofline_steps_and_the_model_does_not_override_it():
    assert issubclass(RooflineCostModel, RooflineSteps)
    for name in HOT_PATH:
        assert name in vars(RooflineSteps) and name not in vars(RooflineCostModel)
    cost = RooflineCostModel("llama-3.1-8b", "H100-SXM")
    assert cost.step_time_from_sums.__func__ is RooflineSteps.step_time_from_sums    # no floor installed
    assert cost.decode_step_times_s.__func__ is RooflineSteps.decode_step_times_s


def test_explain_is_roofline_explains_and_adds_up_to_the_step_time():
    cost = RooflineCostModel("mixtral-8x7b", "H100-SXM", 2)
    step = _step([512, 1, 1], [0, 300, 900])
    parts = cost.explain(step)
    assert cost.explain.__func__ is RooflineExplain.explain and 'explain' not in vars(RooflineCostModel)
    assert parts["total_s"] == cost.step_time_s(step)
    assert abs(sum(v for k, v in parts.items() if k != "total_s") - parts["total_s"]) < 1e-12


def test_the_trial_switches_are_off_by_default():
    assert eager_steps.EMBEDDED_STRUCTURE == "max" and block_fp8_chain.CHAIN_PATHS == {}
    cost = RooflineCostModel("kimi-k2.5", "B200", 4, "nvfp4", "fp8", cudagraph_tokens=(8, 8))
    assert cost.eager_structure == "max" and cost.eager_floor_s[1] == 0.0
