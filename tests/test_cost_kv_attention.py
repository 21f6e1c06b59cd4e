"""FP8 KV decode attention on Hopper (twin.cost.kv_attention): the KV cache's own read rate by (generation, KV
format), given values winning, the step's KV read priced at it (decode fast path included), its explain() part,
the fit scope ``hopper+kv_fp8`` and its provenance for the folds."""

from __future__ import annotations

import types

import pytest
from core_helpers import step_shape as _step

from twin.cost.default_terms import KV_FORMAT_TERMS
from twin.cost.kv_attention import explain_kv_path, kv_format, kv_read_efficiency
from twin.cost.roofline import RooflineCostModel
from twin.hardware.catalog import resolve_gpu, resolve_model

H100, B200 = resolve_gpu("H100-SXM"), resolve_gpu("B200")


def test_the_kv_format_and_generation_pick_the_rate():
    assert KV_FORMAT_TERMS == {("hopper", "fp8"): {"kv_memory_efficiency": 0.3}}
    assert [kv_format(k) for k in ("fp8", "fp8_e4m3", "FP8_E5M2", "bf16")] == ["fp8", "fp8", "fp8", "bf16"]
    assert kv_read_efficiency(H100, "fp8", None) == 0.3
    assert kv_read_efficiency(H100, "fp8_e4m3", None) == 0.3
    assert kv_read_efficiency(H100, "bf16", None) is None          # the weights' rate
    assert kv_read_efficiency(B200, "fp8", None) is None           # FlashInfer / TRT-LLM-gen: the weights' rate
    assert kv_read_efficiency(H100, "fp8", 0.7) == 0.7             # a given value wins


def _model(kv: str, gpu: str = "H100-SXM", **kw) -> RooflineCostModel:
    return RooflineCostModel("llama-3.1-70b", gpu, 2, "fp8", kv, **kw)


def test_a_decode_step_reads_the_fp8_cache_at_its_own_rate():
    fp8, given = _model("fp8"), _model("fp8", kv_memory_efficiency=0.978)
    assert (fp8.kv_memory_efficiency, given.kv_memory_efficiency, _model("bf16").kv_memory_efficiency) == (
        0.3, 0.978, fp8.memory_efficiency)
    assert _model("fp8", "B200").kv_memory_efficiency == _model("fp8", "B200").memory_efficiency
    m = resolve_model("llama-3.1-70b")
    bytes_per_token = m.num_hidden_layers * (m.num_key_value_heads // 2) * m.head_dim * 2 * 1    # K and V, FP8, TP2
    n, ctx = 32, 8000
    step = _step([1] * n, [ctx] * n)
    kv_tokens = n * (ctx + 1) + n                       # read (context + the new token), and the new token written
    extra = kv_tokens * bytes_per_token / H100.memory_bandwidth_bytes_per_s * (1 / 0.3 - 1 / 0.978)
    assert fp8.step_time_s(step) - given.step_time_s(step) == pytest.approx(extra, rel=1e-9)
    assert fp8.decode_step_times_s(n, n * ctx, 3) == [fp8.step_time_s(_step([1] * n, [ctx + i] * n)) for i in range(3)]


def test_explain_names_the_extra_read_and_the_parts_add_up():
    fp8, given = _model("fp8"), _model("fp8", kv_memory_efficiency=0.978)
    step = _step([1] * 16, [4000] * 16)
    parts, base = fp8.explain(step), given.explain(step)
    assert "kv_read_path_extra_s" not in base
    assert parts["kv_read_s"] == pytest.approx(base["kv_read_s"], rel=1e-9)      # at the weights' rate
    write_extra = parts["kv_write_s"] - base["kv_write_s"]       # the new tokens' KV written at the cache's rate
    assert parts["kv_read_path_extra_s"] + write_extra == pytest.approx(
        fp8.step_time_s(step) - given.step_time_s(step), rel=1e-9)
    summed = sum(v for k, v in parts.items() if k != "total_s")
    assert summed == pytest.approx(parts["total_s"], rel=1e-12)
    parts = {"attention_compute_s": 1.0, "kv_read_s": 0.0}
    explain_kv_path(parts, fp8)                                   # nothing exposed: nothing moves
    assert parts == {"attention_compute_s": 1.0, "kv_read_s": 0.0}


def _deployment(gpu: str, kv: str):
    return types.SimpleNamespace(gpu=resolve_gpu(gpu), kv_pool=types.SimpleNamespace(kv_dtype=kv))


def test_the_fit_scope_and_its_provenance():
    from twin.fitting import provenance as pv
    from twin.fitting.scoped import SCOPES, in_scope, params_for
    assert "kv_fp8" in SCOPES
    key = "kv_memory_efficiency@hopper+kv_fp8"
    assert [in_scope("hopper+kv_fp8", _deployment(g, k)) for g, k in (
        ("H100-SXM", "fp8"), ("H100-SXM", "fp8_e4m3"), ("H100-SXM", "bf16"), ("B200", "fp8"))] == [
        True, True, False, False]
    assert params_for({key: 0.5}, _deployment("H100-SXM", "fp8")) == {"kv_memory_efficiency": 0.5}
    assert params_for({key: 0.5}, _deployment("H100-SXM", "bf16")) == {}
    entry = next(e for e in pv.embedded_entries() if e.parameter == key)
    # stated prior: the weights' rate, the fold's memory_efficiency (round 8: inherited, not the fit parameter's 0.978)
    assert (entry.value, entry.prior, entry.table) == (0.3, pv.INHERIT, "KV_FORMAT_TERMS")
    assert entry.evidence == "the H100 Llama-3.1-70B rows"
    assert pv.embedded_start((key,)) == {key: 0.3}

    def row(system: str, model: str):
        return types.SimpleNamespace(row=types.SimpleNamespace(system=system, model_path=model))
    assert entry.is_evidence(row("h100_sxm", "meta-llama/Llama-3.1-70B"), None)
    assert not entry.is_evidence(row("b200_sxm", "meta-llama/Llama-3.1-70B"), None)
    assert not entry.is_evidence(row("h100_sxm", "openai/gpt-oss-120b"), None)
    plan = pv.fold_plan("llama", lambda c: "llama", [(row("h100_sxm", "meta-llama/Llama-3.1-70B"),
                                                      _deployment("H100-SXM", "fp8"))], (), entries=[entry])
    assert plan.fixed == {key: 0.978}                     # held out: reset to its stated prior
