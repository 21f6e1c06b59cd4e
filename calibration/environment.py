"""Where samples were measured: dtype names, the device's name and its twin-catalog entry, and the
environment record (library versions, threads, load, model shape, git commit) saved with every profile."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from twin.hardware.host import cpu_name

if TYPE_CHECKING:
    from calibration.engine import ModelRunner

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}


def torch_dtype(name: str | torch.dtype | None, device: str) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    if name in (None, "auto"):
        return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    key = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "half": "fp16"}.get(str(name), str(name))
    if key not in TORCH_DTYPES:
        raise ValueError(f"dtype: {name!r} is not one of {', '.join(TORCH_DTYPES)}")
    return TORCH_DTYPES[key]


def device_name(device: str | torch.device) -> str:
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return cpu_name()


def catalog_device(device: str | torch.device, name: str | None = None) -> str | None:
    """The twin catalog's name for the device (``H200-SXM`` for "NVIDIA H200"), or None if unknown."""
    from twin.hardware.catalog import list_gpus, resolve_gpu
    from twin.errors import TwinInputError

    if torch.device(device).type == "cpu":
        return "CPU"
    name = name or device_name(device)
    try:
        return resolve_gpu(name).name
    except TwinInputError:
        pass
    key = name.lower().replace("nvidia", "").replace("geforce", "").strip()
    best = None
    for g in list_gpus():
        for alias in (g.name, *g.aliases):
            a = alias.lower().replace("nvidia", "").strip()
            if a and re.search(rf"(?<![a-z0-9]){re.escape(a)}(?![a-z0-9])", key) and (best is None or len(a) > best[0]):
                best = (len(a), g.name)
    return best[1] if best else None


def _git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parents[1]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment(runner: ModelRunner) -> dict[str, Any]:
    """Where and how the samples were measured."""
    import scipy

    dev = runner.device
    env: dict[str, Any] = {
        "device_type": dev.type,
        "device_name": device_name(dev),
        "catalog_device": catalog_device(dev),
        "dtype": DTYPE_NAMES.get(runner.dtype, str(runner.dtype)),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "cpu_count": os.cpu_count(),
        "cpu": cpu_name(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "block_size": runner.block_size,
        "num_kv_blocks": runner.kv_cache.num_blocks,
        "cuda_graphs": getattr(runner, "decode_graphs", None) is not None,
        "kv_cache_bytes": runner.kv_cache.nbytes,
        "model_params": runner.shape.num_params,
        "model_shape": asdict(runner.shape),
        "git_commit": _git_commit(),
    }
    if hasattr(os, "getloadavg"):
        env["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        env.update(gpu_total_memory_bytes=props.total_memory, gpu_sm_count=props.multi_processor_count,
                   gpu_capability=f"{props.major}.{props.minor}")
    return env
