"""The Marlin W4A16 expert path's own eager MoE floor (twin.cost.eager_path_floors; issue 33, round 16; opt-in:
benchmarks/kimi_int4_floor.py): Kimi-K2.5 INT4's layer at its launch count (26 host-dispatched ops, 10 beyond the
dense layer, at 0.84 ms / 16 per op: 0.525 ms per MoE layer) on ``@blackwell+experts_int4``, whatever the attention;
every other path keeps what it had; its evidence is the B200 Llama rows, and a fold holding them out prices it at the
same count times its per-layer prior. Not embedded: by default the INT4 path keeps the generation's floor."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from twin.cost import default_terms
from twin.cost import eager_path_floors as epf
from twin.cost.eager_path_floors import path_floor_s
from twin.fitting import launch_prior as lp
from twin.fitting import provenance as pv
from twin.fitting.scoped import params_for
from twin.hardware.catalog import resolve_gpu

KEY = "eager_moe_layer_host_s@blackwell+experts_int4"


def _dep(gpu: str = "B200", *, moe=True, mla=True, experts="int4-g32-sym"):
    return SimpleNamespace(gpu=resolve_gpu(gpu), model=SimpleNamespace(is_moe=moe, is_mla=mla),
                           weight_formats=SimpleNamespace(routed_experts=experts, linear_families=frozenset()))


@pytest.fixture
def counted(monkeypatch):
    """The trial's tables (benchmarks/kimi_int4_floor.py --count), undone after the test."""
    monkeypatch.setitem(epf.EXPERT_PATH_LAYER_OPS, ("blackwell", "int4"), epf.MARLIN_INT4_LAYER_OPS)
    monkeypatch.setitem(pv.DECLARED_EVIDENCE, KEY, lp.COUNT_EVIDENCE)


def test_not_embedded_and_the_count_is_one_definition():
    assert epf.EXPERT_PATH_LAYER_OPS == {} and KEY not in epf.embedded_values(default_terms.GENERATION_TERMS)
    d = _dep()
    assert path_floor_s(d.gpu, d.model, d.weight_formats, 0.84e-3) is None       # the generation's floor applies
    assert epf.MARLIN_INT4_LAYER_OPS == 26 == lp.PATH_LAYER_OPS[("blackwell", "int4")][0]


def test_the_path_floor_is_the_count_on_any_attention_and_nothing_elsewhere(counted):
    for dep in (_dep(), _dep(mla=False)):
        assert path_floor_s(dep.gpu, dep.model, dep.weight_formats, 0.84e-3) == pytest.approx(0.525e-3, rel=1e-12)
    for other in (_dep("H100-SXM"), _dep(moe=False), _dep(experts="nvfp4"), _dep(experts="fp8")):
        assert path_floor_s(other.gpu, other.model, other.weight_formats, 0.84e-3) is None
    gqa_nvfp4 = _dep(mla=False, experts="nvfp4")            # round 14's GQA count is unchanged
    assert path_floor_s(gqa_nvfp4.gpu, gqa_nvfp4.model, gqa_nvfp4.weight_formats, 0.84e-3) == pytest.approx(
        0.315e-3, rel=1e-12)


def test_the_embedded_defaults_act_on_the_int4_path_only(counted, monkeypatch):
    monkeypatch.setitem(default_terms.GENERATION_TERMS, "blackwell", {
        "eager_layer_host_s": 0.8e-3, "eager_moe_layer_host_s": 1.15e-3})

    def floor(dep) -> float:
        return default_terms.embedded(dep.gpu, dep.model, dep.weight_formats,
                                      eager_moe_layer_host_s=None)["eager_moe_layer_host_s"]
    assert floor(_dep()) == pytest.approx(10 * 0.8e-3 / 16, rel=1e-12)           # follows the per-layer value
    assert floor(_dep(experts="nvfp4")) == 1.15e-3                                 # Kimi NVFP4: the generation's
    assert floor(_dep(mla=False, experts="fp8")) == 1.15e-3                       # MiniMax FP8: the generation's
    assert floor(_dep(mla=False, experts="mxfp4")) == 1.15e-3                     # gpt-oss: the generation's


def test_the_path_key_wins_over_the_generation_floor():
    params = {"eager_moe_layer_host_s@blackwell": 1.15e-3, KEY: 0.525e-3}
    assert params_for(params, _dep())["eager_moe_layer_host_s"] == 0.525e-3
    assert params_for(params, _dep(experts="nvfp4"))["eager_moe_layer_host_s"] == 1.15e-3


def test_its_entry_reads_the_llama_rows_and_a_fold_prices_it_at_its_count(counted):
    entries = {e.parameter: e for e in pv.embedded_entries()}
    e = entries[KEY]
    assert e.prior == pv.HOST and e.value == pytest.approx(10 * 0.84e-3 / 16, rel=1e-12)
    llama = SimpleNamespace(row=SimpleNamespace(system="b200_sxm", model_path="meta-llama/Llama-3.1-70B-Instruct"))
    kimi = SimpleNamespace(row=SimpleNamespace(system="b200_sxm", model_path="moonshotai/Kimi-K2.5"))
    assert e.is_evidence(llama, None) and not e.is_evidence(kimi, None)       # no Kimi row is read
    # reset (its per-layer value's rows held out): the count at the fold's per-layer prior (0.1 ms per op here)
    assert lp.path_floor_priors({KEY: 0.0}, lambda gen: 1.6e-3) == pytest.approx({KEY: 10 * 0.1e-3}, rel=1e-12)
    assert KEY not in lp.path_floor_priors({}, lambda gen: 1.6e-3)             # kept: the fold keeps its value


def test_the_trial_script_patches_the_tables_and_checks_its_flags(monkeypatch):
    from benchmark_module import load_benchmark

    from twin.cost.marlin_moe import MARLIN_W4A16_MOE_TERMS
    from twin.errors import TwinInputError
    mod = load_benchmark("kimi_int4_floor")
    with mod.counted():          # scoped: tests/test_no_leaked_state.py checks the tables come back
        assert epf.embedded_values(default_terms.GENERATION_TERMS)[KEY] == pytest.approx(
            10 * default_terms.GENERATION_TERMS["blackwell"]["eager_layer_host_s"] / 16, rel=1e-12)
        assert pv.DECLARED_EVIDENCE[KEY] is lp.COUNT_EVIDENCE
        with mod.refitted():
            assert MARLIN_W4A16_MOE_TERMS["moe_expert_efficiency"] == 0.497
    assert mod.REFIT == {"moe_expert_efficiency": 0.497} and KEY not in pv.DECLARED_EVIDENCE
    monkeypatch.setattr("sys.argv", ["kimi_int4_floor.py", "--refit"])
    with pytest.raises(TwinInputError, match="--count"):
        mod.main()
