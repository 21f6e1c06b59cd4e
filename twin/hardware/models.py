"""Model shapes and the numbers derived from them: parameters, weight bytes (stored and read per step), KV bytes
per token and FLOPs per token, for dense and mixture-of-experts decoders, with standard (GQA) or multi-head
latent attention (MLA, DeepSeek-V2/V3). Weight formats are in `quant`, expert routing in `moe`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from twin.errors import TwinInputError
from twin.hardware.dtypes import dtype_bytes
from twin.hardware.mla_replicated import replicated_attention_bytes
from twin.hardware.moe import touched_fraction
from twin.hardware.weight_formats import WeightFormats, ceil_div, group_bytes, resolve_formats

_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
             "intermediate_size", "vocab_size", "max_position_embeddings")
_OPTIONAL = ("num_experts", "num_experts_per_tok", "num_shared_experts", "moe_intermediate_size",
             "shared_expert_intermediate_size", "first_k_dense_layers", "kv_lora_rank", "q_lora_rank",
             "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "sliding_window", "sliding_window_layers",
             "index_topk", "index_n_heads", "index_head_dim")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer (gated MLP, RoPE, RMSNorm) by its shape.

    Mixture of experts: ``num_experts`` routed experts (0: dense) of ``moe_intermediate_size`` each, of which
    ``num_experts_per_tok`` run per token, plus ``num_shared_experts`` that always run (their total width
    ``shared_expert_intermediate_size``, or num_shared_experts x moe_intermediate_size when 0); the first
    ``first_k_dense_layers`` layers keep a dense MLP of ``intermediate_size``.
    MLA: ``kv_lora_rank`` > 0 caches one compressed latent (kv_lora_rank + qk_rope_head_dim) per token per layer.
    Sliding window: ``sliding_window_layers`` of the layers attend over the last ``sliding_window`` tokens only
    (gpt-oss: every other layer, window 128); ``attention_sinks``: a learned per-head sink logit in the softmax
    (gpt-oss); ``qk_norm_allreduce``: the q and k RMSNorms normalise over all heads (MiniMax-M2's ``use_qk_norm``
    with ``qk_norm_type: per_layer``), so with tensor parallelism each layer all-reduces their variances (vLLM's
    ``MiniMaxText01RMSNormTP.forward_qk``: one all-reduce of 2 fp32 values per token, not the all-reduce + RMSNorm
    fusion's pattern); ``router_fp32``: vLLM computes the router logits as an FP32 GEMM on every rank (MiniMax-M2's
    gate, ``twin.cost.router_gemm``). Sparse attention (DeepSeek-V3.2): an indexer of ``index_n_heads`` x ``index_head_dim`` scores every
    context token and each query attends over the ``index_topk`` best.
    ``checkpoint_formats``: the published checkpoint's weight format per layer group (from its
    ``quantization_config``), None for a plain 16-bit checkpoint. ``checkpoint_kv_dtype``: the KV cache format the
    checkpoint declares (a ModelOpt checkpoint's ``kv_cache_quant_algo``), which vLLM takes under ``--kv-cache-dtype
    auto`` from vLLM PR #29980 (December 2025); None: the checkpoint declares none."""

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False          # q/k/v projections carry a bias (Qwen2)
    hf_id: str | None = None
    aliases: tuple[str, ...] = field(default=(), compare=False)
    num_experts: int = 0
    num_experts_per_tok: int = 0
    num_shared_experts: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    first_k_dense_layers: int = 0
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int = 0
    sliding_window_layers: int = 0
    attention_sinks: bool = False
    qk_norm_allreduce: bool = False       # q/k RMSNorm over all heads: one more TP all-reduce per layer (MiniMax-M2)
    router_fp32: bool = False             # vLLM runs the MoE router GEMM in FP32 (MiniMax-M2: twin.cost.router_gemm)
    index_topk: int = 0
    index_n_heads: int = 0
    index_head_dim: int = 0
    checkpoint_formats: WeightFormats | None = field(default=None, compare=False)
    checkpoint_kv_dtype: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for f in _REQUIRED:
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise TwinInputError(f"model {self.name}: {f} = {v!r}: must be a positive integer")
        for f in _OPTIONAL:
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise TwinInputError(f"model {self.name}: {f} = {v!r}: must be an integer >= 0")
        if self.num_attention_heads % self.num_key_value_heads:
            raise TwinInputError(
                f"model {self.name}: num_key_value_heads = {self.num_key_value_heads}: must divide "
                f"num_attention_heads ({self.num_attention_heads})")
        if self.num_experts:
            if not 1 <= self.num_experts_per_tok <= self.num_experts:
                raise TwinInputError(f"model {self.name}: num_experts_per_tok = {self.num_experts_per_tok}: "
                                     f"must be in [1, num_experts = {self.num_experts}]")
            if not self.moe_intermediate_size:
                raise TwinInputError(f"model {self.name}: moe_intermediate_size = 0: must be a positive integer "
                                     f"for a mixture-of-experts model")
            if self.first_k_dense_layers >= self.num_hidden_layers:
                raise TwinInputError(f"model {self.name}: first_k_dense_layers = {self.first_k_dense_layers}: "
                                     f"must be below num_hidden_layers ({self.num_hidden_layers})")
        if self.kv_lora_rank and not (self.qk_rope_head_dim and self.qk_nope_head_dim and self.v_head_dim):
            raise TwinInputError(f"model {self.name}: kv_lora_rank = {self.kv_lora_rank} (MLA) needs "
                                 f"qk_rope_head_dim, qk_nope_head_dim and v_head_dim > 0")
        if self.sliding_window_layers > self.num_hidden_layers or (self.sliding_window_layers
                                                                   and not self.sliding_window):
            raise TwinInputError(f"model {self.name}: sliding_window_layers = {self.sliding_window_layers}: must be "
                                 f"at most num_hidden_layers ({self.num_hidden_layers}), with sliding_window > 0")
        if self.index_topk and not (self.index_n_heads and self.index_head_dim):
            raise TwinInputError(f"model {self.name}: index_topk = {self.index_topk} (sparse attention) needs "
                                 f"index_n_heads and index_head_dim > 0")

    # --- shape ------------------------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def full_attention_layers(self) -> int:
        """Layers that attend over the whole context (the rest use the sliding window)."""
        return self.num_hidden_layers - self.sliding_window_layers

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def moe_layers(self) -> int:
        return self.num_hidden_layers - self.first_k_dense_layers if self.is_moe else 0

    @property
    def dense_layers(self) -> int:
        return self.num_hidden_layers - self.moe_layers

    @property
    def shared_expert_width(self) -> int:
        return self.shared_expert_intermediate_size or self.num_shared_experts * self.moe_intermediate_size

    # --- parameter counts -------------------------------------------------------------------------------
    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def attention_weight_params_per_layer(self) -> int:
        """q, k, v and o projections (MLA: q down/up, the joint kv down projection, kv up, o)."""
        h, heads = self.hidden_size, self.num_attention_heads
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            q = h * self.q_lora_rank + self.q_lora_rank * heads * qk if self.q_lora_rank else h * heads * qk
            kv = (h * (self.kv_lora_rank + self.qk_rope_head_dim)
                  + self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim))
            return q + kv + heads * self.v_head_dim * h
        return h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h

    @property
    def attention_bias_params_per_layer(self) -> int:
        return self.q_dim + 2 * self.kv_dim if self.attention_bias else 0

    @property
    def attention_params_per_layer(self) -> int:
        return self.attention_weight_params_per_layer + self.attention_bias_params_per_layer

    @property
    def mlp_params_per_layer(self) -> int:
        """A dense layer's gate, up and down projections."""
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def expert_params(self) -> int:
        """One routed expert's gate, up and down projections."""
        return 3 * self.hidden_size * self.moe_intermediate_size

    @property
    def routed_expert_params(self) -> int:
        """All routed experts of all MoE layers."""
        return self.moe_layers * self.num_experts * self.expert_params

    @property
    def moe_always_params_per_layer(self) -> int:
        """What every token of a MoE layer multiplies through besides its routed experts: router, shared experts."""
        return self.hidden_size * self.num_experts + 3 * self.hidden_size * self.shared_expert_width

    @property
    def norm_params_per_layer(self) -> int:
        mla = self.q_lora_rank + self.kv_lora_rank if self.is_mla else 0
        return 2 * self.hidden_size + mla

    @property
    def lm_head_params(self) -> int:
        """Stored LM-head parameters: 0 when tied to the embedding."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def linear_params(self) -> int:
        """Weights of the decoder's linear layers, all experts included, LM head excluded."""
        return (self.num_hidden_layers * self.attention_weight_params_per_layer
                + self.dense_layers * self.mlp_params_per_layer
                + self.moe_layers * self.moe_always_params_per_layer + self.routed_expert_params)

    @property
    def active_linear_params(self) -> int:
        """Linear weights one token multiplies through: the routed experts it is sent to only."""
        return self.linear_params - self.moe_layers * (self.num_experts - self.num_experts_per_tok) * \
            self.expert_params

    @property
    def num_params(self) -> int:
        norms = self.num_hidden_layers * (self.norm_params_per_layer + self.attention_bias_params_per_layer)
        return self.embedding_params + self.linear_params + norms + self.hidden_size + self.lm_head_params

    @property
    def active_params(self) -> int:
        return self.num_params - (self.linear_params - self.active_linear_params)

    @property
    def lm_head_matmul_params(self) -> int:
        """The LM head's matmul size (vocab x hidden), whether or not it is tied to the embedding."""
        return self.vocab_size * self.hidden_size

    @property
    def mlp_activation_width(self) -> int:
        """Width of one token's widest MLP intermediate (per GPU x tp): a dense MLP's, or top-k experts' plus
        the shared experts' in a MoE layer (the fused MoE kernel's intermediate cache)."""
        moe = self.num_experts_per_tok * self.moe_intermediate_size + self.shared_expert_width if self.is_moe else 0
        return max(self.intermediate_size if self.dense_layers else 0, moe)

    def active_group_params(self) -> dict[str, int]:
        """Weights of each layer group one token multiplies through (its top-k routed experts only)."""
        return {"attention": self.num_hidden_layers * self.attention_weight_params_per_layer,
                "dense_mlp": self.dense_layers * self.mlp_params_per_layer,
                "routed_experts": self.moe_layers * self.num_experts_per_tok * self.expert_params,
                "shared_experts": self.moe_layers * 3 * self.hidden_size * self.shared_expert_width,
                "router": self.moe_layers * self.hidden_size * self.num_experts,
                "lm_head": self.lm_head_matmul_params}

    def linear_flops_per_token(self, include_lm_head: bool = True) -> int:
        """2 FLOPs per active weight per token through the linear layers (bias adds and norms are negligible)."""
        return 2 * (self.active_linear_params + (self.lm_head_matmul_params if include_lm_head else 0))

    def attention_flops_per_position(self) -> int:
        """FLOPs for one query attending over one key position, all layers: QK^T and PV, 2 each per element.
        MLA (absorbed, as vLLM decodes it) scores over the latent plus rope dims and reads values from the latent."""
        if self.is_mla:
            per_head = 2 * (self.kv_lora_rank + self.qk_rope_head_dim) + 2 * self.kv_lora_rank
            return self.num_hidden_layers * self.num_attention_heads * per_head
        return 4 * self.num_hidden_layers * self.num_attention_heads * self.head_dim

    # --- bytes --------------------------------------------------------------------------------------------
    def check_tensor_parallel(self, tensor_parallel_size: int) -> None:
        tp = tensor_parallel_size
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise TwinInputError(f"tensor_parallel_size = {tp!r}: must be a positive integer")
        if self.num_attention_heads % tp:
            raise TwinInputError(
                f"tensor_parallel_size = {tp}: must divide num_attention_heads ({self.num_attention_heads}) "
                f"of model {self.name}")
        kv = self.num_key_value_heads
        if kv % tp and tp % kv:
            raise TwinInputError(
                f"tensor_parallel_size = {tp}: must divide, or be a multiple of, num_key_value_heads ({kv}) "
                f"of model {self.name}")

    def kv_heads_per_gpu(self, tensor_parallel_size: int = 1) -> int:
        """KV heads each GPU holds: kv_heads / tp, at least 1 (vLLM replicates KV heads when tp > kv_heads)."""
        return max(1, -(-self.num_key_value_heads // tensor_parallel_size))

    def kv_bytes_per_token_per_layer(self, kv_dtype: str = "bf16", tensor_parallel_size: int = 1) -> int:
        """KV-cache bytes one token takes in one layer on one GPU: 2 (K, V) x kv heads per GPU x head_dim x
        bytes; MLA: (kv_lora_rank + qk_rope_head_dim) x bytes on every rank (vLLM replicates the latent cache
        across tensor-parallel ranks), plus with sparse attention the indexer's key (index_head_dim fp8 values
        and one fp32 scale per 128, vLLM's indexer cache)."""
        b = dtype_bytes(kv_dtype, "kv_dtype")
        if self.is_mla:
            indexer = self.index_head_dim + 4 * -(-self.index_head_dim // 128) if self.index_topk else 0
            return (self.kv_lora_rank + self.qk_rope_head_dim) * b + indexer
        return 2 * self.kv_heads_per_gpu(tensor_parallel_size) * self.head_dim * b

    def kv_bytes_per_token(self, kv_dtype: str = "bf16", tensor_parallel_size: int = 1) -> int:
        """KV-cache bytes one token takes on one GPU over all layers (sliding-window layers included: a token
        inside the window is held by every layer)."""
        return self.num_hidden_layers * self.kv_bytes_per_token_per_layer(kv_dtype, tensor_parallel_size)

    def weight_bytes(self, weight_dtype: "str | WeightFormats" = "bf16", tensor_parallel_size: int = 1,
                     moe_shards: int | None = None) -> int:
        """Weight bytes on one GPU. The decoder's linear weights are stored in the format of their layer group
        (`weight_formats`; a plain dtype name puts them all in it); embedding, biases and norms in the activation
        dtype. Everything but the norms is sharded across tensor-parallel ranks (vocab-parallel embedding); the
        routed experts are sharded over ``moe_shards`` GPUs (default: tensor_parallel_size; with data or expert
        parallelism vLLM spreads them over all tp x dp ranks); MLA's down projections are on every rank whole.
        """
        tp = tensor_parallel_size
        w = moe_shards or tp
        f = resolve_formats(weight_dtype)
        ab = dtype_bytes(f.activation)
        gb = group_bytes(self, f)
        linear = sum(gb[g] for g in ("attention", "dense_mlp", "routed_experts", "shared_experts", "router"))
        sharded_other = (self.embedding_params + self.num_hidden_layers * self.attention_bias_params_per_layer) * ab \
            + gb["lm_head"]
        replicated = (self.num_hidden_layers * self.norm_params_per_layer + self.hidden_size) * ab
        # MLA's down projections are whole on every rank (twin.hardware.mla_replicated)
        whole = replicated_attention_bytes(self, f.attention) if tp > 1 else 0
        linear -= whole
        sharded_linear = ceil_div(linear, tp) if w == tp else (ceil_div(linear - gb["routed_experts"], tp)
                                                                + ceil_div(gb["routed_experts"], w))
        sharded_linear += ceil_div(whole, 1)
        return sharded_linear + ceil_div(sharded_other, tp) + replicated

    def weight_read_bytes(self, weight_dtype: "str | WeightFormats" = "bf16", tensor_parallel_size: int = 1,
                          tokens: int | None = None, moe_shards: int | None = None,
                          moe_tokens: int | None = None, active_share: float = 1.0) -> int:
        """Bytes of weights one forward pass of `tokens` tokens streams from memory on one GPU: all weights
        except the embedding table (only looked-up rows are read; a tied LM head is read as the LM head) and,
        in a MoE model, except the routed experts no token was sent to (see `moe`). tokens=None: every expert
        (the all-parameter bound); the active-parameter bound is tokens=1. ``moe_tokens``: the tokens the MoE
        layers route (with data parallelism, every DP rank's: the experts are shared), default `tokens`.
        ``active_share``: the share of the experts their routing draws from (``moe.touched_fraction``; 1: all)."""
        tp = tensor_parallel_size
        w = moe_shards or tp
        f = resolve_formats(weight_dtype)
        ab = dtype_bytes(f.activation)
        not_streamed = 0 if self.tie_word_embeddings else self.embedding_params * ab
        total = self.weight_bytes(f, tp, w) - not_streamed // tp
        if not self.is_moe or tokens is None:
            return total
        routed_tokens = tokens if moe_tokens is None else moe_tokens
        untouched = 1.0 - touched_fraction(self.num_experts, self.num_experts_per_tok, routed_tokens, active_share)
        return total - int(untouched * ceil_div(group_bytes(self, f)["routed_experts"], 1) / w)

    # --- conversions --------------------------------------------------------------------------------------
    def to_hf_config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "hidden_size": self.hidden_size, "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads, "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim, "intermediate_size": self.intermediate_size, "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings, "attention_bias": self.attention_bias,
        }
        if self.is_moe:
            cfg.update(num_experts=self.num_experts, num_experts_per_tok=self.num_experts_per_tok,
                       moe_intermediate_size=self.moe_intermediate_size)
            if self.num_shared_experts:
                cfg["n_shared_experts"] = self.num_shared_experts
            if self.shared_expert_intermediate_size:
                cfg["shared_expert_intermediate_size"] = self.shared_expert_intermediate_size
            if self.first_k_dense_layers:
                cfg["first_k_dense_replace"] = self.first_k_dense_layers
        if self.is_mla:
            cfg.update(kv_lora_rank=self.kv_lora_rank, q_lora_rank=self.q_lora_rank or None,
                       qk_rope_head_dim=self.qk_rope_head_dim, qk_nope_head_dim=self.qk_nope_head_dim,
                       v_head_dim=self.v_head_dim)
        if self.hf_id:
            cfg["_name_or_path"] = self.hf_id
        return cfg

    def summary(self) -> dict[str, Any]:
        out = {"name": self.name, "hf_id": self.hf_id, "params_b": self.num_params / 1e9,
               "layers": self.num_hidden_layers, "hidden": self.hidden_size,
               "heads": self.num_attention_heads, "kv_heads": self.num_key_value_heads,
               "kv_kib_per_token_bf16": self.kv_bytes_per_token("bf16") / 1024,
               "max_position_embeddings": self.max_position_embeddings}
        if self.is_moe:
            out.update(active_params_b=self.active_params / 1e9, experts=self.num_experts,
                       experts_per_tok=self.num_experts_per_tok)
        return out
