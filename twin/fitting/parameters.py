"""The cost parameters a fit on real server results adjusts: each a physical quantity with a unit, a plausible
range and a prior (the value before any fit), all of the roofline cost model (``twin.cost.roofline``).

Values are moved in fit units (ms, us, tokens) so that the optimiser's steps are of similar size."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FitParameter:
    name: str             # the RooflineCostModel keyword
    unit: str
    scale: float          # fit unit -> model unit (e.g. 1e-3 for a value fitted in ms and used in s)
    lower: float          # in fit units
    upper: float
    prior: float
    meaning: str

    def to_model(self, x: float) -> float:
        return float(x) * self.scale

    def from_model(self, v: float) -> float:
        return float(v) / self.scale


FIT_PARAMETERS: tuple[FitParameter, ...] = (
    FitParameter("memory_efficiency", "fraction of datasheet HBM bandwidth", 1.0, 0.3, 1.0, 0.8,
                 "weights and KV streamed per step"),
    FitParameter("compute_efficiency", "fraction of datasheet dense tensor peak", 1.0, 0.15, 1.0, 0.6,
                 "large GEMMs and attention"),
    FitParameter("gemm_half_tokens", "tokens", 1.0, 0.0, 2048.0, 64.0,
                 "batch tokens at which GEMMs reach half their large-batch efficiency"),
    FitParameter("step_overhead_s", "ms per step", 1e-3, 0.0, 20.0, 1.0,
                 "engine-core CPU time per step: schedule, prepare inputs, launch, sample"),
    FitParameter("per_seq_overhead_s", "us per sequence per step", 1e-6, 0.0, 200.0, 10.0,
                 "per-request bookkeeping and output processing in each step"),
    FitParameter("request_path_s", "ms per request", 1e-3, 0.0, 200.0, 5.0,
                 "HTTP, tokenisation, hand-off to the engine core, detokenisation and streaming"),
    FitParameter("request_path_jitter_s", "ms per request (mean)", 1e-3, 0.0, 200.0, 2.0,
                 "variable part of the request path: an exponential extra delay with this mean"),
    FitParameter("allreduce_latency_s", "us per all-reduce", 1e-6, 0.0, 200.0, 8.0,
                 "fixed cost of one tensor-parallel all-reduce (NVLink here)"),
)
# terms the multi-source fit adds (twin.fitting.joint): each a physical quantity; the scoped ones
# (``name@scope``, twin.fitting.scoped) hold on one GPU generation or on servers without async scheduling.
# Priors: what the cost model assumes without them (Blackwell kernels reach Hopper's fractions, MoE expert GEMMs
# the dense GEMMs' rate, paged attention streams KV like the weights, no async scheduling costs what it does).
EXTRA_PARAMETERS: tuple[FitParameter, ...] = (
    FitParameter("memory_efficiency@blackwell", "fraction of datasheet HBM bandwidth", 1.0, 0.3, 1.0, 0.978,
                 "weights streamed per step on Blackwell GPUs"),
    FitParameter("compute_efficiency@blackwell", "fraction of datasheet dense tensor peak", 1.0, 0.1, 1.0, 0.6,
                 "large GEMMs and attention on Blackwell GPUs"),
    FitParameter("moe_expert_efficiency", "fraction of the dense GEMMs' achieved rate", 1.0, 0.1, 1.0, 1.0,
                 "routed-expert grouped GEMMs (small per-expert GEMMs, token permutation, load imbalance)"),
    FitParameter("moe_expert_compute_efficiency", "fraction of the dense GEMMs' achieved rate", 1.0, 0.05, 1.0,
                 1.0, "routed-expert grouped-GEMM FLOPs (tiles padded per expert, load imbalance)"),
    FitParameter("layer_overhead_s", "us per decoder layer per step", 1e-6, 0.0, 100.0, 0.0,
                 "fixed GPU time per layer and step (kernel latencies a CUDA graph does not hide)"),
    FitParameter("kv_memory_efficiency", "fraction of datasheet HBM bandwidth", 1.0, 0.2, 1.0, 0.978,
                 "KV streamed by paged decode attention (grows with context)"),
    FitParameter("quant_weight_efficiency@fp8", "fraction of a 16-bit GEMM's achieved rate", 1.0, 0.2, 1.0, 1.0,
                 "FP8 W8A8 GEMMs: activation quantization and scaling around the FP8 tensor-core GEMM"),
    FitParameter("quant_weight_efficiency@int4", "fraction of a 16-bit GEMM's achieved rate", 1.0, 0.2, 1.0, 1.0,
                 "INT4 weight-only GEMMs (Marlin): in-kernel dequantization"),
    FitParameter("request_path_s@blackwell", "ms per request", 1e-3, 0.0, 200.0, 4.8,
                 "request path (HTTP, tokenisation, hand-off, streaming) on the Blackwell systems measured"),
    # issue 33, round 6: the request path of the runs one client measured (twin.workload.clients), so a fold does
    # not carry one source's per-request time into another's; prior: the embedded request path (inference-perf's)
    *(FitParameter(f"request_path_s@client_{c}", "ms per request", 1e-3, 0.0, 200.0, 4.8,
                   f"request path as the {c.replace('_', '-')} client measures it (client, host, HTTP, hand-off)")
      for c in ("vllm_bench", "inference_perf")),
    # issue 33, round 16 (twin.fitting.release_scope): the bench client's path on vLLM 0.10.x servers apart from the
    # later releases'; prior: the bench path's (no release-specific time); opt-in, not embedded
    FitParameter("request_path_s@client_vllm_bench+vllm_0.10", "ms per request", 1e-3, 0.0, 200.0, 4.8,
                 "request path as the vllm-bench client measures it on vLLM 0.10.x servers (release front end)"),
    # issue 33, round 17 (twin.fitting.path_layers): the bench client's path as a time per decoder layer of the
    # server's model, on top of request_path_s; prior 0 (no per-layer request time); opt-in, fit-only, not embedded
    *(FitParameter(f"request_path_layer_s{s}", "us per decoder layer per request", 1e-6, 0.0, 2000.0, 0.0,
                   f"request path per decoder layer of the server's model{d} (per-layer first-step work)")
      for s, d in (("", ""), ("@client_vllm_bench", ", as the vllm-bench client measures it"))),
    # issue 33, round 2: the silicon rows' light-load TTFT grows with the prompt by far more than the twin's
    # prefill FLOPs at any TP size (gpt-oss-120b on B200 at C=4, TP8: 25 ms at 1k tokens, 74 ms at 8k, against a
    # compute-bound ~2 ms for the extra 7k), i.e. a cost per token that tensor parallelism does not split.
    FitParameter("per_token_overhead_s", "us per scheduled token per step", 1e-6, 0.0, 50.0, 0.0,
                 "work per token every TP rank repeats (embedding, norms, rotary, activation quantisation, "
                 "MoE token permutation, input preparation); prior 0 = the pure roofline"),
    # issue 33, round 3: at C = 4 a single B200 decodes Llama-3.1-70B 5.3-5.9 ms slower than the roofline (FP8 and
    # NVFP4 alike, although NVFP4 streams half the bytes), MiniMax-M2.5 3.0 ms, gpt-oss-120b 0.3 ms, while at
    # TP >= 2 the same models are within ~1 ms: the gap scales with the decoder layers (80 / 62 / 36), not with
    # the weight bytes per GPU. On H100 the fitted all-reduce latency (2 per layer) carries such a per-layer
    # cost; on Blackwell the split of per-layer time into kernel latencies (any TP) and all-reduce is its own.
    FitParameter("layer_overhead_s@blackwell", "us per decoder layer per step", 1e-6, 0.0, 100.0, 0.0,
                 "fixed GPU time per layer and step on Blackwell at any TP (kernel latencies a CUDA graph does "
                 "not hide); prior 0 as on Hopper"),
    # multi-head latent attention's small kernels per layer (twin.cost.mla_decode; issue 33, round 8)
    FitParameter("layer_overhead_s@mla", "us per decoder layer per step", 1e-6, 0.0, 100.0, 0.0,
                 "fixed GPU time per layer and step of an MLA model (norms, rope, absorbed BMMs, latent cache "
                 "write, MLA decode at their minimum durations); prior 0: the roofline"),
    FitParameter("allreduce_latency_s@blackwell", "us per all-reduce", 1e-6, 0.0, 200.0, 24.7,
                 "fixed cost of one tensor-parallel all-reduce on Blackwell (NVLink 5); prior: Hopper's fitted "
                 "value"),
    # issue 33, round 4: at CONC = 4 the B200 rows' TTFT grows with the prompt by ~0.2 us per token per decoder
    # layer more than the twin's (four families, TP1-TP8, vLLM 0.10-0.19; twin.cost.layer_tokens), nearly
    # unsplit by TP; the H100 Llama rows show ~0 (their gap splits by TP).
    FitParameter("layer_token_overhead_s", "us per token per decoder layer", 1e-6, 0.0, 5.0, 0.0,
                 "work per scheduled token and layer every TP rank repeats; prior 0 = the pure roofline"),
    FitParameter("layer_token_overhead_s@blackwell", "us per token per decoder layer", 1e-6, 0.0, 5.0, 0.0,
                 "the same on Blackwell GPUs; prior 0 = the pure roofline"),
    # issue 33, round 4: the per-token cost on the Blackwell systems measured alone (the inference-perf H100 runs,
    # whose prompts mostly hit the prefix cache, carry their per-token work in the fitted step / sequence
    # overheads; an unscoped per-token cost fitted on the silicon rows moves them too)
    FitParameter("per_token_overhead_s@blackwell", "us per scheduled token per step", 1e-6, 0.0, 50.0, 0.0,
                 "work per token every TP rank repeats, on Blackwell; prior 0 = the pure roofline"),
    # issue 33, round 4 (twin.cost.kernel_path): the fused all-reduce + RMSNorm of the servers that ran it (every
    # B200 script of Llama, gpt-oss and Kimi passed the flag; vLLM's default from 0.18), and a fixed time per MoE
    # layer by the routed experts' kernel path (``@experts_<format>``, twin.fitting.scoped; a format held by one
    # family only is per family: it stays at its prior when that family is held out).
    FitParameter("fused_allreduce_latency_s", "us per fused all-reduce", 1e-6, 0.0, 100.0, 24.7,
                 "one tensor-parallel all-reduce fused with RMSNorm (FlashInfer); prior when not fitted: the "
                 "unfused latency (NCCL's LL figure, 7.8 / 10.2 / 15.0 us at 2 / 4 / 8 GPUs, is the exchange "
                 "alone; twin.cost.kernel_path)"),
    *(FitParameter(f"moe_layer_overhead_s@experts_{f}", "us per MoE layer per step", 1e-6, 0.0, 200.0, 0.0,
                   f"fixed time of a MoE layer's expert kernels ({f} experts: routing, permutation, activation "
                   f"quantisation, grouped-GEMM minimum, combine); prior 0") for f in ("bf16", "fp8", "int4",
                                                                                        "nvfp4", "mxfp4")),
    *(FitParameter(f"moe_expert_{kind}efficiency@experts_{f}", "fraction of the dense GEMMs' achieved rate", 1.0,
                   0.05, 1.0, 1.0, f"routed-expert grouped GEMMs' {what} on the {f} experts' kernel path")
      for f in ("bf16", "fp8", "int4", "nvfp4", "mxfp4")
      for kind, what in (("", "weight streams"), ("compute_", "FLOPs"))),
    # issue 33, round 5 (twin.cost.generation_experts): the block-FP8 experts' grouped GEMMs on Hopper (vLLM's SM90
    # FP8 MoE oracle: DeepGEMM / Triton / FlashInfer CUTLASS), apart from the same format on Blackwell
    FitParameter("moe_expert_compute_efficiency@hopper+experts_fp8", "fraction of the dense GEMMs' achieved rate",
                 1.0, 0.05, 1.0, 1.0, "routed-expert grouped-GEMM FLOPs of FP8 experts on Hopper GPUs"),
    FitParameter("moe_layer_overhead_s@hopper+experts_fp8", "us per MoE layer per step", 1e-6, 0.0, 200.0, 0.0,
                 "fixed time of a MoE layer's FP8 expert kernels on Hopper GPUs; prior 0"),
    # issue 33, round 11 (twin.cost.expert_path_request): the block-FP8 expert path's per-request time, per generation
    # (a held-out generation takes the other's, scaled by the FP8 tensor rates)
    *(FitParameter(f"expert_path_request_s@{g}+experts_fp8", "ms per request", 1e-3, 0.0, 100.0, 0.0,
                   f"time per request of a deployment with FP8 experts on {g} GPUs, beside the client's request "
                   f"path; prior 0") for g in ("hopper", "blackwell")),
    # round 12 (twin.cost.mla_request): the same on an MLA model's NVFP4 experts (Kimi-K2.5 NVFP4, vLLM 0.17.0)
    FitParameter("expert_path_request_s@mla+experts_nvfp4", "ms per request", 1e-3, 0.0, 100.0, 0.0,
                 "time per request of an MLA model with NVFP4 experts, beside the client's request path; prior 0"),
    # ... and the fused all-reduce of the MXFP4 experts' Blackwell path (gpt-oss-120b, twin.cost.mxfp4_path)
    FitParameter("fused_allreduce_latency_s@blackwell+experts_mxfp4", "us per fused all-reduce", 1e-6, 0.0, 100.0,
                 24.7, "fused all-reduce + RMSNorm on Blackwell servers of MXFP4-expert models; prior: the unfused "
                 "latency"),
    # issue 33, round 5 (twin.cost.eager_steps): a step that no CUDA graph covers takes at least the host's time
    # to launch its kernels; on B200 the 1k prompt steps outside the graphs sit on such a floor (~0.84 ms per
    # dense layer; ~1 ms more per MoE layer)
    *(FitParameter(f"{name}{scope}", "ms per decoder layer" if name == "eager_layer_host_s" else
                   "ms per MoE layer", 1e-3, 0.0, 10.0, 0.0, f"host time to launch one {what} eagerly (steps larger "
                   f"than the captured CUDA graphs){where}; prior 0 = graphs hide every launch")
      for name, what in (("eager_layer_host_s", "decoder layer"), ("eager_moe_layer_host_s", "MoE layer's extra kernels"))
      for scope, where in (("", ""), ("@blackwell", ", on Blackwell"))),
    FitParameter("step_overhead_s@sync", "ms per step", 1e-3, 0.0, 30.0, 1.74,
                 "engine-core CPU time per step exposed without async scheduling"),
    FitParameter("per_seq_overhead_s@sync", "us per sequence per step", 1e-6, 0.0, 300.0, 18.7,
                 "per-sequence CPU time per step exposed without async scheduling"),
)
ALL_PARAMETERS = FIT_PARAMETERS + EXTRA_PARAMETERS
PARAMETER_NAMES = tuple(p.name for p in FIT_PARAMETERS)
PARAMETERS_BY_NAME = {p.name: p for p in FIT_PARAMETERS + EXTRA_PARAMETERS}


def to_model_params(x: np.ndarray, names: tuple[str, ...] = PARAMETER_NAMES) -> dict[str, float]:
    return {n: PARAMETERS_BY_NAME[n].to_model(v) for n, v in zip(names, x)}


def from_model_params(params: dict[str, float], names: tuple[str, ...] = PARAMETER_NAMES) -> np.ndarray:
    return np.array([PARAMETERS_BY_NAME[n].from_model(params[n]) if n in params else PARAMETERS_BY_NAME[n].prior
                     for n in names])


def prior_params() -> dict[str, float]:
    return {p.name: p.to_model(p.prior) for p in FIT_PARAMETERS}
