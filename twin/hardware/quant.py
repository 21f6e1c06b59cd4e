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
=========  ==========================================  =====================  ===============================

Only the decoder's linear layers are quantized; the embedding, LM head, norms and biases stay in the activation
dtype (bf16, or fp16 for an fp16 model), as all of these vLLM quantization methods keep them. Per-output-channel
scales are left out of the byte count (hidden / (hidden x hidden) of the weights: < 0.1 %).
"""

from __future__ import annotations

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
}
# weight format -> the dtype its matmuls run in, given the GPU has a tensor rate for it (else bf16)
COMPUTE_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "fp8": "fp8", "int8": "int8",
                 "int4": "bf16", "nf4": "bf16"}
WEIGHT_DTYPES = tuple(WEIGHT_BYTES_PER_PARAM)
_WEIGHT_ALIASES = {
    **DTYPE_ALIASES, "fp8-w8a8": "fp8", "w8a8-fp8": "fp8", "int8": "int8", "w8a8": "int8", "w8a8-int8": "int8",
    "int8-w8a8": "int8", "smoothquant": "int8",
    "int4": "int4", "w4a16": "int4", "awq": "int4", "gptq": "int4", "awq-marlin": "int4", "gptq-marlin": "int4",
    "awq_marlin": "int4", "gptq_marlin": "int4", "int4-awq": "int4", "int4-gptq": "int4",
    "nf4": "nf4", "bnb-4bit": "nf4", "bnb": "nf4", "bitsandbytes": "nf4", "bnb_4bit": "nf4", "fp4-bnb": "nf4",
}


def normalize_weight_dtype(value: Any, field_name: str = "weight_dtype") -> str:
    """Canonical weight format (bf16, fp16, fp32, fp8, int8, int4, nf4) or TwinInputError naming the field."""
    key = str(value).strip().lower() if value is not None else ""
    if key in _WEIGHT_ALIASES:
        return _WEIGHT_ALIASES[key]
    raise TwinInputError(f"{field_name}: {value!r} is not a known weight format; allowed: "
                         f"{', '.join(WEIGHT_DTYPES)} (awq, gptq = int4; bnb-4bit = nf4; w8a8 = int8)")


def activation_dtype(weight_dtype: str) -> str:
    """The dtype activations (and embeddings, LM head, norms) are kept in: quantized checkpoints as vLLM serves
    them quantize only the decoder's linear layers and keep the rest in bf16."""
    wd = normalize_weight_dtype(weight_dtype)
    return wd if wd in ("fp16", "fp32") else "bf16"


def compute_dtype(weight_dtype: str) -> str:
    """The tensor-core path the quantized linear layers run on (before falling back on a GPU without it)."""
    return COMPUTE_DTYPE[normalize_weight_dtype(weight_dtype)]


def is_quantized(weight_dtype: str) -> bool:
    return normalize_weight_dtype(weight_dtype) in ("fp8", "int8", "int4", "nf4")


def linear_weight_bytes(params: int, weight_dtype: str) -> int:
    """Bytes `params` linear weights take in `weight_dtype` (rounded up to a whole byte)."""
    b = WEIGHT_BYTES_PER_PARAM[normalize_weight_dtype(weight_dtype)] * params
    return -(-b.numerator // b.denominator)


def activation_bytes(weight_dtype: str) -> int:
    return DTYPE_BYTES[activation_dtype(weight_dtype)]
