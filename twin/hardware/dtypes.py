"""Activation and KV-cache dtypes (bf16, fp16, fp8, fp32): names, aliases and bytes per element.

Weight formats (which add int8 and 4-bit checkpoints) are in `twin.hardware.quant`."""

from __future__ import annotations

import re
from typing import Any

from twin.errors import TwinInputError

DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}
DTYPE_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "torch.float16": "fp16",
    "fp8": "fp8", "float8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "e4m3": "fp8", "e5m2": "fp8",
    "float8_e4m3fn": "fp8",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "torch.float32": "fp32",
}


def normalize_dtype(value: Any, field_name: str = "dtype") -> str:
    """Canonical dtype name (bf16, fp16, fp8, fp32) or TwinInputError naming the field."""
    key = str(value).strip().lower() if value is not None else ""
    if key in DTYPE_ALIASES:
        return DTYPE_ALIASES[key]
    raise TwinInputError(f"{field_name}: {value!r} is not a known dtype; allowed: bf16, fp16, fp8, fp32")


def dtype_bytes(dtype: str, field_name: str = "dtype") -> int:
    return DTYPE_BYTES[normalize_dtype(dtype, field_name)]


def norm_name(name: str) -> str:
    """A catalog lookup key: lower case, spaces and underscores as dashes."""
    return re.sub(r"[\s_]+", "-", str(name).strip().lower())
