"""Per-deployment constants of the roofline for what production vLLM serves: weight formats per layer group,
attention variants and the parallel layout's MoE collectives. Computed once per cost model; the step-time hot
path only multiplies them by the step's sums.

* **Linear layers by format**: each layer group's active weights run on its format's tensor-core path
  (``WeightFormats.compute_dtype``: fp8 W8A8, fp4 on Blackwell, bf16 for W4A16 and for FP4 on a GPU without FP4
  tensor cores), so the seconds per token are sum over groups of 2 x active weights / tp / peak(path).
* **MLA** (DeepSeek-V2/V3, Kimi-K2): decode runs the absorbed form (scores over the kv_lora_rank + rope latent,
  values from the latent: 2 (r + rope) + 2 r FLOPs per head and position); prefill runs the expanded form
  (queries and keys of qk_nope + qk_rope dims, values of v_head_dim: 2 (nope + rope) + 2 v per head and
  position), as vLLM's MLA backends do. A step with any prefill chunk is costed at the prefill form.
* **Sliding window** (gpt-oss: 128 tokens on alternate layers): a windowed layer's query attends over at most
  ``window`` positions and reads at most ``window`` cached tokens per sequence, so for a step of T tokens over
  S sequences the windowed layers do min(pairs, T x window) pairs and read min(context + T, S x window + T)
  tokens of KV. The full layers are costed as before.
* **Attention sinks** (gpt-oss): one learned logit per head joins each softmax: 2 FLOPs per query token per
  head per layer (an exponential and an add), at the activation rate. Negligible, named so it can be seen.
* **Sparse attention indexer** (DeepSeek-V3.2): every layer's indexer scores all context positions
  (2 x index heads x index_head_dim FLOPs per query and position, fp8) and reads their indexer keys; the MLA
  attention then runs over the ``index_topk`` selected positions only (a window of top-k).
* **MoE collectives with data parallelism** (``twin.hardware.parallel``): seconds per MoE layer
  2 x latency + bytes per token x T / link.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from twin.hardware.catalog import GpuSpec, ModelSpec
from twin.cost.mxfp4_path import group_rate_dtype
from twin.hardware.dtypes import DTYPE_BYTES
from twin.hardware.mla_replicated import replicated_attention_params
from twin.hardware.parallel import ParallelLayout
from twin.hardware.weight_formats import GROUPS, WeightFormats


@dataclass(frozen=True)
class AttentionTerms:
    """Seconds per unit of attention work on one GPU (see the module docstring)."""

    k_attn_decode: float       # per (query, key) pair of the full-context layers, pure decode steps
    k_attn_mixed: float        # the same in steps with a prefill chunk
    k_kv: float                # per KV token written (all layers)
    k_kv_full: float           # per KV token read by the full-context layers (and the indexer)
    window: int                # 0: no windowed layers
    k_attn_win: float          # per pair of the windowed layers
    k_kv_win: float            # per KV token read by the windowed layers
    k_sink: float              # per scheduled token (attention sinks)
    k_index: float             # per pair of the sparse indexer


def linear_seconds_per_token(model: ModelSpec, gpu: GpuSpec, formats: WeightFormats, tp: int,
                             compute_efficiency: float, quant_efficiency: float = 1.0) -> float:
    """Seconds one scheduled token takes through the decoder's linear layers on one GPU (LM head apart),
    each group at its format's tensor rate (a quantized group's at ``quant_efficiency`` of it). Groups sharing
    a rate are summed before dividing."""
    active, whole = model.active_group_params(), replicated_attention_params(model)
    by_peak: dict[float, int] = {}
    for g in GROUPS:
        if g == "lm_head" or not active[g]:
            continue
        peak = gpu.flops(group_rate_dtype(gpu, formats, g)) * compute_efficiency
        if quant_efficiency != 1.0 and getattr(formats, g) != formats.activation:
            peak = peak * quant_efficiency
        # MLA's down projections run whole on every rank (twin.hardware.mla_replicated): tp x their share
        by_peak[peak] = by_peak.get(peak, 0) + active[g] + (whole * (tp - 1) if g == "attention" else 0)
    return sum(2 * params / tp / peak for peak, params in by_peak.items())


def attention_terms(model: ModelSpec, gpu: GpuSpec, act: str, kv_dtype: str, tp: int, compute_efficiency: float,
                    bandwidth: float) -> AttentionTerms:
    m = model
    peak_act = gpu.flops(act) * compute_efficiency
    heads, layers = m.num_attention_heads, m.num_hidden_layers
    decode_per_head = m.attention_flops_per_position() / layers / heads
    if m.is_mla:
        prefill_per_head = 2 * (m.qk_nope_head_dim + m.qk_rope_head_dim) + 2 * m.v_head_dim
    else:
        prefill_per_head = decode_per_head
    kv_layer = m.kv_bytes_per_token_per_layer(kv_dtype, tp)
    k_kv = m.kv_bytes_per_token(kv_dtype, tp) / bandwidth
    k_sink = 2.0 * layers * heads / tp / peak_act if m.attention_sinks else 0.0
    if m.index_topk:          # sparse MLA: every layer attends over the top-k positions (absorbed form)
        index_key = m.index_head_dim + 4 * -(-m.index_head_dim // 128)
        return AttentionTerms(
            k_attn_decode=0.0, k_attn_mixed=0.0, k_kv=k_kv, k_kv_full=layers * index_key / bandwidth,
            window=m.index_topk, k_attn_win=layers * heads * decode_per_head / tp / peak_act,
            k_kv_win=layers * (kv_layer - index_key) / bandwidth, k_sink=k_sink,
            k_index=2.0 * layers * m.index_n_heads * m.index_head_dim / gpu.flops("fp8") / compute_efficiency)
    full, win = m.full_attention_layers, m.sliding_window_layers
    per_layer = heads / tp / peak_act
    if not win:               # the long-standing form (bit-identical to it)
        k_decode = m.attention_flops_per_position() / tp / peak_act
        k_mixed = k_decode if not m.is_mla else layers * heads * prefill_per_head / tp / peak_act
        return AttentionTerms(k_decode, k_mixed, k_kv, k_kv, 0, 0.0, 0.0, k_sink, 0.0)
    return AttentionTerms(
        k_attn_decode=full * per_layer * decode_per_head, k_attn_mixed=full * per_layer * prefill_per_head,
        k_kv=k_kv, k_kv_full=full * kv_layer / bandwidth, window=m.sliding_window,
        k_attn_win=win * per_layer * decode_per_head, k_kv_win=win * kv_layer / bandwidth, k_sink=k_sink,
        k_index=0.0)


def moe_collective_terms(model: ModelSpec, gpu: GpuSpec, layout: ParallelLayout, act: str,
                         interconnect_efficiency: float, latency_s: float) -> tuple[float, float]:
    """(seconds per step, seconds per scheduled token) of the MoE dispatch and combine with dp > 1."""
    per_token = layout.moe_comm_bytes_per_token(model, DTYPE_BYTES[act])
    if not per_token:
        return 0.0, 0.0
    link = moe_link_bytes_per_s(gpu, layout) * interconnect_efficiency
    return model.moe_layers * 2.0 * latency_s, model.moe_layers * per_token / link


def moe_link_bytes_per_s(gpu: GpuSpec, layout: ParallelLayout) -> float:
    """One direction of the link the MoE collectives use: the GPU's interconnect within its domain, the
    scale-out network when tp x dp spans several domains."""
    if layout.moe_shards <= gpu.nvlink_domain_gpus:
        return gpu.interconnect_bytes_per_s / 2.0
    return gpu.scale_out_bytes_per_s


@dataclass(frozen=True, slots=True)
class RooflineConstants:
    """A roofline cost model's per-GPU deployment constants, fixed when the model is made
    (``RooflineCostModel.constants``); seconds per unit of work, as its step time sums them."""

    linear_s_per_token: float            # the GEMMs' compute (routed experts' extra compute included)
    lm_head_s_per_logit: float
    weight_read_s: float                 # every weight streamed once (MoE: all experts)
    moe_weight_read_s: Callable[[int], float] | None   # MoE: the weights a step of that many tokens reads
    attention: AttentionTerms
    kv_write_s_per_token: float          # reshape-and-cache (+ attention-sink logits)
    collectives_s_per_step: float        # TP all-reduce latency + MoE all-to-all latency
    collectives_s_per_token: float       # their bytes per token
    moe_all2all_s_per_step: float        # the MoE all-to-all's share of the two above
    moe_all2all_s_per_token: float
    gemm_knee_s: float                   # linear_s_per_token x gemm_half_tokens
    overhead_s_per_step: float           # step overhead + layer overhead x layers
    overhead_s_per_seq: float
    overhead_s_per_token: float


def describe_roofline(cm) -> dict[str, object]:
    """A roofline cost model's per-GPU deployment constants, each named with its unit."""
    m, lay, c = cm.model, cm.layout, cm.constants
    at = c.attention
    bw = cm.gpu.memory_bandwidth_bytes_per_s * cm.memory_efficiency
    out: dict[str, object] = {
        "weight_formats": cm.weight_formats.as_dict(),
        "compute_paths": {g: group_rate_dtype(cm.gpu, cm.weight_formats, g)
                          for g in ("attention", "dense_mlp", "routed_experts", "shared_experts")},
        "layout": lay.as_dict(),
        "weight_bytes_per_gpu": m.weight_bytes(cm.weight_formats, cm.tensor_parallel_size,
                                               moe_shards=lay.moe_shards),
        "weight_read_all_experts_s": c.weight_read_s,
        "kv_bytes_per_token_per_gpu": m.kv_bytes_per_token(cm.kv_dtype, cm.tensor_parallel_size),
        "linear_s_per_token": c.linear_s_per_token,
        "attention_s_per_pair_decode": at.k_attn_decode,
        "attention_s_per_pair_prefill": at.k_attn_mixed,
        "moe_all2all_s_per_step": c.moe_all2all_s_per_step,
        "moe_all2all_s_per_token": c.moe_all2all_s_per_token,
    }
    if at.window:
        out.update(attention_window_tokens=at.window, windowed_attention_s_per_pair=at.k_attn_win,
                   windowed_kv_read_s_per_token=at.k_kv_win, full_kv_read_s_per_token=at.k_kv_full)
    if at.k_index:
        out["sparse_indexer_s_per_pair"] = at.k_index
    if at.k_sink:
        out["attention_sink_s_per_token"] = at.k_sink
    out["memory_bandwidth_bytes_per_s_effective"] = bw
    if getattr(cm, "expert_path_request_s", 0.0):     # per request, on the request path (twin.cost.expert_path_request)
        out["expert_path_request_s_per_request"] = cm.expert_path_request_s
    return out


def roofline_parameters(cm) -> dict[str, object]:
    """A roofline cost model's parameters (``RooflineCostModel.parameters``)."""
    return {
        "kind": cm.name, "model": cm.model.name, "gpu": cm.gpu.name,
        "tensor_parallel_size": cm.tensor_parallel_size, "weight_dtype": cm.weight_dtype,
        "kv_dtype": cm.kv_dtype, "compute_efficiency": cm.compute_efficiency,
        "memory_efficiency": cm.memory_efficiency, "step_overhead_s": cm.step_overhead_s,
        "per_seq_overhead_s": cm.per_seq_overhead_s, "allreduce_latency_s": cm.allreduce_latency_s,
        "interconnect_efficiency": cm.interconnect_efficiency, "gemm_half_tokens": cm.gemm_half_tokens,
        "per_token_overhead_s": cm.per_token_overhead_s, "request_path_s": cm.request_path_s,
        "request_path_jitter_s": cm.request_path_jitter_s,
        "moe_expert_efficiency": cm.moe_expert_efficiency, "kv_memory_efficiency": cm.kv_memory_efficiency,
        "moe_expert_compute_efficiency": cm.moe_expert_compute_efficiency,
        "layer_overhead_s": cm.layer_overhead_s, "quant_weight_efficiency": cm.quant_weight_efficiency,
        "layer_token_overhead_s": cm.layer_token_overhead_s,
        **({"allreduce_fusion": True, "fused_allreduce_latency_s": cm.fused_allreduce_latency_s}
           if cm.allreduce_fusion else {}),
        **({"moe_layer_overhead_s": cm.moe_layer_overhead_s} if cm.moe_layer_overhead_s else {}),
        **({"async_scheduling": False, "sync_seq_host_s": cm.sync_seq_host_s} if cm.sync_seq_host_s else {}),
        **({"eager_layer_host_s": cm.eager_layer_host_s, "eager_moe_layer_host_s": cm.eager_moe_layer_host_s,
            "cudagraph_tokens": list(cm.cudagraph_tokens)} if cm.eager_host_s_per_step else {}),
        **({} if cm.weight_formats.is_uniform else {"weight_formats": cm.weight_formats.as_dict()}),
        **({} if cm.layout.is_trivial else {"layout": cm.layout.as_dict()}),
    }


def roofline_bounds(cm, step) -> dict[str, float]:
    """Physical lower bounds of a roofline cost model's step at 100 % efficiency and no overhead: bytes /
    bandwidth and FLOPs / peak."""
    nn, cc = list(step.num_new_tokens), list(step.num_computed_before)
    tokens = sum(nn)
    pairs = sum(n * c + n * (n + 1) / 2 for n, c in zip(nn, cc))
    logits = len(nn) + sum(step.num_spec_tokens)
    m, tp, f = cm.model, cm.tensor_parallel_size, cm.weight_formats
    flop_time = (linear_seconds_per_token(m, cm.gpu, f, tp, 1.0) * tokens
                 + (2.0 * m.lm_head_matmul_params * logits + m.attention_flops_per_position() * pairs)
                 / cm.gpu.flops(f.activation) / tp)
    kv = m.kv_bytes_per_token(cm.kv_dtype, tp)
    read_bytes = m.weight_read_bytes(f, tp, tokens, moe_shards=cm.layout.moe_shards,
                                     moe_tokens=tokens * cm.layout.dp) + kv * (sum(cc) + 2 * tokens)
    return {"flop_bound_s": flop_time, "memory_bound_s": read_bytes / cm.gpu.memory_bandwidth_bytes_per_s}


def windowed_attention(at: AttentionTerms, n_seqs: int, tokens: int, context: float,
                       pairs: float) -> tuple[float, float]:
    """(attention compute, KV read) seconds of a step of a model with sliding-window (or top-k sparse) layers."""
    w = at.window
    win_pairs = tokens * w if tokens * w < pairs else pairs
    kv_tokens = context + tokens
    win_kv = n_seqs * w + tokens if n_seqs * w + tokens < kv_tokens else kv_tokens
    k_full = at.k_attn_decode if tokens == n_seqs else at.k_attn_mixed
    return (k_full * pairs + at.k_attn_win * win_pairs + at.k_index * pairs,
            at.k_kv_full * kv_tokens + at.k_kv_win * win_kv)


def windowed_step_time(c: RooflineConstants, n_seqs: int, tokens: int, context: int, new_x_context: int,
                       new_squared: int, spec_tokens: int) -> float:
    """``RooflineCostModel.step_time_from_sums`` of a model with sliding-window or top-k sparse layers: the
    same terms, with the attention of ``windowed_attention``."""
    if not n_seqs:
        return 0.0
    if tokens == n_seqs == new_squared:
        pairs = context + tokens
    else:
        pairs = new_x_context + 0.5 * (new_squared + tokens)
    linear = c.linear_s_per_token * tokens + c.gemm_knee_s + c.lm_head_s_per_logit * (n_seqs + spec_tokens)
    t_weights = c.weight_read_s if c.moe_weight_read_s is None else c.moe_weight_read_s(tokens)
    if linear < t_weights:
        linear = t_weights
    attention, kv_read = windowed_attention(c.attention, n_seqs, tokens, context, pairs)
    if attention < kv_read:
        attention = kv_read
    return (linear + attention + c.kv_write_s_per_token * tokens
            + (c.collectives_s_per_step + c.collectives_s_per_token * tokens)
            + (c.overhead_s_per_step + c.overhead_s_per_seq * n_seqs + c.overhead_s_per_token * tokens))
