"""MLA's down projections stay whole on every tensor-parallel rank (issue 33, round 5).

vLLM's DeepSeek-V2/V3 attention (``vllm/model_executor/models/deepseek_v2.py``, the class Kimi-K2.5 runs too)
builds the query and the joint KV down projections as one ``fused_qkv_a_proj = MergedColumnParallelLinear(
hidden, [q_lora_rank, kv_lora_rank + qk_rope_head_dim], ..., disable_tp=True)`` (without a q LoRA, the
``kv_a_proj_with_mqa`` alone, as a ``ReplicatedLinear``): not split across tensor-parallel ranks, so every rank
stores, streams and multiplies all of it. The up projections (q_b, kv_b) and o are split as usual. Per layer
that is hidden x (q_lora_rank + kv_lora_rank + qk_rope_head_dim) weights: Kimi-K2.5 / DeepSeek-V3 7168 x (1536 +
512 + 64) = 15.1M, 0.92G over 61 layers, 1.85 GB in bf16 on every rank, where splitting it 8 ways would put
0.23 GB there (at TP8 the twin streamed 1.6 GB per decode step too few on Kimi's INT4 checkpoint, ~0.2 ms).
The MoE router (``ReplicatedLinear`` too) is left sharded: 0.33 GB on Kimi, < 0.1 GB elsewhere.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from twin.hardware.quant import exact_weight_bytes


def replicated_attention_params(model: Any) -> int:
    """Attention weights of all layers that every tensor-parallel rank holds whole: MLA's down projections."""
    if not model.is_mla:
        return 0
    return model.num_hidden_layers * model.hidden_size * (model.q_lora_rank + model.kv_lora_rank
                                                          + model.qk_rope_head_dim)


def replicated_attention_bytes(model: Any, attention_format: str) -> Fraction:
    """Exact bytes of ``replicated_attention_params`` in the attention layers' format (one or two weight tensors
    per layer: kv_a, and q_a with a q LoRA)."""
    params = replicated_attention_params(model)
    if not params:
        return Fraction(0)
    tensors = model.num_hidden_layers * (2 if model.q_lora_rank else 1)
    return exact_weight_bytes(params, attention_format, tensors)
