"""``benchmarks/fidelity_real.py --layer-fixed``: the default report's terms and Blackwell's fixed time per step
and per decoder layer (issue 33, round 12; a tested fold option)."""

from __future__ import annotations

from tests.benchmark_module import load_benchmark
from twin.fitting.parameters import PARAMETERS_BY_NAME

fr = load_benchmark("fidelity_real")


def test_the_option_adds_blackwells_step_and_layer_terms_to_the_fold_terms():
    names = fr._names(fr.parser().parse_args(["--layer-fixed"]))
    assert names == fr.FOLD_TERMS + ("step_overhead_s@blackwell", "layer_overhead_s@blackwell")
    assert fr._names(fr.parser().parse_args([])) == fr.FOLD_TERMS        # not the default report


def test_blackwells_step_term_is_in_ms_with_the_unscoped_embedded_value_as_its_prior():
    p = PARAMETERS_BY_NAME["step_overhead_s@blackwell"]
    assert p.unit == "ms per step" and p.to_model(p.prior) == PARAMETERS_BY_NAME["step_overhead_s"].scale * 1.74
    assert PARAMETERS_BY_NAME["layer_overhead_s@blackwell"].unit == "us per decoder layer per step"
