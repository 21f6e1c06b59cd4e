"""Hardware and model catalog: GPU specs (peak FLOP/s per dtype, memory, bandwidth, interconnect) and model
shapes with the numbers derived from them (parameters, weight bytes, KV bytes per token, FLOPs per token).

The catalogued entries live in `twin/data/gpus.yaml` and `twin/data/models.yaml`. Users add a GPU with a small
YAML spec file (`load_gpu_spec`) and a model with any Hugging Face `config.json` (`model_from_hf_config`).
`resolve_gpu` / `resolve_model` take a catalog name (case-insensitive, aliases allowed) or a path.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from twin.errors import TwinInputError
from twin.yaml_input import parse_yaml

_DATA = Path(__file__).parent / "data"

# ---------------------------------------------------------------------------------------------------- dtypes

DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}
_DTYPE_ALIASES = {
    "bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "torch.float16": "fp16",
    "fp8": "fp8", "float8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "e4m3": "fp8", "e5m2": "fp8",
    "float8_e4m3fn": "fp8",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "torch.float32": "fp32",
}


def normalize_dtype(value: Any, field_name: str = "dtype") -> str:
    """Canonical dtype name (bf16, fp16, fp8, fp32) or TwinInputError naming the field."""
    key = str(value).strip().lower() if value is not None else ""
    if key in _DTYPE_ALIASES:
        return _DTYPE_ALIASES[key]
    raise TwinInputError(f"{field_name}: {value!r} is not a known dtype; allowed: bf16, fp16, fp8, fp32")


def dtype_bytes(dtype: str, field_name: str = "dtype") -> int:
    return DTYPE_BYTES[normalize_dtype(dtype, field_name)]


def activation_dtype(weight_dtype: str) -> str:
    """The dtype activations (and embeddings, LM head, norms) are kept in: fp8 checkpoints as vLLM serves
    them quantize only the decoder's linear layers and keep the rest in bf16."""
    wd = normalize_dtype(weight_dtype, "weight_dtype")
    return wd if wd in ("fp16", "fp32") else "bf16"


def _norm_name(name: str) -> str:
    return re.sub(r"[\s_]+", "-", str(name).strip().lower())


# ---------------------------------------------------------------------------------------------------- GPUs

_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15,
           "ki": 2.0**10, "mi": 2.0**20, "gi": 2.0**30, "ti": 2.0**40}
_QTY = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z/]*)\s*$")


def _parse_quantity(value: Any, unit_kind: str) -> float:
    """A number, or a string with a unit: '3.35 TB/s', '80 GB', '80GiB', '989 TFLOPS', '989e12'."""
    if isinstance(value, bool):
        raise ValueError("must be a number")
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        raise ValueError("must be a number or a string with a unit")
    m = _QTY.match(value)
    if not m:
        raise ValueError(f"cannot read {value!r} as a quantity")
    number, unit = float(m.group(1)), m.group(2).lower()
    if not unit:
        return number
    suffixes = {"bytes": ("b",), "bytes_per_s": ("b/s", "bps"), "flops": ("flops", "flop/s")}[unit_kind]
    for suffix in suffixes:
        if unit.endswith(suffix) and unit[: -len(suffix)] in _PREFIX:
            return number * _PREFIX[unit[: -len(suffix)]]
    examples = {"bytes": "'80 GB' or '80 GiB'", "bytes_per_s": "'3.35 TB/s'", "flops": "'989 TFLOPS'"}
    raise ValueError(f"unit {m.group(2)!r} does not fit here; write e.g. {examples[unit_kind]} or a plain number")


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
    notes: str = ""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v.strip()

    @field_validator("memory_bandwidth_bytes_per_s", "interconnect_bytes_per_s", mode="before")
    @classmethod
    def _bw(cls, v: Any) -> float:
        return _positive(_parse_quantity(v, "bytes_per_s"))

    @field_validator("memory_bytes", mode="before")
    @classmethod
    def _mem(cls, v: Any) -> float:
        return _positive(_parse_quantity(v, "bytes"))

    @field_validator("peak_flops", mode="before")
    @classmethod
    def _flops(cls, v: Any) -> dict[str, float]:
        if not isinstance(v, dict) or not v:
            raise ValueError("must map at least one dtype (bf16, fp16, fp8, fp32) to a FLOP/s rate")
        out: dict[str, float] = {}
        for k, rate in v.items():
            key = str(k).strip().lower()
            if key not in _DTYPE_ALIASES:
                raise _SubfieldError(k, rate, "unknown dtype; allowed: bf16, fp16, fp8, fp32")
            try:
                out[_DTYPE_ALIASES[key]] = _positive(_parse_quantity(rate, "flops"))
            except ValueError as e:
                raise _SubfieldError(k, rate, str(e)) from None
        return out

    def flops(self, dtype: str) -> float:
        """Peak FLOP/s for matmuls in `dtype`. fp16 and bf16 stand in for each other; fp8 on a GPU without
        fp8 tensor cores runs weight-only (dequantized to bf16), so it gets the bf16 rate."""
        dt = normalize_dtype(dtype)
        order = {"bf16": ("bf16", "fp16"), "fp16": ("fp16", "bf16"),
                 "fp8": ("fp8", "bf16", "fp16"), "fp32": ("fp32",)}[dt]
        for d in order:
            if d in self.peak_flops:
                return self.peak_flops[d]
        raise TwinInputError(
            f"gpu {self.name}: peak_flops has no rate for {dt} (has {', '.join(sorted(self.peak_flops))})")

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / 2**30

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "bf16_tflops": self.peak_flops.get("bf16", 0.0) / 1e12,
                "memory_gb": self.memory_bytes / 1e9, "bandwidth_tb_s": self.memory_bandwidth_bytes_per_s / 1e12,
                "interconnect_gb_s": self.interconnect_bytes_per_s / 1e9, "interconnect": self.interconnect}


class _SubfieldError(ValueError):
    """A problem with one entry of a mapping field, so the message can name `field.key`."""

    def __init__(self, key: Any, value: Any, reason: str) -> None:
        super().__init__(reason)
        self.key, self.value, self.reason = key, value, reason


def _positive(x: float) -> float:
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"must be a positive number, got {x:g}")
    return x


def _validation_message(err: ValidationError, source: str) -> str:
    """One line: the first problem, naming the field, the value and what is allowed."""
    e = err.errors()[0]
    loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
    msg = str(e["msg"]).removeprefix("Value error, ")
    if e["type"] == "extra_forbidden":
        allowed = ", ".join(GpuSpec.model_fields)
        return f"{source}: unknown field '{loc}'; allowed fields: {allowed}"
    if e["type"] == "missing":
        return f"{source}: field '{loc}' is required"
    sub = (e.get("ctx") or {}).get("error")
    if isinstance(sub, _SubfieldError):
        return f"{source}: field '{loc}.{sub.key}' = {sub.value!r}: {sub.reason}"
    return f"{source}: field '{loc}' = {e.get('input')!r}: {msg}"


def gpu_from_dict(data: dict[str, Any], source: str = "gpu spec") -> GpuSpec:
    if not isinstance(data, dict):
        raise TwinInputError(f"{source}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return GpuSpec.model_validate(data)
    except ValidationError as e:
        raise TwinInputError(_validation_message(e, source)) from None


def load_gpu_spec(path: str | Path) -> GpuSpec:
    """Read a user's GPU spec (YAML or JSON), e.g.

        name: my-gpu
        peak_flops: {bf16: 989 TFLOPS, fp8: 1979 TFLOPS}
        memory_bandwidth_bytes_per_s: 3.35 TB/s
        memory_bytes: 80 GB
        interconnect_bytes_per_s: 900 GB/s
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise TwinInputError(f"gpu spec {path}: cannot read file ({e.strerror or e})") from None
    return gpu_from_dict(parse_yaml(text, f"gpu spec {path}"), f"gpu spec {path}")


@functools.lru_cache(maxsize=1)
def _gpu_catalog() -> dict[str, GpuSpec]:
    entries = yaml.safe_load((_DATA / "gpus.yaml").read_text())
    return {g.name: g for g in (gpu_from_dict(e, f"gpus.yaml entry {i}") for i, e in enumerate(entries))}


@functools.lru_cache(maxsize=1)
def _gpu_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for g in _gpu_catalog().values():
        for n in (g.name, *g.aliases):
            index[_norm_name(n)] = g.name
    return index


def list_gpus() -> list[GpuSpec]:
    return list(_gpu_catalog().values())


def resolve_gpu(name_or_path: str | Path | GpuSpec) -> GpuSpec:
    """A catalog GPU by name or alias (case-insensitive), or a spec file path."""
    if isinstance(name_or_path, GpuSpec):
        return name_or_path
    key = _norm_name(str(name_or_path))
    if key in _gpu_index():
        return _gpu_catalog()[_gpu_index()[key]]
    p = Path(str(name_or_path))
    if p.suffix.lower() in (".yaml", ".yml", ".json") or p.is_file():
        if not p.is_file():
            raise TwinInputError(f"gpu: spec file {str(name_or_path)!r} does not exist")
        return load_gpu_spec(p)
    known = ", ".join(g.name for g in list_gpus())
    raise TwinInputError(f"gpu: unknown GPU {str(name_or_path)!r}; known: {known}; or give a YAML spec file path")


# ---------------------------------------------------------------------------------------------------- models


@dataclass(frozen=True)
class ModelSpec:
    """A dense decoder-only transformer (gated MLP, RoPE, RMSNorm) by its shape."""

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False          # q/k/v projections carry a bias (Qwen2)
    hf_id: str | None = None
    aliases: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        for f in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                  "intermediate_size", "vocab_size", "max_position_embeddings"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise TwinInputError(f"model {self.name}: {f} = {v!r}: must be a positive integer")
        if self.num_attention_heads % self.num_key_value_heads:
            raise TwinInputError(
                f"model {self.name}: num_key_value_heads = {self.num_key_value_heads}: must divide "
                f"num_attention_heads ({self.num_attention_heads})")

    # --- parameter counts -------------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def attention_weight_params_per_layer(self) -> int:
        """q, k, v and o projection matrices."""
        h = self.hidden_size
        return h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h

    @property
    def attention_bias_params_per_layer(self) -> int:
        return self.q_dim + 2 * self.kv_dim if self.attention_bias else 0

    @property
    def attention_params_per_layer(self) -> int:
        return self.attention_weight_params_per_layer + self.attention_bias_params_per_layer

    @property
    def mlp_params_per_layer(self) -> int:
        """gate, up and down projections."""
        return 3 * self.hidden_size * self.intermediate_size

    @property
    def norm_params_per_layer(self) -> int:
        return 2 * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        """Stored LM-head parameters: 0 when tied to the embedding."""
        return 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size

    @property
    def num_params(self) -> int:
        layer = self.attention_params_per_layer + self.mlp_params_per_layer + self.norm_params_per_layer
        return self.embedding_params + self.num_hidden_layers * layer + self.hidden_size + self.lm_head_params

    @property
    def linear_params(self) -> int:
        """Weights of the decoder's linear layers (what every token multiplies through), LM head excluded."""
        return self.num_hidden_layers * (self.attention_weight_params_per_layer + self.mlp_params_per_layer)

    @property
    def lm_head_matmul_params(self) -> int:
        """The LM head's matmul size (vocab x hidden), whether or not it is tied to the embedding."""
        return self.vocab_size * self.hidden_size

    def linear_flops_per_token(self, include_lm_head: bool = True) -> int:
        """2 FLOPs per weight per token through the linear layers (bias adds and norms are negligible)."""
        return 2 * (self.linear_params + (self.lm_head_matmul_params if include_lm_head else 0))

    def attention_flops_per_position(self) -> int:
        """FLOPs for one query attending over one key position, all layers: QK^T and PV, 2 each per element."""
        return 4 * self.num_hidden_layers * self.num_attention_heads * self.head_dim

    # --- bytes --------------------------------------------------------------------------------------------
    def check_tensor_parallel(self, tensor_parallel_size: int) -> None:
        tp = tensor_parallel_size
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise TwinInputError(f"tensor_parallel_size = {tp!r}: must be a positive integer")
        if self.num_attention_heads % tp:
            raise TwinInputError(
                f"tensor_parallel_size = {tp}: must divide num_attention_heads ({self.num_attention_heads}) "
                f"of model {self.name}")
        kv = self.num_key_value_heads
        if kv % tp and tp % kv:
            raise TwinInputError(
                f"tensor_parallel_size = {tp}: must divide, or be a multiple of, num_key_value_heads ({kv}) "
                f"of model {self.name}")

    def kv_heads_per_gpu(self, tensor_parallel_size: int = 1) -> int:
        """KV heads each GPU holds: kv_heads / tp, at least 1 (vLLM replicates KV heads when tp > kv_heads)."""
        return max(1, -(-self.num_key_value_heads // tensor_parallel_size))

    def kv_bytes_per_token(self, kv_dtype: str = "bf16", tensor_parallel_size: int = 1) -> int:
        """KV-cache bytes one token takes on one GPU: 2 (K, V) x layers x kv heads per GPU x head_dim x bytes."""
        return (2 * self.num_hidden_layers * self.kv_heads_per_gpu(tensor_parallel_size) * self.head_dim
                * dtype_bytes(kv_dtype, "kv_dtype"))

    def weight_bytes(self, weight_dtype: str = "bf16", tensor_parallel_size: int = 1) -> int:
        """Weight bytes on one GPU. The decoder's linear weights are stored in `weight_dtype`; embedding,
        LM head, biases and norms in the activation dtype (bf16 for fp8 checkpoints, as vLLM's fp8 keeps
        them). Everything but the norms is sharded across tensor-parallel ranks (vocab-parallel embedding)."""
        tp = tensor_parallel_size
        wb = dtype_bytes(weight_dtype, "weight_dtype")
        ab = DTYPE_BYTES[activation_dtype(weight_dtype)]
        sharded_linear = self.linear_params * wb
        sharded_other = (self.embedding_params + self.lm_head_params
                         + self.num_hidden_layers * self.attention_bias_params_per_layer) * ab
        replicated = (self.num_hidden_layers * self.norm_params_per_layer + self.hidden_size) * ab
        return -(-sharded_linear // tp) + -(-sharded_other // tp) + replicated

    def weight_read_bytes(self, weight_dtype: str = "bf16", tensor_parallel_size: int = 1) -> int:
        """Bytes of weights one forward pass streams from memory on one GPU: all weights except the embedding
        table, of which only the looked-up rows are read (a tied LM head is read as the LM head)."""
        ab = DTYPE_BYTES[activation_dtype(weight_dtype)]
        not_streamed = 0 if self.tie_word_embeddings else self.embedding_params * ab
        return self.weight_bytes(weight_dtype, tensor_parallel_size) - not_streamed // tensor_parallel_size

    # --- conversions --------------------------------------------------------------------------------------
    def to_hf_config(self) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "hidden_size": self.hidden_size, "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads, "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim, "intermediate_size": self.intermediate_size, "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings, "attention_bias": self.attention_bias,
        }
        if self.hf_id:
            cfg["_name_or_path"] = self.hf_id
        return cfg

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "hf_id": self.hf_id, "params_b": self.num_params / 1e9,
                "layers": self.num_hidden_layers, "hidden": self.hidden_size,
                "heads": self.num_attention_heads, "kv_heads": self.num_key_value_heads,
                "kv_kib_per_token_bf16": self.kv_bytes_per_token("bf16") / 1024,
                "max_position_embeddings": self.max_position_embeddings}


class _ModelEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    aliases: tuple[str, ...] = ()
    hf_id: str | None = None
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    attention_bias: bool = False


# model_type -> the config class's default for tie_word_embeddings, when config.json leaves it out
_UNTIED_BY_DEFAULT = {"llama", "mistral", "qwen2", "qwen3", "mixtral", "granite"}
_BIASED_QKV = {"qwen2"}
_MOE_KEYS = ("num_local_experts", "n_routed_experts", "num_experts")


def model_from_hf_config(path_or_dict: str | Path | dict[str, Any], name: str | None = None) -> ModelSpec:
    """A ModelSpec from a Hugging Face config.json (a file, a folder holding one, or the parsed dict)."""
    if isinstance(path_or_dict, dict):
        cfg, source = dict(path_or_dict), "config"
    else:
        p = Path(path_or_dict)
        if p.is_dir():
            p = p / "config.json"
        source = str(p)
        try:
            cfg = json.loads(p.read_text())
        except OSError as e:
            raise TwinInputError(f"model config {source}: cannot read file ({e.strerror or e})") from None
        except json.JSONDecodeError as e:
            raise TwinInputError(f"model config {source} line {e.lineno}: not valid JSON ({e.msg})") from None
        if name is None:
            name = p.parent.name or p.stem
    if not isinstance(cfg, dict):
        raise TwinInputError(f"model config {source}: expected a JSON object")
    if "hidden_size" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "_name_or_path": cfg.get("_name_or_path")}
    for k in _MOE_KEYS:
        if isinstance(cfg.get(k), int) and cfg[k] > 1:
            raise TwinInputError(f"model config {source}: {k} = {cfg[k]}: mixture-of-experts models are not "
                                 f"supported; allowed: dense decoder-only models")

    def need(key: str, *alts: str) -> int:
        for k in (key, *alts):
            if cfg.get(k) is not None:
                v = cfg[k]
                if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                    raise TwinInputError(f"model config {source}: {k} = {v!r}: must be a positive integer")
                return v
        raise TwinInputError(f"model config {source}: field '{key}' is required")

    hidden = need("hidden_size")
    heads = need("num_attention_heads")
    kv_heads = need("num_key_value_heads") if cfg.get("num_key_value_heads") is not None else heads
    head_dim = need("head_dim") if cfg.get("head_dim") is not None else hidden // heads
    model_type = str(cfg.get("model_type", "")).lower()
    tie = cfg.get("tie_word_embeddings")
    if tie is None:
        tie = model_type not in _UNTIED_BY_DEFAULT
    bias = cfg.get("attention_bias")
    if bias is None:
        bias = model_type in _BIASED_QKV
    hf_id = cfg.get("_name_or_path") or None
    return ModelSpec(
        name=name or (hf_id.split("/")[-1].lower() if hf_id else "custom-model"),
        hidden_size=hidden,
        num_hidden_layers=need("num_hidden_layers"),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=need("intermediate_size"),
        vocab_size=need("vocab_size"),
        max_position_embeddings=need("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions"),
        tie_word_embeddings=bool(tie),
        attention_bias=bool(bias),
        hf_id=hf_id,
    )


@functools.lru_cache(maxsize=1)
def _model_catalog() -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for i, e in enumerate(yaml.safe_load((_DATA / "models.yaml").read_text())):
        try:
            entry = _ModelEntry.model_validate(e)
        except ValidationError as err:
            raise TwinInputError(_validation_message(err, f"models.yaml entry {i}")) from None
        out[entry.name] = ModelSpec(**entry.model_dump())
    return out


@functools.lru_cache(maxsize=1)
def _model_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for m in _model_catalog().values():
        for n in (m.name, *m.aliases, *((m.hf_id,) if m.hf_id else ())):
            index[_norm_name(n)] = m.name
    return index


def list_models() -> list[ModelSpec]:
    return list(_model_catalog().values())


def resolve_model(name_or_path: str | Path | ModelSpec) -> ModelSpec:
    """A catalog model by name, alias or HF id (case-insensitive), or a path to a config.json (or its folder)."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    key = _norm_name(str(name_or_path))
    if key in _model_index():
        return _model_catalog()[_model_index()[key]]
    p = Path(str(name_or_path))
    if p.is_file() or (p.is_dir() and (p / "config.json").is_file()):
        return model_from_hf_config(p)
    known = ", ".join(m.name for m in list_models())
    raise TwinInputError(f"model: unknown model {str(name_or_path)!r}; known: {known}; "
                         f"or give a path to a Hugging Face config.json")
