"""Issue 33, round 7: the routed experts' weight stream in prompt steps (``twin.cost.prompt_experts``,
``moe_prompt_stream_efficiency``): prior 1 and nothing embedded (the step functions are not wrapped), the extra
seconds by hand, prompt steps only, every step function the same (step by step, the fit's arrays, ``explain()``),
the fit's scoped name, and bad values rejected."""

from __future__ import annotations

import pytest
from core_helpers import check_prompt_only_term
from core_helpers import step_shape as step

from twin.cost.moe_terms import routed_expert_read_bytes
from twin.cost.prompt_experts import DEFAULT_MOE_PROMPT_STREAM_EFFICIENCY, prompt_stream_extra_s
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.hardware.catalog import resolve_model

KW = dict(model="gpt-oss-120b", gpu="B200", tensor_parallel_size=2, weight_dtype="fp8")


def test_prior_is_one_and_nothing_is_embedded():
    assert DEFAULT_MOE_PROMPT_STREAM_EFFICIENCY == 1.0
    for gpu, dtype in (("B200", "fp8"), ("H100-SXM", "fp8"), ("B200", "nvfp4")):
        m = RooflineCostModel("gpt-oss-120b", gpu, tensor_parallel_size=2, weight_dtype=dtype)
        assert m.moe_prompt_stream_efficiency == 1.0 and m.prompt_stream_s is None
    plain = RooflineCostModel(**KW)
    one = RooflineCostModel(**KW, moe_prompt_stream_efficiency=1.0)
    s = step([1024, 1, 1], [0, 500, 500])
    assert one.step_time_s(s) == plain.step_time_s(s)
    assert RooflineCostModel("llama-3.1-70b", "B200", tensor_parallel_size=2, weight_dtype="fp8",
                             moe_prompt_stream_efficiency=0.5).prompt_stream_s is None      # dense: no experts


def test_prompt_steps_pay_the_slower_stream_and_decodes_do_not():
    plain = RooflineCostModel(**KW)
    m = RooflineCostModel(**KW, moe_prompt_stream_efficiency=0.5)
    bandwidth = m.gpu.memory_bandwidth_bytes_per_s * m.memory_efficiency * m.quant_weight_efficiency
    model = resolve_model("gpt-oss-120b")
    # 1 / 0.5 - 1 = 1: the touched experts' bytes once more at the weight streams' bandwidth
    want = routed_expert_read_bytes(model, "fp8", 2, 1027) / bandwidth
    assert want > 0
    assert m.prompt_stream_s(1027) == pytest.approx(want, rel=1e-12)
    assert prompt_stream_extra_s(model, "fp8", 2, 1027, bandwidth, 0.25) == pytest.approx(3 * want, rel=1e-12)
    check_prompt_only_term(m, plain, "moe_prompt_stream_extra_s", want)


def test_the_fits_scoped_name_reaches_its_generation_and_format_only():
    from types import SimpleNamespace as NS

    from twin.fitting.scoped import params_for
    from twin.hardware.weight_formats import WeightFormats
    from twin.hardware.catalog import resolve_gpu
    dep = NS(gpu=resolve_gpu("B200"), weight_formats=WeightFormats.uniform("fp8"),
             model=resolve_model("gpt-oss-120b"))
    got = params_for({"moe_prompt_stream_efficiency@blackwell+experts_fp8": 0.5,
                      "moe_prompt_stream_efficiency@hopper+experts_fp8": 0.25}, dep)
    assert got == {"moe_prompt_stream_efficiency": 0.5}


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5])
def test_bad_values_are_rejected_with_the_name(bad):
    with pytest.raises(TwinInputError, match="moe_prompt_stream_efficiency"):
        RooflineCostModel(**KW, moe_prompt_stream_efficiency=bad)
