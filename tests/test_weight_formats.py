"""Weight formats per layer group: bytes per weight with their scales, the HF quantization_config of each
ground-truth checkpoint read group by group, the catalog entries against those config files, FP4 compute paths."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from twin.fitting.ground_truth import ground_truth_dir
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError
from twin.hardware.catalog import model_from_hf_config, normalize_weight_dtype, resolve_gpu, resolve_model
from twin.hardware.hf_quant import formats_from_quantization_config
from twin.hardware.quant import bytes_per_weight, compute_dtype, linear_weight_bytes
from twin.hardware.weight_formats import WeightFormats, group_params

CONFIGS = ground_truth_dir() / "vllm-silicon-h100-b200" / "model_configs"
needs_configs = pytest.mark.skipif(not CONFIGS.is_dir(), reason="ground-truth model configs not present")


def test_fp4_and_group_int4_bytes():
    assert bytes_per_weight("nvfp4") == Fraction(9, 16)            # 4 bits + one E4M3 scale per 16
    assert bytes_per_weight("mxfp4") == Fraction(17, 32)           # 4 bits + one E8M0 scale per 32
    assert bytes_per_weight("int4-g32-sym") == Fraction(1, 2) + Fraction(2, 32)
    assert bytes_per_weight("int4-g64") == Fraction(1, 2) + Fraction(2, 64) + Fraction(1, 128)
    assert normalize_weight_dtype("int4-g128") == normalize_weight_dtype("awq") == "int4"
    assert normalize_weight_dtype("FP4") == "nvfp4" and normalize_weight_dtype("w4a16-g32-sym") == "int4-g32-sym"
    # NVFP4's FP32 global scale: 4 bytes per tensor on top
    assert linear_weight_bytes(1600, "nvfp4", tensors=2) == 900 + 8
    with pytest.raises(TwinInputError, match="weight_dtype: 'int4-g1'"):
        normalize_weight_dtype("int4-g1")


def test_compute_paths_fall_back_without_fp4():
    assert compute_dtype("nvfp4") == compute_dtype("mxfp4") == "fp4"
    assert resolve_gpu("B200").flops("fp4") == 9.0e15 and resolve_gpu("GB200").flops("fp4") == 10.0e15
    assert resolve_gpu("H100-SXM").flops("fp4") == resolve_gpu("H100-SXM").flops("bf16")
    b200, h100 = (RooflineCostModel("llama-3.1-70b", g, weight_dtype="nvfp4") for g in ("B200", "H100-SXM"))
    assert b200._k_linear == pytest.approx(RooflineCostModel("llama-3.1-70b", "B200")._k_linear / 4)
    assert h100._k_linear == pytest.approx(RooflineCostModel("llama-3.1-70b", "H100-SXM")._k_linear)


def test_per_group_formats_sum_their_groups():
    m = resolve_model("kimi-k2.5")
    f = m.checkpoint_formats
    assert f.routed_experts == "int4-g32-sym" and f.attention == f.shared_experts == f.dense_mlp == "bf16"
    p = group_params(m)
    stored = m.weight_bytes(f)
    plain = m.weight_bytes("bf16")
    # only the routed experts change: 2 bytes -> 0.5625 bytes a weight (the uniform bf16 also has the router in bf16)
    assert plain - stored == pytest.approx(p["routed_experts"] * (2 - 0.5625), abs=2)
    # routed experts over tp x dp GPUs, the rest over tp
    assert m.weight_bytes(f, 4, moe_shards=16) < m.weight_bytes(f, 4)
    assert WeightFormats.uniform("fp8").with_groups({"lm_head": "fp8"}).lm_head == "fp8"
    with pytest.raises(TwinInputError, match="weight_formats.experts: unknown layer group"):
        WeightFormats().with_groups({"experts": "fp8"})


@needs_configs
@pytest.mark.parametrize("file, catalog, expected", [
    ("moonshotai--Kimi-K2.5_config.json", "kimi-k2.5", {"routed_experts": "int4-g32-sym", "attention": "bf16",
                                                        "shared_experts": "bf16", "dense_mlp": "bf16"}),
    ("openai--gpt-oss-120b_config.json", "gpt-oss-120b", {"routed_experts": "mxfp4", "attention": "bf16"}),
    ("MiniMaxAI--MiniMax-M2.5_config.json", "minimax-m2.5", {"routed_experts": "fp8", "attention": "fp8"}),
    ("Qwen--Qwen3-235B-A22B-FP8_config.json", "qwen3-235b-a22b-fp8", {"routed_experts": "fp8", "attention": "fp8"}),
    ("Qwen--Qwen3-32B_config.json", "qwen3-32b", None),
])
def test_ground_truth_configs_match_the_catalog(file, catalog, expected):
    from_file, entry = model_from_hf_config(CONFIGS / file), resolve_model(catalog)
    assert replace(from_file, name=entry.name, hf_id=entry.hf_id) == entry     # every shape field
    if expected is None:
        assert from_file.checkpoint_formats is None
        return
    f = from_file.checkpoint_formats
    assert {g: getattr(f, g) for g in expected} == expected
    assert f.router == f.lm_head == "bf16"
    assert from_file.weight_bytes(f) == entry.weight_bytes(entry.checkpoint_formats)


@needs_configs
def test_gpt_oss_attention_variants_from_config():
    m = model_from_hf_config(CONFIGS / "openai--gpt-oss-120b_config.json")
    assert (m.sliding_window, m.sliding_window_layers, m.full_attention_layers, m.attention_sinks) == (128, 18, 18, True)


@pytest.mark.parametrize("qc, expected", [
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]},
     {"attention": "nvfp4", "dense_mlp": "nvfp4"}),
    ({"quantization": {"quant_algo": "FP8", "exclude_modules": ["lm_head", "model.layers.*.self_attn*"]}},
     {"attention": "bf16", "dense_mlp": "fp8"}),
    ({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True}, {"attention": "int4-g64"}),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128}, {"dense_mlp": "int4"}),
    ({"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized", "ignore": ["lm_head"],
      "config_groups": {"g": {"targets": ["Linear"], "weights": {"type": "float", "num_bits": 4, "group_size": 16}}}},
     {"attention": "nvfp4"}),
    ({"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {
        "g": {"targets": ["re:.*mlp.experts.*"], "weights": {"type": "float", "num_bits": 8}}}},
     {"attention": "bf16", "routed_experts": "fp8"}),
])
def test_quantization_config_methods(qc, expected):
    f = formats_from_quantization_config(qc, "test", first_dense=1, layers=4)
    assert {g: getattr(f, g) for g in expected} == expected


def test_unknown_quant_method_is_one_line():
    with pytest.raises(TwinInputError, match="quant_method = 'hqq'.*allowed: compressed-tensors"):
        formats_from_quantization_config({"quant_method": "hqq"}, "x")
