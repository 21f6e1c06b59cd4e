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


def test_a_fold_keeping_blackwell_rows_only_holds_the_split_and_fits_the_unscoped_step():
    from tests.test_fitting_joint import _generated
    from twin.fitting.identify import held_at_prior
    from twin.fitting.joint import default_start
    names = fr.FOLD_TERMS + fr.LAYER_FIXED_TERMS
    b200 = _generated(default_start(), which=("b200",))
    held = held_at_prior(b200, names)
    assert held["step_overhead_s@blackwell"].startswith("every run is blackwell (the unscoped step_overhead_s")
    assert held["layer_overhead_s@blackwell"].startswith("every run is blackwell")
    assert "step_overhead_s" not in held
    h100 = _generated(default_start(), which=("h100",))
    assert held_at_prior(h100, names)["step_overhead_s@blackwell"] == "no run (blackwell) in the data"
    both = _generated(default_start(), which=("h100", "b200"))
    assert not {"step_overhead_s", "step_overhead_s@blackwell"} & set(held_at_prior(both, names))


def test_the_mla_entry_wins_over_a_generations_fixed_time_per_layer_whatever_the_order():
    from types import SimpleNamespace as NS
    from twin.fitting.scoped import params_for
    from twin.hardware.catalog import resolve_gpu, resolve_model
    dep = NS(model=resolve_model("kimi-k2.5"), gpu=resolve_gpu("B200"))
    for params in ({"layer_overhead_s@mla": 30e-6, "layer_overhead_s@blackwell": 7e-6},
                   {"layer_overhead_s@blackwell": 7e-6, "layer_overhead_s@mla": 30e-6}):
        assert params_for(params, dep)["layer_overhead_s"] == 30e-6
