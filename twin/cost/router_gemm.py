"""The MoE router's GEMM where vLLM runs it in FP32: ``router_fp32_s``, seconds per scheduled token (issue 33,
round 6: MiniMax-M2.5's prompt steps).

Facts:

* vLLM's MiniMax-M2 model (``vllm/model_executor/models/minimax_m2.py``, ``MiniMaxM2MoE``) builds its gate as
  ``ReplicatedLinear(hidden_size, num_local_experts, params_dtype=torch.float32)`` and calls it on
  ``hidden_states.to(torch.float32)``: every tensor-parallel rank computes the full router logits of every token
  as an FP32 GEMM (2 x hidden x experts FLOPs per token per MoE layer; MiniMax-M2.5: 2 x 3072 x 256 x 62 layers
  = 97.5 MFLOP per token). ``ModelSpec.router_fp32`` marks such models.
* How PyTorch runs an FP32 GEMM is ``torch.set_float32_matmul_precision``, which vLLM's GPU worker sets from
  ``VLLM_FLOAT32_MATMUL_PRECISION`` (default ``highest``): ``highest`` keeps true FP32 on the CUDA cores (the
  datasheet's FP32 rate: H100 SXM 67, B200 75 TFLOP/s), ``high`` lets cuBLAS use TF32 tensor cores (half the
  bf16 tensor rate on the Hopper and Blackwell datasheets), ``medium`` bf16 tensor cores. The server knob is
  ``server.float32_matmul_precision``. The InferenceX MiniMax-M2.5 B200 scripts set ``high`` from 2026-04-21
  (``minimaxm2.5_fp8_b200.sh`` 41ed82dc1, ``minimaxm2.5_fp4_b200.sh`` 13962fcfa); earlier scripts and the H100
  script leave vLLM's default.

Cost: ``router_fp32_s = 2 x MoE layers x hidden x experts / (rate x compute_efficiency)`` per scheduled token
(prefill and decode tokens alike), on every rank (TP does not split a replicated layer), added to the step as a
kernel of its own. No fitted value: the rate is the datasheet's and the efficiency the deployment's
``compute_efficiency`` (prior 0.6 of peak, as for every GEMM); 0 for a model whose router is not FP32. The
roofline's linear part already prices the router's weights at the tensor rate split by TP, at most 3.3 % of this
term (B200, TP1, a bf16 router; 1.7 % at TP2); it is left there. ``explain()`` shows the term as ``router_fp32_s``.
"""

from __future__ import annotations

from twin.errors import TwinInputError

FLOAT32_MATMUL_PRECISIONS = ("highest", "high", "medium")     # torch.set_float32_matmul_precision's values
VLLM_DEFAULT_FLOAT32_MATMUL_PRECISION = "highest"             # vllm.envs VLLM_FLOAT32_MATMUL_PRECISION


def fp32_gemm_rate(gpu, precision: str) -> float:
    """FLOP/s of an FP32 GEMM at ``precision`` (datasheet peaks): FP32 CUDA cores (``highest``), TF32 tensor
    cores at half the bf16 rate (``high``), bf16 tensor cores (``medium``)."""
    if precision == "highest":
        return gpu.flops("fp32")
    if precision == "high":
        return gpu.flops("bf16") / 2.0
    if precision == "medium":
        return gpu.flops("bf16")
    raise TwinInputError(f"float32_matmul_precision: {precision!r} is not one of "
                         f"{', '.join(FLOAT32_MATMUL_PRECISIONS)}")


def router_fp32_token_s(model, gpu, precision: str | None, compute_efficiency: float) -> float:
    """Seconds per scheduled token of the FP32 router GEMM on one rank (see the module docstring); 0 unless
    ``model.router_fp32``. ``precision`` None: vLLM's default (``highest``)."""
    precision = VLLM_DEFAULT_FLOAT32_MATMUL_PRECISION if precision is None else precision
    if precision not in FLOAT32_MATMUL_PRECISIONS:       # checked even where the model has no FP32 router
        fp32_gemm_rate(gpu, precision)
    if not (getattr(model, "router_fp32", False) and model.is_moe):
        return 0.0                                        # (a GPU without an FP32 rate is fine then)
    flops = 2.0 * model.moe_layers * model.hidden_size * model.num_experts
    return flops / (fp32_gemm_rate(gpu, precision) * compute_efficiency)


def explain_router(parts: dict[str, float], router_token_s: float, tokens: int) -> None:
    """Move the FP32 router's time of a step out of ``parts["overhead_s"]`` into ``router_fp32_s`` (only when
    set); the parts still add up."""
    if router_token_s:
        parts["router_fp32_s"] = router_token_s * tokens
        parts["overhead_s"] -= parts["router_fp32_s"]
