"""Roofline step-time model: a step's time from the FLOPs and bytes it moves on the model and GPU at hand.

How a step is costed (per GPU; with tensor parallelism the weights, FLOPs and KV heads are split tp ways):

* **Linear layers** (the GEMMs): FLOPs = 2 x decoder linear weights x scheduled tokens + 2 x LM-head weights x
  logit positions (every scheduled sequence computes 1 + num_spec_tokens logits; vLLM computes the LM head for
  a mid-prefill chunk's last position too). Bytes = every weight streamed once per step (the embedding table is
  only gathered, so it is left out unless tied to the LM head). One GEMM both streams its weights and computes,
  and the two overlap inside the kernel, so its time is ``max(compute, weight read)``.
* **Attention**: a sequence with n new tokens after c computed attends over c + j positions for its j-th token:
  FLOPs = 4 x layers x q_heads x head_dim x (n c + n(n+1)/2) (QK^T and PV); bytes = the sequence's whole
  context KV (c + n tokens) read once, as FlashAttention/paged attention tile it. Again ``max(compute, read)``:
  one fused kernel over the batch overlaps both (different CTAs serve different sequences).
* **GEMM efficiency by batch size** (the knee): a GEMM over M tokens runs at ``compute_efficiency x M / (M +
  gemm_half_tokens)`` of the tensor peak (tile quantisation, too few CTAs to fill the SMs, launch and epilogue
  costs), so the step time bends upwards well before the pure roofline's ridge point.
* **Mixture of experts / quantized weights**: FLOPs count the active weights (top-k experts) and run on the
  weight format's compute path; the weights read per step come from ``ModelSpec.weight_read_bytes(dtype, tp,
  tokens)``: a MoE step reads only the experts its tokens are expected to touch (``twin.hardware.moe``), and a
  quantized checkpoint reads its stored bytes (``twin.hardware.quant``). **KV write**: a memory-bound kernel.
* **Tensor-parallel all-reduce**: 2 per layer (after attention and after the MLP) of tokens x hidden activations;
  ring cost 2(tp-1)/tp x bytes over one direction of the per-GPU interconnect, plus a fixed latency per
  all-reduce (dominant for decode-sized messages), fused with RMSNorm where the server does (``kernel_path``);
  q/k norms over all heads add one per layer (``ModelSpec.qk_norm_allreduce``; its latency: ``qk_norm_allreduce``).
* **Engine-core CPU cost per step**: fixed per step (scheduling, input preparation, sampling, launches CUDA graphs
  do not hide), per sequence (scheduler bookkeeping, output processing), per token (positions, slot mappings).
* **Request path** (``request_path_s``, not a step cost): HTTP handling, tokenisation, the hand-off to the engine
  core, detokenisation and streaming; the simulation delays each request's first scheduling by it (TTFT and E2E,
  not TPOT or ITL), plus an exponential part with mean ``request_path_jitter_s`` (``twin.sim.request_path``).

Kernels run one after another, so the step time is the sum of those parts (``explain()`` splits each ``max(compute,
memory)`` into the compute time and the *exposed* memory time beyond it, so its parts add up to the total); a step
that no CUDA graph covers takes at least the host's time to launch it (``twin.cost.eager_steps``); an FP32 router
GEMM costs per token (``twin.cost.router_gemm``). Formats per layer group, MLA, sliding windows, sinks, a sparse
indexer and data/expert parallelism (the MoE dispatch and combine, ``moe_all2all_s``): ``deployment_terms``.
Efficiencies (``compute_efficiency``, ``memory_efficiency``) turn datasheet peaks into what kernels reach; a
calibrated profile replaces them and the overheads with fitted values.

This module holds the embedded serving defaults and the constructor, which resolves every term into per-GPU
constants once; the per-step arithmetic on those constants (the simulation's hot path and the fit's batched form) is
``twin.cost.roofline_steps``, and ``explain()``'s split of a step into parts is ``twin.cost.roofline_explain``.
"""

from __future__ import annotations

import functools

from twin.hardware.catalog import DTYPE_BYTES, GpuSpec, ModelSpec, normalize_dtype, resolve_gpu, resolve_model
from twin.cost.base import StepShape
from twin.cost.allreduce_routes import link_bytes_factor
from twin.cost.deployment_terms import (attention_terms, describe_roofline, moe_collective_terms,
                                       linear_seconds_per_token, roofline_bounds, roofline_parameters,
                                       RooflineConstants, windowed_step_time, group_rate_dtype)
from twin.cost.default_terms import FLAT_DEFAULTS, embedded, generation_term
from twin.cost.generations import GENERATION_DEFAULTS, REFERENCE_GENERATION, default_efficiencies
from twin.cost.decode_tokens import layer_token_split
from twin.cost.eager_steps import install as install_eager
from twin.cost.kernel_path import fused_allreduce_latency
from twin.cost.qk_norm_allreduce import qk_norm_step_s
from twin.cost.param_checks import check_fraction, check_nonneg
from twin.cost.router_gemm import router_fp32_token_s
from twin.cost.moe_terms import extra_factor, routed_expert_flops_per_token, routed_expert_read_bytes
from twin.cost.weight_stream import moe_weight_read_bytes
from twin.cost.expert_path_request import install as install_marlin_and_path
from twin.cost.prompt_experts import install as install_prompt_stream
from twin.cost.roofline_explain import RooflineExplain
from twin.cost.roofline_steps import RooflineSteps
from twin.cost.sync_host import exposed_seq_host_s
from twin.cost.kv_attention import kv_read_efficiency
from twin.cost.unsharded_decode import LINK_KEY, step_fixed_parts
from twin.hardware.parallel import ParallelLayout
from twin.hardware.weight_formats import resolve_formats

# Defaults. The serving terms are fitted on real vLLM (V1, async scheduling, CUDA graphs) on one H100 SXM: 20
# inference-perf runs of Llama-2-7B TP1, CodeLlama-34B TP2, Mixtral-8x7B TP2 and Llama-2-70B TP4 at 5-20 req/s
# (../shared/ground-truth; `twin.fitting`, reproduced and checked leave-one-out by benchmarks/fidelity_real.py,
# figures in docs/fidelity.md). Each is a physical quantity that carries to other GPUs as it stands
# (efficiencies are fractions of the datasheet peaks; overheads are host-side seconds):
# - memory 0.978 (+/- 0.04): weights and KV stream at nearly the HBM datasheet rate in vLLM's decode kernels.
# - compute 0.6: not identifiable from those runs (their prompts hit the prefix cache); large bf16 GEMMs on H100
#   run at ~600-700 of 989 dense TFLOP/s and measured prefill MFU is ~50-60 %. The GEMM knee (gemm_half_tokens)
#   fitted to 0 +/- 300 tokens: with compute at 0.6 the roofline's own ridge bends decode upwards early enough.
# - step overhead 1.74 ms (+/- 0.29) and 18.7 us per sequence (+/- 4.4): the engine core's CPU work per step
#   (schedule, prepare inputs, launch the graph, sample, process outputs) that the GPU does not hide.
# - request path 4.8 ms (+/- 1.2) plus an exponential 3.2 ms mean (+/- 1.1): HTTP, tokenisation, the hand-off
#   to the engine core, detokenisation and streaming, and their variability.
# - all-reduce latency 24.7 us (+/- 3.1) per all-reduce over NVLink: vLLM's custom all-reduce plus the per-layer
#   synchronisation of tensor parallelism. Over PCIe the same ratio as NCCL's small-message latencies (PCIe ~25
#   us vs NVLink ~8 us) gives 77 us. Interconnect efficiency 0.75 of one direction's bandwidth (NCCL bus
#   bandwidth on 8x H100 ~ 350 of 450 GB/s per direction). (Hopper efficiencies; others: twin.cost.generations)
DEFAULT_MEMORY_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY = GENERATION_DEFAULTS[REFERENCE_GENERATION]
DEFAULT_STEP_OVERHEAD_S, DEFAULT_PER_SEQ_OVERHEAD_S = 1.74e-3, 18.7e-6
DEFAULT_INTERCONNECT_EFFICIENCY, DEFAULT_GEMM_HALF_TOKENS = 0.75, 0.0
DEFAULT_PER_TOKEN_OVERHEAD_S = FLAT_DEFAULTS["per_token_overhead_s"]
DEFAULT_REQUEST_PATH_S, DEFAULT_REQUEST_PATH_JITTER_S = 4.8e-3, 3.2e-3
ALLREDUCE_LATENCY_FAST_S = 24.7e-6                                  # NVLink, Infinity Fabric (fitted)
ALLREDUCE_LATENCY_PCIE_S = ALLREDUCE_LATENCY_FAST_S * 25.0 / 8.0     # PCIe and anything else (by ratio)


def default_allreduce_latency_s(gpu: GpuSpec) -> float:
    fast = any(k in gpu.interconnect.lower() for k in ("nvlink", "infinity fabric", "xgmi"))
    return generation_term(gpu, "allreduce_latency_s", ALLREDUCE_LATENCY_FAST_S) if fast else ALLREDUCE_LATENCY_PCIE_S


class RooflineCostModel(RooflineSteps, RooflineExplain):
    """Step time from FLOPs and bytes (see the module docstring): the constructor resolves every term into per-GPU
    constants once; the per-step arithmetic on them is ``RooflineSteps``' (``twin.cost.roofline_steps``)."""

    name = "roofline"

    def __init__(
        self, model: ModelSpec | str, gpu: GpuSpec | str,
        tensor_parallel_size: int = 1, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
        compute_efficiency: float | None = None,      # None: the GPU generation's (twin.cost.generations)
        memory_efficiency: float | None = None,
        step_overhead_s: float = DEFAULT_STEP_OVERHEAD_S,
        per_seq_overhead_s: float | None = None,      # None: 18.7 us, + the sync host time (sync_host)
        allreduce_latency_s: float | None = None, interconnect_efficiency: float = DEFAULT_INTERCONNECT_EFFICIENCY,
        gemm_half_tokens: float = DEFAULT_GEMM_HALF_TOKENS,
        per_token_overhead_s: float | None = None,    # None: the generation's (twin.cost.default_terms)
        request_path_s: float = DEFAULT_REQUEST_PATH_S, request_path_jitter_s: float = DEFAULT_REQUEST_PATH_JITTER_S,
        moe_expert_efficiency: float | None = None, moe_active_expert_share: float | None = None,  # moe_terms:
        moe_expert_compute_efficiency: float | None = None,   # streams, routing share, FLOPs; None: the format's
        layer_overhead_s: float | None = None,        # per decoder layer per step (kernel latencies; s); as above
        layer_token_overhead_s: float | None = None,  # per token per layer, every TP rank (layer_tokens); as above
        layer_token_decode_share: float | None = None,   # ... the part decode tokens pay (decode_tokens); as above
        quant_weight_efficiency: float | None = None,  # quantized GEMMs' rate vs 16-bit ones; None: the format's
        kv_memory_efficiency: float | None = None,    # KV reads; None: the KV format's (kv_attention), else memory
        layout: ParallelLayout | None = None,         # data / pipeline / expert parallelism (twin.hardware.parallel)
        allreduce_fusion: bool = False,               # the all-reduce + RMSNorm fusion (kernel_path)
        moe_prompt_stream_efficiency: float | None = None,   # experts in prompt steps (prompt_experts); None: embedded
        fused_allreduce_latency_s: float | None = None,       # kernel_path; None: embedded
        unsharded_allreduce_link_s: float | None = None,      # unsharded_decode; None: embedded
        moe_layer_overhead_s: float | None = None,            # kernel_path; None: embedded
        expert_path_request_s: float | None = None,           # expert_path_request; None: embedded
        eager_layer_host_s: float | None = None, eager_moe_layer_host_s: float | None = None,  # eager_steps; as above
        cudagraph_tokens: tuple[int, int] | None = None,  # largest graphed (decode, mixed) steps; None: all graphed
        float32_matmul_precision: str | None = None,  # torch's, for FP32 GEMMs (twin.cost.router_gemm); None: vLLM's
        async_scheduling: bool = True, sync_seq_host_s: float | None = None,   # twin.cost.sync_host; None: embedded
        eager_structure: str | None = None,   # an eager step's host vs GPU time (eager_steps); None: EMBEDDED_STRUCTURE
    ) -> None:
        self.model = model = resolve_model(model)
        self.gpu = gpu = resolve_gpu(gpu)
        model.check_tensor_parallel(tensor_parallel_size)
        tp = self.tensor_parallel_size = tensor_parallel_size
        self.layout = layout = ParallelLayout.for_model(layout, tp, model)
        self.weight_formats = formats = resolve_formats(weight_dtype)
        self.weight_dtype = formats.attention      # one name: the uniform format, else the attention layers
        self.kv_dtype = normalize_dtype(kv_dtype, "kv_dtype")
        gen_memory, gen_compute = default_efficiencies(gpu)
        compute_efficiency = gen_compute if compute_efficiency is None else compute_efficiency
        memory_efficiency = gen_memory if memory_efficiency is None else memory_efficiency
        d = embedded(gpu, model, formats, per_token_overhead_s=per_token_overhead_s, layer_overhead_s=layer_overhead_s,
                     layer_token_overhead_s=layer_token_overhead_s, quant_weight_efficiency=quant_weight_efficiency,
                     moe_layer_overhead_s=moe_layer_overhead_s, fused_allreduce_latency_s=fused_allreduce_latency_s,
                     moe_expert_compute_efficiency=moe_expert_compute_efficiency, eager_layer_host_s=eager_layer_host_s,
                     moe_expert_efficiency=moe_expert_efficiency, unsharded_allreduce_link_s=unsharded_allreduce_link_s,
                     eager_moe_layer_host_s=eager_moe_layer_host_s, layer_token_decode_share=layer_token_decode_share,
                     moe_active_expert_share=moe_active_expert_share)
        self.moe_expert_efficiency, self.moe_expert_compute_efficiency, self.moe_active_expert_share = (check_fraction(
            k, d[k]) for k in ("moe_expert_efficiency", "moe_expert_compute_efficiency", "moe_active_expert_share"))
        self.layer_overhead_s = check_nonneg("layer_overhead_s", d["layer_overhead_s"])
        self.quant_weight_efficiency = check_fraction("quant_weight_efficiency", d["quant_weight_efficiency"])
        kv_memory_efficiency = kv_read_efficiency(gpu, self.kv_dtype, kv_memory_efficiency)   # None: the weights'
        self.kv_memory_efficiency = check_fraction(
            "kv_memory_efficiency", memory_efficiency if kv_memory_efficiency is None else kv_memory_efficiency)
        self.compute_efficiency = check_fraction("compute_efficiency", compute_efficiency)
        self.memory_efficiency = check_fraction("memory_efficiency", memory_efficiency)
        self.interconnect_efficiency = check_fraction("interconnect_efficiency", interconnect_efficiency)
        self.step_overhead_s = check_nonneg("step_overhead_s", step_overhead_s)
        self.per_seq_overhead_s = check_nonneg("per_seq_overhead_s", DEFAULT_PER_SEQ_OVERHEAD_S if
                                               per_seq_overhead_s is None else per_seq_overhead_s)
        sync = self.sync_seq_host_s = exposed_seq_host_s(async_scheduling, sync_seq_host_s, per_seq_overhead_s)
        self.per_token_overhead_s = check_nonneg("per_token_overhead_s", d["per_token_overhead_s"])
        self.request_path_s = check_nonneg("request_path_s", request_path_s)
        self.request_path_jitter_s = check_nonneg("request_path_jitter_s", request_path_jitter_s)
        self.gemm_half_tokens = check_nonneg("gemm_half_tokens", gemm_half_tokens)
        allreduce_latency_s = default_allreduce_latency_s(gpu) if allreduce_latency_s is None else allreduce_latency_s
        self.allreduce_latency_s = check_nonneg("allreduce_latency_s", allreduce_latency_s)
        self.allreduce_fusion, self.moe_layer_overhead_s = bool(allreduce_fusion), check_nonneg(
            "moe_layer_overhead_s", d["moe_layer_overhead_s"])
        self.fused_allreduce_latency_s = fused_allreduce_latency(self.allreduce_latency_s,
                                                                 d["fused_allreduce_latency_s"])
        act = formats.activation
        peak_act = gpu.flops(act) * self.compute_efficiency                   # LM head, attention
        bandwidth = gpu.memory_bandwidth_bytes_per_s * self.memory_efficiency
        shards, dp, share = layout.moe_shards, layout.dp, self.moe_active_expert_share
        # quantized GEMMs reach quant_weight_efficiency of 16-bit ones: their groups' FLOPs and the weight streams
        q = self.quant_weight_efficiency if formats.is_quantized else 1.0
        bandwidth = bandwidth * q if q != 1.0 else bandwidth                  # the weight streams

        # seconds per unit of work, per GPU; each layer group on its format's path (W8A8, FP4 where the GPU has it)
        self._k_linear = linear_seconds_per_token(model, gpu, formats, tp, self.compute_efficiency, q)
        self._k_lm_head = 2.0 * model.lm_head_matmul_params / tp / peak_act       # per logit position
        self._t_weights = model.weight_read_bytes(formats, tp, moe_shards=shards) / bandwidth
        self._moe_weights_s = None if not model.is_moe else functools.lru_cache(maxsize=8192)(lambda tokens:
            moe_weight_read_bytes(model, formats, tp, shards, dp, tokens, share) / bandwidth)    # MoE: every DP rank's
        self._moe_extra = extra_factor(self.moe_expert_efficiency) if model.is_moe else 0.0
        moe_compute_extra = extra_factor(self.moe_expert_compute_efficiency) if model.is_moe else 0.0
        self._k_linear_dense_eff, self._moe_weights_dense_eff = self._k_linear, self._moe_weights_s
        if moe_compute_extra:     # the routed experts' GEMMs at a fraction of the dense ones' rate
            peak_routed = gpu.flops(group_rate_dtype(gpu, formats, "routed_experts")) * self.compute_efficiency \
                * (q if formats.routed_experts != act else 1.0)
            self._k_linear += moe_compute_extra * routed_expert_flops_per_token(model, tp) / peak_routed
        self._moe_any_extra = bool(self._moe_extra or moe_compute_extra)
        if self._moe_extra:
            x, routed_format = self._moe_extra, formats.routed_experts
            self._moe_weights_s = functools.lru_cache(maxsize=8192)(
                lambda tokens: (moe_weight_read_bytes(model, formats, tp, shards, dp, tokens, share)
                                + x * routed_expert_read_bytes(model, routed_format, shards, tokens * dp, share))
                / bandwidth)
        kv_bandwidth = gpu.memory_bandwidth_bytes_per_s * self.kv_memory_efficiency    # the weights' unless set
        at = self._attention = attention_terms(model, gpu, act, self.kv_dtype, tp, self.compute_efficiency,
                                               kv_bandwidth)
        self._k_attn = at.k_attn_decode                                            # per (query, key) pair
        self._k_attn_mixed = at.k_attn_mixed                                       # MLA prefill: expanded form
        self._k_kv = at.k_kv                                                       # per KV token read/written
        self._window = at.window
        self._k_kv_write = at.k_kv + at.k_sink                                     # KV write (+ sink logits)
        if tp > 1:
            link = gpu.interconnect_bytes_per_s / 2.0 * self.interconnect_efficiency   # one direction
            n_allreduce = 2 * model.num_hidden_layers
            ring_bytes_per_token = link_bytes_factor(gpu, tp) * model.hidden_size * DTYPE_BYTES[act]   # routes
            self._t_allreduce = n_allreduce * (self.fused_allreduce_latency_s if self.allreduce_fusion
                                               else self.allreduce_latency_s) \
                + qk_norm_step_s(model, gpu, tp, self.allreduce_latency_s, d[LINK_KEY], formats.routed_experts)
            self._k_allreduce = n_allreduce * ring_bytes_per_token / link
        else:
            self._t_allreduce = self._k_allreduce = 0.0
        across = allreduce_latency_s == default_allreduce_latency_s(gpu) and layout.moe_shards > gpu.nvlink_domain_gpus
        a2a_latency = ALLREDUCE_LATENCY_PCIE_S if across else self.allreduce_latency_s   # across: the network's (prior)
        self._t_a2a, self._k_a2a = moe_collective_terms(model, gpu, layout, act, self.interconnect_efficiency,
                                                        a2a_latency)
        self._t_allreduce += self._t_a2a     # folded into one term on the hot path; explain() splits them
        self._k_allreduce += self._k_a2a
        self._t_gemm_knee = self._k_linear * self.gemm_half_tokens    # the M + half tokens of the knee
        self._t_moe, self.unsharded_floor_s, self._t_step = step_fixed_parts(self, tp, self._t_a2a, d)
        self.layer_token_overhead_s, self._k_layer_tok, self._k_seq_off = layer_token_split(d, model)   # decode_tokens
        self._k_fp32 = fp32 = router_fp32_token_s(model, gpu, float32_matmul_precision, self.compute_efficiency)
        self._k_seq = self.per_seq_overhead_s + sync - self._k_seq_off      # decode_tokens: the decodes' share
        self._k_tok = self.per_token_overhead_s + self._k_layer_tok + fp32
        self._decode_terms: dict[int, tuple[float, float, float, float, float]] = {}   # see _decode_terms_of
        self._constants = RooflineConstants(
            self._k_linear, self._k_lm_head, self._t_weights, self._moe_weights_s, at, self._k_kv_write,
            self._t_allreduce, self._k_allreduce, self._t_a2a, self._k_a2a, self._t_gemm_knee, self._t_step,
            self._k_seq, self._k_tok)
        if at.window:         # windowed / top-k layers: their own step time (keeps the plain path unchanged)
            self.step_time_from_sums = functools.partial(windowed_step_time, self._constants)
        install_marlin_and_path(self, expert_path_request_s)   # Marlin's padded blocks; the path's per-request time
        install_eager(self, model, d["eager_layer_host_s"], d["eager_moe_layer_host_s"], cudagraph_tokens,
                      eager_structure)
        install_prompt_stream(self, moe_prompt_stream_efficiency, bandwidth)   # experts' stream in prompt steps

    @property
    def constants(self) -> RooflineConstants:
        """The per-GPU deployment constants behind the step costs, fixed when the model is made (read-only)."""
        return self._constants

    # ------------------------------------------------------------------------------------------------ reports
    def describe(self) -> dict[str, object]:
        """The deployment's per-GPU constants behind the step costs, each named with its unit."""
        return describe_roofline(self)

    def bounds(self, step: StepShape) -> dict[str, float]:
        """Physical lower bounds at 100 % efficiency and no overhead: bytes / bandwidth and FLOPs / peak."""
        return roofline_bounds(self, step)

    def parameters(self) -> dict[str, object]:
        return roofline_parameters(self)

    def __repr__(self) -> str:
        return (f"RooflineCostModel({self.model.name} on {self.gpu.name} x{self.tensor_parallel_size}, w="
                f"{self.weight_dtype}, kv={self.kv_dtype}, ce={self.compute_efficiency}, me={self.memory_efficiency})")
