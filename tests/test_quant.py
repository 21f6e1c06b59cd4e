"""Weight formats: bytes per weight, compute paths, the fp8 weight-read bound against bf16, 4-bit models."""

from __future__ import annotations

from fractions import Fraction

import pytest

from twin.cost.factory import build_cost_model
from twin.cost.roofline import RooflineCostModel
from twin.core.scheduler_output import SchedulerOutput
from twin.errors import TwinInputError
from twin.hardware.catalog import (compute_dtype, linear_weight_bytes, normalize_dtype, normalize_weight_dtype,
                                   resolve_gpu, resolve_model)
from twin.hardware.quant import WEIGHT_BYTES_PER_PARAM


def decode(batch: int, context: int = 512) -> SchedulerOutput:
    return SchedulerOutput(step_index=0, num_new_tokens=[1] * batch, num_computed_before=[context] * batch,
                           num_spec_tokens=[0] * batch)


@pytest.mark.parametrize("alias, canonical", [("awq", "int4"), ("GPTQ", "int4"), ("awq_marlin", "int4"),
                                              ("w4a16", "int4"), ("bnb-4bit", "nf4"), ("bitsandbytes", "nf4"),
                                              ("w8a8", "int8"), ("fp8", "fp8"), ("bfloat16", "bf16")])
def test_weight_format_names(alias, canonical):
    assert normalize_weight_dtype(alias) == canonical


def test_unknown_format_and_kv_stays_float():
    with pytest.raises(TwinInputError, match="weight_dtype: 'int3'.*allowed: bf16"):
        normalize_weight_dtype("int3")
    with pytest.raises(TwinInputError, match="kv_dtype"):
        normalize_dtype("int4", "kv_dtype")                          # a KV cache is bf16/fp16/fp8/fp32 only


def test_bytes_per_weight():
    # W4A16, group 128: 4 bits + an fp16 scale and a 4-bit zero point per 128 weights
    assert WEIGHT_BYTES_PER_PARAM["int4"] == Fraction(1, 2) + Fraction(2, 128) + Fraction(1, 256)
    assert WEIGHT_BYTES_PER_PARAM["nf4"] == Fraction(1, 2) + Fraction(4, 64)   # fp32 absmax per 64
    assert linear_weight_bytes(4096 * 4096, "awq") == 4096 * 4096 // 2 + 4096 * 4096 // 128 * 2 + 4096 * 4096 // 256
    assert linear_weight_bytes(10, "fp8") == linear_weight_bytes(10, "int8") == 10
    assert linear_weight_bytes(3, "int4") == 2                                    # rounded up to a byte


def test_compute_paths():
    assert [compute_dtype(d) for d in ("bf16", "fp8", "int8", "awq", "nf4")] == ["bf16", "fp8", "int8", "bf16",
                                                                                  "bf16"]
    h100, a100 = resolve_gpu("H100-SXM"), resolve_gpu("A100-SXM-80GB")
    assert RooflineCostModel("llama-3.1-8b", h100, weight_dtype="awq")._k_linear == \
        RooflineCostModel("llama-3.1-8b", h100, weight_dtype="bf16")._k_linear      # W4A16 computes in bf16
    fp8 = RooflineCostModel("llama-3.1-8b", h100, weight_dtype="fp8")._k_linear
    assert fp8 == pytest.approx(RooflineCostModel("llama-3.1-8b", h100)._k_linear / 2)   # W8A8 at the fp8 rate
    assert RooflineCostModel("llama-3.1-8b", a100, weight_dtype="int8")._k_linear == pytest.approx(
        RooflineCostModel("llama-3.1-8b", a100)._k_linear / 2)                          # A100 int8 tensor cores


@pytest.mark.parametrize("name, tp", [("llama-3.1-70b", 1), ("llama-3.1-8b", 2), ("mixtral-8x7b", 2)])
def test_fp8_weight_read_bound_halves(name, tp):
    m = resolve_model(name)
    bf16, fp8 = m.weight_read_bytes("bf16", tp), m.weight_read_bytes("fp8", tp)
    # the decoder's linear weights halve exactly; embedding rows, LM head and norms stay bf16
    assert bf16 - fp8 == pytest.approx(m.linear_params / tp, abs=1)
    assert 0.5 < fp8 / bf16 < 0.56
    # and the roofline's memory-bound decode step follows
    b16 = RooflineCostModel(m, "H100-SXM", tensor_parallel_size=tp).bounds(decode(1))["memory_bound_s"]
    b8 = RooflineCostModel(m, "H100-SXM", tensor_parallel_size=tp, weight_dtype="fp8").bounds(decode(1))
    kv = m.kv_bytes_per_token("bf16", tp) * (512 + 2) / resolve_gpu("H100-SXM").memory_bandwidth_bytes_per_s
    assert (b8["memory_bound_s"] - kv) / (b16 - kv) == pytest.approx(fp8 / bf16 if not m.is_moe else
                                                                     m.weight_read_bytes("fp8", tp, 1)
                                                                     / m.weight_read_bytes("bf16", tp, 1))


def test_awq_70b_fits_one_h100():
    m = resolve_model("llama-3.1-70b")
    w = m.weight_bytes("awq")
    assert w == linear_weight_bytes(m.linear_params, "int4") + 2 * (2 * 128256 * 8192 + 80 * 2 * 8192 + 8192)
    assert 38e9 < w < 42e9 < resolve_gpu("H100-SXM").memory_bytes * 0.9
    cm = build_cost_model("roofline", m, "H100-SXM", 1, {"weight_dtype": "awq"})
    assert cm.weight_dtype == "int4"
    # decode reads ~0.27x the bf16 bytes, so a batch-1 step is far quicker than bf16 would be at tp=1
    assert cm.step_time_s(decode(1)) < 0.4 * RooflineCostModel(m, "H100-SXM").step_time_s(decode(1))


def test_kv_auto_follows_the_activation_dtype():
    cm = build_cost_model("roofline", "llama-3.1-8b", "H100-SXM", 1, {"weight_dtype": "awq", "kv_dtype": "auto"})
    assert cm.kv_dtype == "bf16"
