"""A GQA layer's counted eager MoE floor on its expert path (twin.cost.eager_path_floors; issue 33, round 14):
MiniMax-M2.5's NVFP4 layer on B200 at its launch count (22 ops: 6 beyond the dense layer at 0.84 ms / 16 per op),
on a key Kimi-K2.5's MLA layers on the same format do not share; its evidence is the B200 Llama rows (the per-op
time), and a fold holding them out prices it at the same count times its own per-layer prior."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from twin.cost import default_terms
from twin.cost.eager_path_floors import counted_floor_s, gqa_path_floor_s, scoped_values
from twin.fitting import launch_prior as lp
from twin.fitting import provenance as pv
from twin.fitting.scoped import in_scope, params_for
from twin.hardware.catalog import resolve_gpu

KEY = "eager_moe_layer_host_s@blackwell+gqa+experts_nvfp4"


def _formats(experts: str):
    return SimpleNamespace(routed_experts=experts, linear_families=frozenset())


def _dep(gpu: str, *, moe=True, mla=False, experts="nvfp4"):
    return SimpleNamespace(gpu=resolve_gpu(gpu), model=SimpleNamespace(is_moe=moe, is_mla=mla),
                           weight_formats=_formats(experts))


def test_the_count_and_where_it_applies():
    assert counted_floor_s(22, 0.84e-3) == pytest.approx(6 * 0.84e-3 / 16, rel=1e-12)
    assert counted_floor_s(11, 0.84e-3) == 0.0           # fewer ops than the dense layer: no extra
    d = _dep("B200")
    assert gqa_path_floor_s(d.gpu, d.model, d.weight_formats, 0.84e-3) == pytest.approx(0.315e-3, rel=1e-12)
    for other in (_dep("B200", mla=True), _dep("B200", moe=False), _dep("H100-SXM"), _dep("B200", experts="fp8")):
        assert gqa_path_floor_s(other.gpu, other.model, other.weight_formats, 0.84e-3) is None
    assert scoped_values(lambda gen: 0.84e-3) == pytest.approx({KEY: 0.315e-3}, rel=1e-12)


def test_the_gqa_scope_leaves_mla_models_out():
    assert in_scope("gqa", _dep("B200")) and not in_scope("gqa", _dep("B200", mla=True))
    params = {"eager_moe_layer_host_s@blackwell": 1.15e-3, KEY: 0.315e-3}
    assert params_for(params, _dep("B200"))["eager_moe_layer_host_s"] == 0.315e-3          # MiniMax NVFP4
    assert params_for(params, _dep("B200", mla=True))["eager_moe_layer_host_s"] == 1.15e-3  # Kimi NVFP4
    assert params_for(params, _dep("B200", experts="fp8"))["eager_moe_layer_host_s"] == 1.15e-3


def test_the_embedded_defaults_give_each_family_its_floor(monkeypatch):
    monkeypatch.setitem(default_terms.GENERATION_TERMS, "blackwell", {
        "eager_layer_host_s": 0.8e-3, "eager_moe_layer_host_s": 1.15e-3})

    def floor(dep) -> float:
        return default_terms.embedded(dep.gpu, dep.model, dep.weight_formats,
                                      eager_moe_layer_host_s=None)["eager_moe_layer_host_s"]
    assert floor(_dep("B200")) == pytest.approx(6 * 0.8e-3 / 16, rel=1e-12)      # the count follows the per-layer
    assert floor(_dep("B200", mla=True)) == 1.15e-3
    assert floor(_dep("B200", experts="fp8")) == 1.15e-3
    assert default_terms.embedded(_dep("B200").gpu, _dep("B200").model, _formats("nvfp4"),
                                  eager_moe_layer_host_s=0.5e-3)["eager_moe_layer_host_s"] == 0.5e-3   # given: kept


def test_its_entry_reads_the_llama_rows_and_a_fold_prices_it_at_its_count(monkeypatch):
    entries = {e.parameter: e for e in pv.embedded_entries()}
    e = entries[KEY]
    assert e.prior == pv.HOST and e.value == pytest.approx(6 * 0.84e-3 / 16, rel=1e-12)
    llama = SimpleNamespace(row=SimpleNamespace(system="b200_sxm", model_path="meta-llama/Llama-3.1-70B-Instruct"))
    minimax = SimpleNamespace(row=SimpleNamespace(system="b200_sxm", model_path="MiniMaxAI/MiniMax-M2.5"))
    assert e.is_evidence(llama, None) and not e.is_evidence(minimax, None)
    # held out with the per-layer value's rows: the same count at the fold's per-layer prior (0.1 ms per op here),
    # not the generic Triton layer's count that its HOST prior alone would give
    assert lp.path_floor_priors({KEY: 0.0}, lambda gen: 1.6e-3) == pytest.approx({KEY: 6 * 0.1e-3}, rel=1e-12)
    assert KEY not in lp.path_floor_priors({}, lambda gen: 1.6e-3)            # not reset: the fold keeps its value


def test_the_trial_script_counts_minimax_fp8_and_drops_the_generation_floor_from_the_fold_terms():
    from benchmark_module import load_benchmark

    from twin.cost import generation_experts
    mod = load_benchmark("eager_family_floor")
    assert mod.fp8_count_s() == pytest.approx(11 * 0.84e-3 / 16, rel=1e-12)        # 27 ops: 0.5775 ms
    terms = ("memory_efficiency", mod.GENERIC_KEY, "eager_layer_host_s@blackwell")
    assert mod.fidelity_argv(["--folds", "family"], False, terms) == ["--folds", "family"]
    assert mod.fidelity_argv(["--folds", "family", "--silicon-every", "3"], True, terms) == [
        "--folds", "family", "--silicon-every", "3", "--terms", "memory_efficiency,eager_layer_host_s@blackwell",
        "--fit-sim-s", "30"]
    minimax = SimpleNamespace(row=SimpleNamespace(system="b200_sxm", model_path="MiniMaxAI/MiniMax-M2.5"))
    kimi = SimpleNamespace(row=SimpleNamespace(system="b200_sxm", model_path="moonshotai/Kimi-K2.5"))
    with mod.fp8_counted():      # scoped: tests/test_no_leaked_state.py checks the tables come back
        assert generation_experts.GENERATION_EXPERT_TERMS[("blackwell", "fp8")]["eager_moe_layer_host_s"] == \
            pytest.approx(0.5775e-3, rel=1e-12)
        assert not pv.DECLARED_EVIDENCE[mod.FP8_KEY][1](minimax, None)
        assert not pv.DECLARED_EVIDENCE[mod.GENERIC_KEY][1](minimax, None)
        assert pv.DECLARED_EVIDENCE[mod.GENERIC_KEY][1](kimi, None)
    assert pv.DECLARED_EVIDENCE[mod.GENERIC_KEY][1](minimax, None)        # the embedded evidence is back
