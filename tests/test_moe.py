"""Mixture of experts and MLA: distinct experts per step, parameter counts against the published sizes, HF
config.json reading, and the roofline's weight reads between the active- and all-parameter bounds."""

from __future__ import annotations

import dataclasses

import pytest

from twin.cost.roofline import RooflineCostModel
from twin.core.scheduler_output import SchedulerOutput
from twin.errors import TwinInputError
from twin.hardware.catalog import model_from_hf_config, resolve_model
from twin.hardware.moe import expected_experts_touched, touched_fraction

MIXTRAL_CONFIG = {  # mistralai/Mixtral-8x7B-v0.1 config.json (shape fields)
    "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32,
    "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
    "rope_theta": 1e6, "tie_word_embeddings": False, "vocab_size": 32000, "torch_dtype": "bfloat16"}
QWEN3_MOE_CONFIG = {  # Qwen/Qwen3-30B-A3B config.json
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048, "head_dim": 128,
    "intermediate_size": 6144, "max_position_embeddings": 40960, "moe_intermediate_size": 768,
    "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
    "num_key_value_heads": 4, "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
    "tie_word_embeddings": False, "vocab_size": 151936}
DEEPSEEK_V3_CONFIG = {  # deepseek-ai/DeepSeek-V3 config.json
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
    "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
    "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1, "kv_lora_rank": 512,
    "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "vocab_size": 129280, "max_position_embeddings": 163840, "tie_word_embeddings": False,
    "num_nextn_predict_layers": 1}


def decode(batch: int, context: int = 512) -> SchedulerOutput:
    return SchedulerOutput(step_index=0, num_new_tokens=[1] * batch, num_computed_before=[context] * batch,
                           num_spec_tokens=[0] * batch)


def test_expected_experts_touched():
    assert expected_experts_touched(8, 2, 1) == 2.0                       # one token: its top-k
    assert expected_experts_touched(8, 2, 2) == pytest.approx(8 * (1 - 0.75**2))
    assert expected_experts_touched(128, 8, 0) == 0.0
    assert expected_experts_touched(128, 8, 10_000) == pytest.approx(128.0)
    counts = [expected_experts_touched(128, 8, t) for t in range(1, 200)]
    assert all(a < b for a, b in zip(counts, counts[1:])) and counts[-1] < 128
    assert touched_fraction(8, 2, None) == 1.0
    with pytest.raises(TwinInputError, match="num_experts_per_tok"):
        expected_experts_touched(8, 9, 1)


@pytest.mark.parametrize("name, total_b, active_b", [
    ("mixtral-8x7b", 46.7, 12.9),        # Mistral: 46.7B total, 12.9B active
    ("qwen3-30b-a3b", 30.5, 3.3),        # Qwen: 30.5B total, 3.3B activated
    ("deepseek-v3", 671, 37),            # DeepSeek: 671B total, 37B activated (MTP module excluded)
])
def test_published_sizes(name, total_b, active_b):
    m = resolve_model(name)
    assert m.is_moe
    assert m.num_params / 1e9 == pytest.approx(total_b, rel=0.005)
    assert m.active_params / 1e9 == pytest.approx(active_b, rel=0.02)


@pytest.mark.parametrize("name, config", [("mixtral-8x7b", MIXTRAL_CONFIG), ("qwen3-30b-a3b", QWEN3_MOE_CONFIG),
                                          ("deepseek-v3", DEEPSEEK_V3_CONFIG)])
def test_read_from_hf_config(name, config):
    m = model_from_hf_config(config, name=name)
    assert dataclasses.replace(resolve_model(name), hf_id=None) == m
    assert model_from_hf_config(m.to_hf_config(), name=name) == m     # round trip


def test_moe_config_errors():
    with pytest.raises(TwinInputError, match="num_experts_per_tok"):
        model_from_hf_config({k: v for k, v in MIXTRAL_CONFIG.items() if k != "num_experts_per_tok"})
    with pytest.raises(TwinInputError, match="mlp_only_layers"):
        model_from_hf_config({**QWEN3_MOE_CONFIG, "mlp_only_layers": [0, 1]})
    with pytest.raises(TwinInputError, match="num_experts_per_tok = 0"):
        dataclasses.replace(resolve_model("mixtral-8x7b"), num_experts_per_tok=0)


def test_mla_kv_is_the_compressed_latent():
    m = resolve_model("deepseek-v3")
    assert m.kv_bytes_per_token("bf16") == 61 * (512 + 64) * 2           # 70,272 B: ~1/57 of its GQA-free MHA
    assert m.kv_bytes_per_token("fp8", tensor_parallel_size=8) == 61 * 576  # replicated, not split, across tp
    assert m.attention_flops_per_position() == 61 * 128 * (2 * 576 + 2 * 512)


def test_flops_count_active_weights():
    m = resolve_model("mixtral-8x7b")
    expert = 3 * 4096 * 14336
    assert m.linear_params - m.active_linear_params == 32 * 6 * expert
    assert m.linear_flops_per_token(False) == 2 * m.active_linear_params


@pytest.mark.parametrize("name, gpu, tp", [("mixtral-8x7b", "H100-SXM", 2), ("qwen3-30b-a3b", "H100-SXM", 1),
                                           ("deepseek-v3", "H200-SXM", 8)])
def test_decode_weight_reads_between_active_and_all_parameter_bounds(name, gpu, tp):
    m = resolve_model(name)
    wd = "fp8" if name == "deepseek-v3" else "bf16"
    cm = RooflineCostModel(m, gpu, tensor_parallel_size=tp, weight_dtype=wd)
    bw = cm.gpu.memory_bandwidth_bytes_per_s * cm.memory_efficiency
    active_s = m.weight_read_bytes(wd, tp, tokens=1) / bw
    all_s = m.weight_read_bytes(wd, tp) / bw
    # tokens = 1 is exactly the active-parameter read: dense parts + top-k experts per layer
    routed = m.routed_expert_params * (2 if wd == "bf16" else 1) // tp
    assert m.weight_read_bytes(wd, tp) - m.weight_read_bytes(wd, tp, 1) == pytest.approx(
        routed * (1 - m.num_experts_per_tok / m.num_experts), abs=1)
    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    reads = [cm._moe_weights_s(b) for b in batches]
    assert reads[0] == active_s
    assert all(active_s <= r <= all_s for r in reads)
    assert all(a <= b for a, b in zip(reads, reads[1:]))                  # more tokens, more experts
    assert all(a < b for a, b in zip(reads[:6], reads[1:6]))              # strictly, until all are touched
    times = [cm.step_time_s(decode(b)) for b in batches]
    assert all(a < b for a, b in zip(times, times[1:]))                   # decode cost rises with batch
    for b, t in zip(batches, times):
        parts = cm.explain(decode(b))
        linear = parts["linear_compute_s"] + parts["weight_read_s"]
        assert active_s <= linear and parts["weight_read_s"] <= all_s
        assert t > active_s
    # a large prefill touches every expert: the all-parameter bound
    assert cm._moe_weights_s(8192) == pytest.approx(all_s, rel=1e-6)


def test_dense_model_reads_the_same_at_any_batch():
    m = resolve_model("llama-3.1-8b")
    assert m.weight_read_bytes("bf16", 1, 1) == m.weight_read_bytes("bf16", 1, 4096) == m.weight_read_bytes()
    assert RooflineCostModel(m, "H100-SXM")._moe_weights_s is None
