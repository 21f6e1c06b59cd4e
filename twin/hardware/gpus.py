"""GPU specs: dense peak FLOP/s per dtype, memory, bandwidth and interconnect, each catalog entry with the
datasheet figures it was taken from (`datasheet`). Catalog entries are in `data/gpus.yaml`; users add a GPU with
a small YAML spec file (`load_gpu_spec`). `resolve_gpu` takes a catalog name (case-insensitive, aliases allowed)
or a path."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from twin.errors import TwinInputError, did_you_mean
from twin.hardware.dtypes import norm_name, normalize_dtype
from twin.hardware.name_probe import is_file, quoted
from twin.hardware.spec_input import SubfieldError, parse_quantity, positive, validation_message
from twin.yaml_input import load_packaged_yaml, not_a_file, parse_yaml, read_text

_DATA = Path(__file__).parent / "data"
RATE_DTYPES = ("bf16", "fp16", "fp8", "fp4", "int8", "fp32")
_RATE_ALIASES = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16",
                 "fp8": "fp8", "float8": "fp8", "fp4": "fp4", "nvfp4": "fp4", "int8": "int8", "fp32": "fp32",
                 "float32": "fp32"}
# dtype of a matmul -> the rates that can run it, best first: fp16 and bf16 stand in for each other; fp8 or int8
# weights on a GPU without that tensor path run weight-only (dequantized to bf16, as vLLM's Marlin kernels do).
# FP4 (NVFP4, MXFP4) runs on the FP4 tensor cores of Blackwell; elsewhere (Hopper, Ampere) vLLM serves it with
# dequantising kernels (Marlin FP4, the Triton MXFP4 MoE), at the bf16 rate.
_FALLBACK = {"bf16": ("bf16", "fp16"), "fp16": ("fp16", "bf16"), "fp8": ("fp8", "bf16", "fp16"),
             "fp4": ("fp4", "bf16", "fp16"), "int8": ("int8", "bf16", "fp16"), "fp32": ("fp32",)}


class Datasheet(BaseModel):
    """The vendor figures a catalog entry was taken from, as printed (`sparse`: tensor figures quoted with 2:4
    structured sparsity, which the catalog halves to the dense rate)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    sparse: bool = False
    tensor_tflops: dict[str, float] = {}          # dtype -> tensor TFLOPS (TOPS for int8) as printed
    fp32_tflops: float | None = None              # non-tensor FP32
    memory_gb: float | None = None
    bandwidth_gb_s: float | None = None
    interconnect_gb_s: float | None = None


class GpuSpec(BaseModel):
    """One device. Rates are dense peaks; the cost models apply efficiencies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: Literal["gpu", "cpu"] = "gpu"
    aliases: tuple[str, ...] = ()
    peak_flops: dict[str, float]                 # dtype -> FLOP/s (dense)
    memory_bandwidth_bytes_per_s: float
    memory_bytes: float
    interconnect_bytes_per_s: float              # per GPU, aggregate bidirectional (datasheet figure)
    interconnect: str = ""
    # GPUs one `interconnect` domain joins (an HGX board or a PCIe server: 8; a GB200 NVL72 rack: 72); traffic
    # between GPUs of different domains goes over the scale-out network at scale_out_bytes_per_s
    nvlink_domain_gpus: int = Field(8, ge=1, le=576)
    scale_out_bytes_per_s: float = 50.0e9          # one 400 Gb/s NIC per GPU, one direction
    notes: str = ""
    datasheet: Datasheet | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v.strip()

    @field_validator("memory_bandwidth_bytes_per_s", "interconnect_bytes_per_s", "scale_out_bytes_per_s",
                     mode="before")
    @classmethod
    def _bw(cls, v: Any) -> float:
        return positive(parse_quantity(v, "bytes_per_s"))

    @field_validator("memory_bytes", mode="before")
    @classmethod
    def _mem(cls, v: Any) -> float:
        return positive(parse_quantity(v, "bytes"))

    @field_validator("peak_flops", mode="before")
    @classmethod
    def _flops(cls, v: Any) -> dict[str, float]:
        if not isinstance(v, dict) or not v:
            raise ValueError("must map at least one dtype (bf16, fp16, fp8, int8, fp32) to a FLOP/s rate")
        out: dict[str, float] = {}
        for k, rate in v.items():
            key = str(k).strip().lower()
            if key not in _RATE_ALIASES:
                raise SubfieldError(k, rate, "unknown dtype; allowed: bf16, fp16, fp8, fp4, int8, fp32")
            try:
                out[_RATE_ALIASES[key]] = positive(parse_quantity(rate, "flops"))
            except ValueError as e:
                raise SubfieldError(k, rate, str(e)) from None
        return out

    def flops(self, dtype: str) -> float:
        """Peak FLOP/s for matmuls in `dtype` (bf16, fp16, fp8, fp4, int8, fp32), with the fallbacks above."""
        key = str(dtype).strip().lower()
        dt = key if key in ("int8", "fp4") else normalize_dtype(dtype)
        for d in _FALLBACK[dt]:
            if d in self.peak_flops:
                return self.peak_flops[d]
        raise TwinInputError(
            f"gpu {self.name}: peak_flops has no rate for {dt} (has {', '.join(sorted(self.peak_flops))})")

    def has_rate(self, dtype: str) -> bool:
        return dtype in self.peak_flops

    @property
    def has_nvlink_class_interconnect(self) -> bool:
        """NVLink or Infinity Fabric between GPUs; False: tensor parallelism goes over PCIe."""
        return any(k in self.interconnect.lower() for k in ("nvlink", "infinity fabric", "xgmi"))

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / 2**30

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "bf16_tflops": self.peak_flops.get("bf16", 0.0) / 1e12,
                "memory_gb": self.memory_bytes / 1e9, "bandwidth_tb_s": self.memory_bandwidth_bytes_per_s / 1e12,
                "interconnect_gb_s": self.interconnect_bytes_per_s / 1e9, "interconnect": self.interconnect}


def gpu_from_dict(data: dict[str, Any], source: str = "gpu spec") -> GpuSpec:
    if not isinstance(data, dict):
        raise TwinInputError(f"{source}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return GpuSpec.model_validate(data)
    except ValidationError as e:
        raise TwinInputError(validation_message(e, source, GpuSpec.model_fields)) from None


def load_gpu_spec(path: str | Path) -> GpuSpec:
    """Read a user's GPU spec (YAML or JSON), e.g.

        name: my-gpu
        peak_flops: {bf16: 989 TFLOPS, fp8: 1979 TFLOPS}
        memory_bandwidth_bytes_per_s: 3.35 TB/s
        memory_bytes: 80 GB
        interconnect_bytes_per_s: 900 GB/s
    """
    return gpu_from_dict(parse_yaml(read_text(path, "gpu spec"), f"gpu spec {path}"), f"gpu spec {path}")


@functools.lru_cache(maxsize=1)
def _gpu_catalog() -> dict[str, GpuSpec]:
    entries = load_packaged_yaml(_DATA / "gpus.yaml")
    return {g.name: g for g in (gpu_from_dict(e, f"gpus.yaml entry {i}") for i, e in enumerate(entries))}


@functools.lru_cache(maxsize=1)
def _gpu_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for g in _gpu_catalog().values():
        for n in (g.name, *g.aliases):
            index[norm_name(n)] = g.name
    return index


def list_gpus() -> list[GpuSpec]:
    return list(_gpu_catalog().values())


def resolve_gpu(name_or_path: str | Path | GpuSpec) -> GpuSpec:
    """A catalog GPU by name or alias (case-insensitive), or a spec file path."""
    if isinstance(name_or_path, GpuSpec):
        return name_or_path
    key = norm_name(str(name_or_path))
    if key not in _gpu_index():   # the vendor in front, as nvidia-smi and vendors' pages write it: nvidia-h100
        key = re.sub(r"^(nvidia|amd)-(instinct-|geforce-)?", "", key)
    if key in _gpu_index():
        return _gpu_catalog()[_gpu_index()[key]]
    p = Path(str(name_or_path))
    if p.suffix.lower() in (".yaml", ".yml", ".json") or is_file(p):
        if not is_file(p):
            kind = not_a_file(p)
            raise TwinInputError(f"gpu: spec file {quoted(name_or_path)} " + (f"is {kind}; give a file" if kind
                                                                              else "does not exist"))
        return load_gpu_spec(p)
    known = ", ".join(g.name for g in list_gpus())
    hint = did_you_mean(name_or_path, [g.name for g in list_gpus()],
                        {a: g.name for g in list_gpus() for a in g.aliases})
    raise TwinInputError(f"gpu: unknown GPU {quoted(name_or_path)}{hint}; known: {known}; or give a YAML spec file path")
