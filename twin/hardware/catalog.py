"""Hardware and model catalog: one import point for GPU specs (`gpus`), model shapes (`models`, `model_catalog`,
with mixture-of-experts routing in `moe`), activation/KV dtypes (`dtypes`) and weight formats (`quant`; per
layer group in `weight_formats`, read from a checkpoint's quantization_config by `hf_quant`). Parallel layouts
(TP, PP, DP, EP) are in `parallel`.

The catalogued entries live in `twin/hardware/data/gpus.yaml` and `twin/hardware/data/models.yaml`. Users add a
GPU with a small YAML spec file (`load_gpu_spec`) and a model with any Hugging Face `config.json`
(`model_from_hf_config`). `resolve_gpu` / `resolve_model` take a catalog name (case-insensitive, aliases
allowed) or a path.
"""

from __future__ import annotations

from twin.hardware.dtypes import DTYPE_BYTES, dtype_bytes, normalize_dtype
from twin.hardware.gpus import Datasheet, GpuSpec, gpu_from_dict, list_gpus, load_gpu_spec, resolve_gpu
from twin.hardware.model_catalog import list_models, model_from_hf_config, resolve_model
from twin.hardware.models import ModelSpec
from twin.hardware.quant import (
    WEIGHT_DTYPES,
    activation_dtype,
    compute_dtype,
    linear_weight_bytes,
    normalize_weight_dtype,
)

__all__ = [
    "DTYPE_BYTES", "Datasheet", "GpuSpec", "ModelSpec", "WEIGHT_DTYPES", "activation_dtype", "compute_dtype",
    "dtype_bytes", "gpu_from_dict", "linear_weight_bytes", "list_gpus", "list_models", "load_gpu_spec",
    "model_from_hf_config", "normalize_dtype", "normalize_weight_dtype", "resolve_gpu", "resolve_model",
]
