"""The MXFP4 expert kernel path by GPU generation (gpt-oss-120b; issue 33, round 5).

vLLM picks the fused-MoE kernel of MXFP4 experts (``Mxfp4MoeBackend``, ``vllm/model_executor/layers/quantization/
mxfp4.py`` and ``fused_moe/oracle``) by the GPU's SM version and launch flags. Two things of that path (the first
applied here, the second a value in ``twin.cost.generation_experts``'s (GPU generation, expert format) table):

* **Tensor rate of MXFP4 experts on Blackwell: FP8's, not FP4's.** On SM100 the expert GEMMs run in FlashInfer's
  TensorRT-LLM-gen kernel (``trtllm_fp4_block_scale_moe``) with the activations quantised on the fly: to MXFP8
  when the server sets ``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1`` (backend ``SM100_FI_MXFP4_MXFP8_TRTLLM``; every
  gpt-oss B200 script of InferenceX sets it: ``gptoss_fp4_b200_docker.sh`` 4b860b78e, ``single_node/
  gptoss_fp4_b200.sh`` d2c2acb19), else in bf16 (``SM100_FI_MXFP4_BF16``, vLLM's default on SM100). A Blackwell
  tensor-core MMA reaches the datasheet's FP4 rate only with both operands in FP4 (PTX ``tcgen05.mma``
  block-scaled ``.kind::mxf4`` / ``.kind::mxf4nvf4``: E2M1 operands only); an E2M1 x E4M3 product takes the
  mixed ``.kind::mxf8f6f4``, which runs at the FP8 rate (NVIDIA PTX ISA, "tcgen05.mma" kinds and their operand
  types; B200 datasheet: FP8 4.5, FP4 9 dense PFLOP/s). So MXFP4 groups on Blackwell run at the FP8
  rate here (``MXFP4_BLACKWELL_RATE``; the bf16-activation default would be slower still and is not modelled as a
  knob). Elsewhere the format's own path stands (Hopper: Marlin / Triton W4A16 at the bf16 rate,
  ``twin.hardware.gpus``). Prefill only: decode streams the 4.25-bit weights (``twin.hardware.quant``).
* **Fused all-reduce + RMSNorm of the B200 MXFP4 path** (``fused_allreduce_latency_s``, s per all-reduce, where
  the server fuses: ``twin.cost.kernel_path``): held out by configuration, fitted on the gpt-oss-120b B200
  v0.15.1 rows (docs/fidelity.md, "Round 5: gpt-oss-120b"): the TP1 -> TP >= 2 step of those rows at C = 4 is
  11-13 us per all-reduce, not the unfused 24.7 us (72 all-reduces per step: 1.8 ms of a 3.0 ms TPOT). Kept to
  this path because the other B200 families with the same flag (Llama-3.1-70B, Kimi-K2.5) need per-layer time
  the twin does not yet name, which the unfused latency carries for them today (docs/fidelity.md, "Round 4: MoE
  experts by kernel path"). A fold that holds these rows out prices it at its fitted unfused latency less the one
  kernel the fusion removes (x 5 / 6: ``twin.fitting.fused_allreduce_prior``; issue 33, round 10).
"""

from __future__ import annotations

from typing import Any

from twin.cost.generations import gpu_generation
from twin.hardware.weight_formats import format_family

MXFP4_BLACKWELL_RATE = "fp8"          # MXFP4 x MXFP8 on tcgen05: .kind::mxf8f6f4, the FP8 tensor rate


def group_rate_dtype(gpu: Any, formats: Any, group: str) -> str:
    """The tensor rate (a ``GpuSpec.flops`` dtype) that a layer group's matmuls run at on ``gpu``: the format's
    compute path, except MXFP4 on Blackwell at the FP8 rate (see the module docstring)."""
    if format_family(getattr(formats, group)) == "mxfp4" and gpu_generation(gpu) == "blackwell":
        return MXFP4_BLACKWELL_RATE
    return formats.compute_dtype(group)

