"""Catalog: GPU and model lookups, derived model numbers, HF config round trip, user GPU spec files."""

from __future__ import annotations

import json

import pytest

from twin.hardware.catalog import (
    GpuSpec,
    ModelSpec,
    dtype_bytes,
    list_gpus,
    list_models,
    load_gpu_spec,
    model_from_hf_config,
    normalize_dtype,
    resolve_gpu,
    resolve_model,
)
from twin.errors import TwinInputError

KIB = 1024


def test_catalog_lists_the_required_entries():
    gpus = {g.name for g in list_gpus()}
    assert gpus >= {"H100-SXM", "H100-PCIe", "H200-SXM", "A100-SXM-80GB", "A100-40GB", "L40S", "L4", "MI300X",
                    "RTX-4090", "RTX-5090", "CPU"}
    models = {m.name for m in list_models()}
    assert models >= {"llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "qwen2.5-72b", "mistral-7b", "tiny-llama"}


@pytest.mark.parametrize("alias, name", [("h100", "H100-SXM"), ("H100-sxm", "H100-SXM"),
                                         ("NVIDIA H100 80GB HBM3", "H100-SXM"), ("a100", "A100-SXM-80GB"),
                                         ("mi300x", "MI300X"), ("4090", "RTX-4090"), ("cpu", "CPU"),
                                         ("h200", "H200-SXM")])
def test_gpu_aliases_case_insensitive(alias, name):
    assert resolve_gpu(alias).name == name


def test_gpu_numbers_from_datasheets():
    h100 = resolve_gpu("H100-SXM")
    assert h100.flops("bf16") == pytest.approx(989e12, rel=0.01)
    assert h100.flops("fp8") == pytest.approx(2 * h100.flops("bf16"), rel=0.01)
    assert h100.memory_bandwidth_bytes_per_s == 3.35e12
    assert h100.interconnect_bytes_per_s == 900e9
    assert 80e9 <= h100.memory_bytes <= 86e9
    # A100 has no fp8 tensor cores: fp8 weights run weight-only at the bf16 rate
    assert resolve_gpu("a100").flops("fp8") == resolve_gpu("a100").flops("bf16")
    assert resolve_gpu("cpu").kind == "cpu"
    for g in list_gpus():
        assert g.memory_bandwidth_bytes_per_s > 0 and g.memory_bytes > 0 and g.flops("bf16") > 0


def test_unknown_names_list_the_known_ones():
    """The refusal lists every catalogued name (the dashboard shows it so, having no `twin list`); the CLI's
    line counts them and names the command instead (twin.cli.catalog_pointer, round 22)."""
    from twin.cli.catalog_pointer import on_terminal

    with pytest.raises(TwinInputError, match="H100-SXM") as gpu:
        resolve_gpu("tpu-v5e")
    with pytest.raises(TwinInputError, match="llama-3.1-8b") as model:
        resolve_model("gpt-5")
    assert on_terminal(str(gpu.value)) == (f"gpu: unknown GPU 'tpu-v5e'; {len(list_gpus())} GPUs catalogued: "
                                           "`twin list gpus`; or give a YAML spec file path")
    assert on_terminal(str(model.value)) == (f"model: unknown model 'gpt-5'; {len(list_models())} models catalogued: "
                                             "`twin list models`; or give a path to a Hugging Face config.json")


def test_dtypes():
    assert [dtype_bytes(d) for d in ("bf16", "fp16", "fp8", "fp32")] == [2, 2, 1, 4]
    assert normalize_dtype("bfloat16") == "bf16" and normalize_dtype("FLOAT16") == "fp16"
    with pytest.raises(TwinInputError, match="int4"):
        normalize_dtype("int4", "kv_dtype")


def test_kv_bytes_per_token():
    l8, l70 = resolve_model("llama-3.1-8b"), resolve_model("llama-3.1-70b")
    assert l8.kv_bytes_per_token("bf16") == 128 * KIB
    assert l70.kv_bytes_per_token("bf16") == 320 * KIB
    assert l8.kv_bytes_per_token("fp8") == 64 * KIB
    # tensor parallel: kv heads split (8 -> 4 per GPU at tp=2), at least one per GPU (replicated at tp=16)
    assert l70.kv_bytes_per_token("bf16", 2) == 160 * KIB
    assert l70.kv_heads_per_gpu(8) == 1 and l70.kv_heads_per_gpu(16) == 1
    assert resolve_model("tiny-llama").kv_bytes_per_token("fp32") == 2 * 4 * 4 * 32 * 4


def test_parameter_counts():
    # published sizes: Llama-3.1-8B 8.03e9, 70B 70.6e9, Qwen2.5-7B 7.61e9, Qwen2.5-72B 72.7e9 (0.5 % tolerance)
    assert resolve_model("llama-3.1-8b").num_params == pytest.approx(8.03e9, rel=0.005)
    assert resolve_model("llama-3.1-70b").num_params == pytest.approx(70.6e9, rel=0.005)
    assert resolve_model("qwen2.5-7b").num_params == pytest.approx(7.61e9, rel=0.005)
    assert resolve_model("qwen2.5-72b").num_params == pytest.approx(72.7e9, rel=0.005)
    assert resolve_model("mistral-7b").num_params == pytest.approx(7.25e9, rel=0.005)
    # exact for the 8B: embedding + 32 x (attention + MLP + 2 norms) + final norm + LM head
    assert resolve_model("llama-3.1-8b").num_params == 8_030_261_248


def test_tiny_llama_shape():
    t = resolve_model("tiny-llama")
    assert (t.hidden_size, t.num_hidden_layers, t.num_attention_heads, t.num_key_value_heads,
            t.intermediate_size, t.vocab_size, t.max_position_embeddings, t.tie_word_embeddings) == \
        (256, 4, 8, 4, 704, 8192, 4096, False)
    assert t.head_dim == 32


def test_weight_bytes_and_flops():
    m = resolve_model("llama-3.1-8b")
    assert m.weight_bytes("bf16") == 2 * m.num_params
    assert m.weight_bytes("fp32") == 4 * m.num_params
    # fp8 halves the decoder's linear weights; embedding, LM head and norms stay bf16 (as vLLM's fp8 does)
    extra = m.weight_bytes("bf16") - 2 * m.linear_params
    assert m.weight_bytes("fp8") == m.linear_params + extra
    assert 0.5 < m.weight_bytes("fp8") / m.weight_bytes("bf16") < 0.6
    # tensor parallel splits everything except the norms
    norms = 2 * (32 * 2 * 4096 + 4096)
    assert m.weight_bytes("bf16", 2) == (m.weight_bytes("bf16") - norms) // 2 + norms
    assert m.linear_flops_per_token() == 2 * (m.linear_params + 128256 * 4096)
    assert m.linear_flops_per_token() == pytest.approx(2 * m.num_params, rel=0.07)


def test_tensor_parallel_checked():
    m = resolve_model("llama-3.1-8b")
    m.check_tensor_parallel(8)
    with pytest.raises(TwinInputError, match="tensor_parallel_size = 3"):
        m.check_tensor_parallel(3)


def test_hf_config_round_trip(tmp_path):
    m = resolve_model("qwen2.5-7b")
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**m.to_hf_config(), "model_type": "qwen2", "rope_theta": 1e6}))
    back = model_from_hf_config(path, name=m.name)
    assert back == m
    # a folder holding config.json resolves by path too
    assert resolve_model(str(tmp_path)).num_params == m.num_params


def test_hf_config_without_head_dim_and_kv_heads():
    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "intermediate_size": 11008, "vocab_size": 32000, "max_position_embeddings": 4096}
    m = model_from_hf_config(cfg, name="llama-2-7b")
    assert m.head_dim == 128 and m.num_key_value_heads == 32 and not m.tie_word_embeddings
    assert m.num_params == pytest.approx(6.74e9, rel=0.005)
    with pytest.raises(TwinInputError, match="vocab_size"):
        model_from_hf_config({k: v for k, v in cfg.items() if k != "vocab_size"})
    with pytest.raises(TwinInputError, match="num_local_experts"):
        model_from_hf_config({**cfg, "num_local_experts": 8})


def test_tied_embeddings():
    cfg = {"model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
           "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936,
           "max_position_embeddings": 32768, "tie_word_embeddings": True}
    m = model_from_hf_config(cfg, name="qwen2.5-0.5b")
    assert m.num_params == pytest.approx(0.494e9, rel=0.005)   # Qwen2.5-0.5B
    assert m.lm_head_params == 0 and m.lm_head_matmul_params == 151936 * 896
    assert m.weight_read_bytes() == m.weight_bytes()           # the tied matrix is streamed by the LM head


def test_bad_model_shape():
    with pytest.raises(TwinInputError, match="hidden_size"):
        ModelSpec(name="x", hidden_size=0, num_hidden_layers=1, num_attention_heads=1, num_key_value_heads=1,
                  head_dim=1, intermediate_size=1, vocab_size=1, max_position_embeddings=1)


GOOD_SPEC = """
name: my-gpu
peak_flops: {bf16: 500 TFLOPS, fp8: 1.0e+15}
memory_bandwidth_bytes_per_s: 2.5 TB/s
memory_bytes: 64 GiB
interconnect_bytes_per_s: 400e9
"""


def test_load_gpu_spec(tmp_path):
    p = tmp_path / "my-gpu.yaml"
    p.write_text(GOOD_SPEC)
    g = load_gpu_spec(p)
    assert isinstance(g, GpuSpec)
    assert g.flops("bf16") == 500e12 and g.flops("fp16") == 500e12 and g.flops("fp8") == 1e15
    assert g.memory_bandwidth_bytes_per_s == 2.5e12 and g.memory_bytes == 64 * 2**30
    assert g.interconnect_bytes_per_s == 400e9
    assert resolve_gpu(str(p)).name == "my-gpu"
    with pytest.raises(TwinInputError, match="fp32"):
        g.flops("fp32")


@pytest.mark.parametrize("edit, field", [
    (("memory_bytes: 64 GiB", "memory_bytes: 64 GiB\nfoo: 1"), "foo"),
    (("2.5 TB/s", "-2.5e12"), "memory_bandwidth_bytes_per_s"),
    (("2.5 TB/s", "0"), "memory_bandwidth_bytes_per_s"),
    (("2.5 TB/s", "2.5 GB"), "memory_bandwidth_bytes_per_s"),
    (("400e9", "lots"), "interconnect_bytes_per_s"),
    (("bf16: 500 TFLOPS", "bf16: -5"), "peak_flops"),
    (("bf16: 500 TFLOPS", "int4: 5"), "peak_flops"),
    (("memory_bytes: 64 GiB\n", ""), "memory_bytes"),
])
def test_bad_gpu_spec_names_the_field(tmp_path, edit, field):
    p = tmp_path / "bad.yaml"
    p.write_text(GOOD_SPEC.replace(*edit))
    with pytest.raises(TwinInputError) as e:
        load_gpu_spec(p)
    msg = str(e.value)
    assert field in msg and str(p) in msg and "\n" not in msg


def test_missing_spec_file():
    with pytest.raises(TwinInputError, match="does not exist"):
        resolve_gpu("/nonexistent/gpu.yaml")


def test_fidelity_models_match_their_hf_configs():
    # published sizes: Llama-2-7b 6.74B, Llama-2-70b 68.98B, CodeLlama-34b 33.74B (model cards / safetensors)
    assert resolve_model("llama-2-7b").num_params == 6_738_415_616
    assert resolve_model("meta-llama/Llama-2-70b-hf").num_params == pytest.approx(68.98e9, rel=0.001)
    assert resolve_model("codellama-34b").num_params == pytest.approx(33.74e9, rel=0.001)
    cfg = {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 22016, "max_position_embeddings": 16384,
           "num_attention_heads": 64, "num_hidden_layers": 48, "num_key_value_heads": 8, "vocab_size": 32000,
           "rope_theta": 1000000}                                   # codellama/CodeLlama-34b-hf config.json
    assert model_from_hf_config(cfg, name="codellama-34b") == \
        ModelSpec(**{**resolve_model("codellama-34b").__dict__, "hf_id": None})
    assert {"mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3", "llama-2-70b"} <= {m.name for m in list_models()}
    assert {"RTX-PRO-6000", "A100-PCIe-80GB", "L40S", "H20", "B200", "MI300X", "MI325X"} <= \
        {g.name for g in list_gpus()}
