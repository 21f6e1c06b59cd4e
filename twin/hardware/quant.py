"""Weight formats: how many bytes a decoder linear weight takes and which tensor-core path multiplies it.

A weight dtype names the checkpoint's linear-layer format as vLLM serves it:

=========  ==========================================  =====================  ===============================
name       checkpoints                                 compute path           bytes per weight
=========  ==========================================  =====================  ===============================
bf16/fp16  plain                                       bf16/fp16 tensor       2
fp32       plain                                       fp32 (CPU engine)      4
fp8        FP8 W8A8 (``--quantization fp8``,           fp8 tensor (weight-    1 (+ per-tensor scales)
           compressed-tensors, ModelOpt)               only bf16 without fp8)
int8       INT8 W8A8 (SmoothQuant / compressed-        int8 tensor            1 + fp32 scale per out channel
           tensors)                                    (bf16 without int8)
int4       AWQ / GPTQ W4A16, group size 128            bf16 tensor (Marlin    0.5 + (fp16 scale + 4-bit zero)
           (``awq_marlin``, ``gptq_marlin``)           dequantizes in-kernel) per 128 weights
nf4        bitsandbytes 4-bit (NF4, blocksize 64)      bf16 (dequantized)     0.5 + fp32 absmax per 64
int4-gN    INT4 W4A16 of group N with a 4-bit zero      bf16 tensor (Marlin)   0.5 + (2 + 0.5) / N
int4-gN-   INT4 W4A16 of group N, symmetric (compres-   bf16 tensor (Marlin)   0.5 + 2 / N (one bf16 scale
sym        sed-tensors pack-quantized, Kimi-K2.5 g32)                          per N, no zero point)
nvfp4      NVIDIA FP4 (ModelOpt, compressed-tensors     fp4 tensor (Blackwell  0.5 + 1 / 16 (one FP8 E4M3
           nvfp4-pack-quantized): E2M1 + scales        W4A4); elsewhere bf16  scale per 16) + one FP32
                                                       (Marlin FP4 dequant)   scale per tensor
mxfp4      OCP MX FP4 (gpt-oss experts): E2M1 +        fp4 tensor (Blackwell  0.5 + 1 / 32 (one E8M0
           one E8M0 scale per 32 values                block-scaled MMA);     scale per 32)
                                                       Hopper: dequantising
                                                       kernel at bf16
=========  ==========================================  =====================  ===============================

Sources: the NVFP4 and MXFP4 block layouts are NVIDIA's "Introducing NVFP4" technical blog (16-value blocks with
an E4M3 scale plus a per-tensor FP32 scale) and the OCP Microscaling Formats (MX) v1.0 specification (32-value
blocks with an E8M0 scale); the compute paths are vLLM's kernels (FlashInfer/CUTLASS FP4 GEMMs on SM100, Marlin
FP4 and the Triton MXFP4 MoE on SM90).

Only the decoder's linear layers are quantized; the embedding, LM head, norms and biases stay in the activation
dtype (bf16, or fp16 for an fp16 model), as all of these vLLM quantization methods keep them. Per-output-channel
scales are left out of the byte count (hidden / (hidden x hidden) of the weights: < 0.1 %).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from twin.errors import TwinInputError
from twin.hardware.dtypes import DTYPE_ALIASES, DTYPE_BYTES

INT4_GROUP_SIZE = 128          # AWQ and GPTQ default group size
NF4_BLOCK_SIZE = 64            # bitsandbytes 4-bit default blocksize (no double quantization)

# weight format -> bytes per weight of a quantized linear layer (exact fractions)
WEIGHT_BYTES_PER_PARAM: dict[str, Fraction] = {
    "bf16": Fraction(2), "fp16": Fraction(2), "fp32": Fraction(4), "fp8": Fraction(1), "int8": Fraction(1),
    "int4": Fraction(1, 2) + Fraction(2, INT4_GROUP_SIZE) + Fraction(1, 2 * INT4_GROUP_SIZE),
    "nf4": Fraction(1, 2) + Fraction(4, NF4_BLOCK_SIZE),
    "nvfp4": Fraction(1, 2) + Fraction(1, 16),
    "mxfp4": Fraction(1, 2) + Fraction(1, 32),
}
# bytes a format adds once per weight tensor (NVFP4's FP32 global scale)
PER_TENSOR_BYTES: dict[str, int] = {"nvfp4": 4}
_INT4_GROUP = re.compile(r"^(?:int4|w4a16|awq|gptq)-g(\d+)(-sym)?$")
# weight format -> the dtype its matmuls run in, given the GPU has a tensor rate for it (else bf16)
COMPUTE_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "fp8": "fp8", "int8": "int8",
                 "int4": "bf16", "nf4": "bf16", "nvfp4": "fp4", "mxfp4": "fp4"}
WEIGHT_DTYPES = tuple(WEIGHT_BYTES_PER_PARAM)
_WEIGHT_ALIASES = {
    **DTYPE_ALIASES, "fp8-w8a8": "fp8", "w8a8-fp8": "fp8", "int8": "int8", "w8a8": "int8", "w8a8-int8": "int8",
    "int8-w8a8": "int8", "smoothquant": "int8",
    "int4": "int4", "w4a16": "int4", "awq": "int4", "gptq": "int4", "awq-marlin": "int4", "gptq-marlin": "int4",
    "awq_marlin": "int4", "gptq_marlin": "int4", "int4-awq": "int4", "int4-gptq": "int4",
    "nf4": "nf4", "bnb-4bit": "nf4", "bnb": "nf4", "bitsandbytes": "nf4", "bnb_4bit": "nf4", "fp4-bnb": "nf4",
    "nvfp4": "nvfp4", "fp4": "nvfp4", "modelopt-fp4": "nvfp4", "nvfp4-pack-quantized": "nvfp4", "w4a4-nvfp4": "nvfp4",
    "mxfp4": "mxfp4", "mx-fp4": "mxfp4",
}


def normalize_weight_dtype(value: Any, field_name: str = "weight_dtype") -> str:
    """Canonical weight format (bf16, fp16, fp32, fp8, int8, int4, nf4, nvfp4, mxfp4, int4-g<N>[-sym]) or
    TwinInputError naming the field."""
    key = str(value).strip().lower().replace("_", "-") if value is not None else ""
    key = _WEIGHT_ALIASES.get(key, _WEIGHT_ALIASES.get(key.replace("-", "_"), key))
    if key in WEIGHT_BYTES_PER_PARAM:
        return key
    m = _INT4_GROUP.match(key)
    if m and 2 <= int(m.group(1)) <= 1 << 16:
        group, sym = int(m.group(1)), bool(m.group(2))
        return "int4" if group == INT4_GROUP_SIZE and not sym else f"int4-g{group}{'-sym' if sym else ''}"
    raise TwinInputError(f"{field_name}: {value!r} is not a known weight format; allowed: "
                         f"{', '.join(WEIGHT_DTYPES)}, int4-g<group>[-sym] (awq, gptq = int4; bnb-4bit = nf4; "
                         f"w8a8 = int8; fp4 = nvfp4)")


def bytes_per_weight(weight_dtype: str) -> Fraction:
    """Exact bytes one weight takes in a format, its block scales included (per-tensor scales apart)."""
    wd = normalize_weight_dtype(weight_dtype)
    if wd in WEIGHT_BYTES_PER_PARAM:
        return WEIGHT_BYTES_PER_PARAM[wd]
    m = _INT4_GROUP.match(wd)
    group = int(m.group(1))
    # a bf16/fp16 scale per group, and (asymmetric) a 4-bit zero point per group
    return Fraction(1, 2) + Fraction(2, group) + (0 if m.group(2) else Fraction(1, 2 * group))


def activation_dtype(weight_dtype: str) -> str:
    """The dtype activations (and embeddings, LM head, norms) are kept in: quantized checkpoints as vLLM serves
    them quantize only the decoder's linear layers and keep the rest in bf16."""
    wd = normalize_weight_dtype(weight_dtype)
    return wd if wd in ("fp16", "fp32") else "bf16"


def compute_dtype(weight_dtype: str) -> str:
    """The tensor-core path the quantized linear layers run on (before falling back on a GPU without it)."""
    wd = normalize_weight_dtype(weight_dtype)
    return COMPUTE_DTYPE.get(wd, "bf16")          # int4-g<N>: Marlin W4A16, bf16


def is_quantized(weight_dtype: str) -> bool:
    return normalize_weight_dtype(weight_dtype) not in ("bf16", "fp16", "fp32")


def exact_weight_bytes(params: int, weight_dtype: str, tensors: int = 0) -> Fraction:
    """Exact (fractional) bytes of `params` weights in `tensors` tensors of a format, per-tensor scales included."""
    wd = normalize_weight_dtype(weight_dtype)
    return bytes_per_weight(wd) * params + PER_TENSOR_BYTES.get(wd, 0) * tensors


def linear_weight_bytes(params: int, weight_dtype: str, tensors: int = 0) -> int:
    """Bytes `params` linear weights (in `tensors` weight tensors) take in `weight_dtype`, rounded up to a byte."""
    b = exact_weight_bytes(params, weight_dtype, tensors)
    return -(-b.numerator // b.denominator)


def activation_bytes(weight_dtype: str) -> int:
    return DTYPE_BYTES[activation_dtype(weight_dtype)]
