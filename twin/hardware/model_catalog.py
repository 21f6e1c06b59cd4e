"""Model catalog (`data/models.yaml`) and Hugging Face `config.json` reading (dense, MoE: Mixtral, Qwen2/3-MoE,
DeepSeek-V2/V3 with MLA). `resolve_model` takes a catalog name, alias or HF id (case-insensitive), or a path."""

from __future__ import annotations

import dataclasses
import functools
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from twin.errors import TwinInputError, did_you_mean
from twin.hardware.dtypes import norm_name
from twin.hardware.hf_quant import formats_from_quantization_config
from twin.hardware.models import ModelSpec
from twin.hardware.name_probe import is_dir, is_file, quoted
from twin.hardware.weight_formats import WeightFormats
from twin.hardware.spec_input import validation_message
from twin.json_input import JsonSyntaxError, parse_json
from twin.yaml_input import load_packaged_yaml, not_a_file, read_text

_DATA = Path(__file__).parent / "data"


def _catalog_entry_schema() -> type[BaseModel]:
    """A catalog entry of `data/models.yaml`: every field of ``ModelSpec`` (required where it is) except its
    parsed weight formats, which an entry gives as ``quantization``: the checkpoint's format per layer group
    (twin.hardware.weight_formats.GROUPS); the groups left out stay in the activation dtype."""
    hints = typing.get_type_hints(ModelSpec)
    spec_fields = {f.name: (hints[f.name], ... if f.default is dataclasses.MISSING else f.default)
                   for f in dataclasses.fields(ModelSpec) if f.name != "checkpoint_formats"}
    return create_model("ModelEntry", __config__=ConfigDict(extra="forbid"),
                        quantization=(dict[str, str] | None, None), **spec_fields)


_ModelEntry = _catalog_entry_schema()

# model_type -> the config class's default for tie_word_embeddings, when config.json leaves it out
_UNTIED_BY_DEFAULT = {"llama", "mistral", "qwen2", "qwen3", "mixtral", "granite", "qwen2_moe", "qwen3_moe",
                      "deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "gpt_oss", "minimax_m2"}
_SINK_MODELS = {"gpt_oss"}        # learned per-head attention-sink logits
_FP32_ROUTER_MODELS = {"minimax_m2"}   # vLLM's gate: ReplicatedLinear(params_dtype=torch.float32) (router_gemm)
_BIASED_QKV = {"qwen2", "qwen2_moe"}
_MOE_KEYS = ("num_local_experts", "n_routed_experts", "num_experts")
_MAX_CONFIG_INT = 2**31 - 1     # a config's sizes are int32 in the frameworks that read them


def _read_config(path_or_dict: str | Path | dict[str, Any], name: str | None) -> tuple[dict, str, str | None]:
    if isinstance(path_or_dict, dict):
        return dict(path_or_dict), "config", name
    p = Path(path_or_dict)
    if p.is_dir():
        p = p / "config.json"
    source = str(p)
    # size, encoding, nesting depth and duplicate keys checked as for every user JSON (twin.json_input)
    try:
        cfg = parse_json(read_text(p, "model config"), f"model config {source}")
    except JsonSyntaxError as e:
        raise TwinInputError(f"model config {source} line {e.lineno}: not valid JSON ({e.msg})") from None
    if name is None:   # a folder's config.json: the folder's name; "org--Model_config.json": "model"
        name = (p.parent.name or p.stem) if p.name == "config.json" else \
            p.stem.removesuffix("_config").split("--")[-1].lower()
    return cfg, source, name


def model_from_hf_config(path_or_dict: str | Path | dict[str, Any], name: str | None = None) -> ModelSpec:
    """A ModelSpec from a Hugging Face config.json (a file, a folder holding one, or the parsed dict)."""
    cfg, source, name = _read_config(path_or_dict, name)
    if not isinstance(cfg, dict):
        raise TwinInputError(f"model config {source}: expected a JSON object")
    if "hidden_size" not in cfg and isinstance(cfg.get("text_config"), dict):
        outer = cfg
        cfg = {**cfg["text_config"], "_name_or_path": cfg.get("_name_or_path")}
        if "quantization_config" not in cfg and "quantization_config" in outer:
            cfg["quantization_config"] = outer["quantization_config"]

    def need(key: str, *alts: str) -> int:
        for k in (key, *alts):
            if cfg.get(k) is not None:
                v = cfg[k]
                if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= _MAX_CONFIG_INT:
                    raise TwinInputError(f"model config {source}: {k} = {v!r}: must be a positive integer "
                                         f"(at most {_MAX_CONFIG_INT:,})")
                return v
        raise TwinInputError(f"model config {source}: field '{key}' is required")

    def opt(key: str) -> int:
        return need(key) if cfg.get(key) is not None else 0

    hidden = need("hidden_size")
    heads = need("num_attention_heads")
    kv_heads = need("num_key_value_heads") if cfg.get("num_key_value_heads") is not None else heads
    head_dim = need("head_dim") if cfg.get("head_dim") is not None else hidden // heads
    intermediate = need("intermediate_size")
    model_type = str(cfg.get("model_type", "")).lower()
    tie = cfg.get("tie_word_embeddings")
    if tie is None:
        tie = model_type not in _UNTIED_BY_DEFAULT
    bias = cfg.get("attention_bias")
    if bias is None:
        bias = model_type in _BIASED_QKV
    moe: dict[str, int] = {}
    for k in _MOE_KEYS:
        v = cfg.get(k)
        if v is None or (type(v) is int and v in (0, 1)):    # absent, or one expert: dense
            continue
        need(k)     # 8.0 or "8" is an error, not a dense model
        if cfg[k] > 1:
            if not isinstance(cfg.get("num_experts_per_tok"), int):
                raise TwinInputError(f"model config {source}: {k} = {cfg[k]}: a mixture-of-experts config needs "
                                     f"num_experts_per_tok (the experts each token is routed to)")
            if cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1:
                raise TwinInputError(f"model config {source}: mlp_only_layers / decoder_sparse_step: interleaved "
                                     f"dense and MoE layers are not supported; allowed: every layer MoE, or the "
                                     f"first first_k_dense_replace layers dense")
            moe = dict(num_experts=need(k), num_experts_per_tok=need("num_experts_per_tok"),
                       # Mixtral's experts are intermediate_size wide; the others name the width apart
                       moe_intermediate_size=opt("moe_intermediate_size") or intermediate,
                       num_shared_experts=opt("n_shared_experts"),
                       shared_expert_intermediate_size=opt("shared_expert_intermediate_size"),
                       first_k_dense_layers=opt("first_k_dense_replace"))
            break
    mla: dict[str, int] = {}
    if cfg.get("kv_lora_rank"):
        mla = dict(kv_lora_rank=need("kv_lora_rank"), q_lora_rank=opt("q_lora_rank"),
                   qk_rope_head_dim=need("qk_rope_head_dim"), qk_nope_head_dim=need("qk_nope_head_dim"),
                   v_head_dim=need("v_head_dim"))
    window: dict[str, Any] = {}
    layer_types = cfg.get("layer_types")
    if isinstance(cfg.get("sliding_window"), int) and cfg["sliding_window"] > 0:
        if isinstance(layer_types, list):
            n_sliding = sum(1 for t in layer_types if t == "sliding_attention")
        else:
            n_sliding = 0 if cfg.get("use_sliding_window") is False else need("num_hidden_layers")
        if n_sliding:
            window = dict(sliding_window=need("sliding_window"), sliding_window_layers=n_sliding)
    if cfg.get("index_topk"):
        window.update(index_topk=need("index_topk"), index_n_heads=need("index_n_heads"),
                      index_head_dim=need("index_head_dim"))
    formats = None
    if cfg.get("quantization_config") is not None:
        formats = formats_from_quantization_config(
            cfg["quantization_config"], source, first_dense=moe.get("first_k_dense_layers", 0),
            layers=need("num_hidden_layers"), torch_dtype=cfg.get("torch_dtype", cfg.get("dtype")))
    hf_id = cfg.get("_name_or_path") or None
    return ModelSpec(
        name=name or (hf_id.split("/")[-1].lower() if hf_id else "custom-model"),
        hidden_size=hidden,
        num_hidden_layers=need("num_hidden_layers"),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=need("vocab_size"),
        max_position_embeddings=need("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions"),
        tie_word_embeddings=bool(tie),
        attention_bias=bool(bias),
        hf_id=hf_id,
        attention_sinks=model_type in _SINK_MODELS,
        qk_norm_allreduce=bool(cfg.get("use_qk_norm")) and cfg.get("qk_norm_type") == "per_layer",
        router_fp32=model_type in _FP32_ROUTER_MODELS,
        checkpoint_formats=formats,
        **moe, **mla, **window,
    )


@functools.lru_cache(maxsize=1)
def _model_catalog() -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for i, e in enumerate(load_packaged_yaml(_DATA / "models.yaml")):
        try:
            entry = _ModelEntry.model_validate(e)
        except ValidationError as err:
            raise TwinInputError(validation_message(err, f"models.yaml entry {i}", _ModelEntry.model_fields)) from None
        fields = entry.model_dump()
        quant = fields.pop("quantization")
        formats = None
        if quant is not None:
            formats = WeightFormats().with_groups(quant, f"models.yaml entry {entry.name}: quantization")
        out[entry.name] = ModelSpec(**fields, checkpoint_formats=formats)
    return out


@functools.lru_cache(maxsize=1)
def _model_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for m in _model_catalog().values():
        for n in (m.name, *m.aliases, *((m.hf_id,) if m.hf_id else ())):
            index[norm_name(n)] = m.name
    return index


def list_models() -> list[ModelSpec]:
    return list(_model_catalog().values())


def resolve_model(name_or_path: str | Path | ModelSpec) -> ModelSpec:
    """A catalog model by name, alias or HF id (case-insensitive), or a path to a config.json (or its folder)."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    key = norm_name(str(name_or_path))
    if key in _model_index():
        return _model_catalog()[_model_index()[key]]
    p = Path(str(name_or_path))
    if is_file(p) or (is_dir(p) and is_file(p / "config.json")):
        return model_from_hf_config(p)
    kind = not_a_file(p)
    if kind == "a folder":
        raise TwinInputError(f"model: the folder {quoted(name_or_path)} holds no config.json")
    if kind is not None:
        raise TwinInputError(f"model: {quoted(name_or_path)} is {kind}; give a Hugging Face config.json file")
    known = ", ".join(m.name for m in list_models())
    hint = did_you_mean(name_or_path, [m.name for m in list_models()],
                        {a: m.name for m in list_models() for a in (*m.aliases, *((m.hf_id,) if m.hf_id else ()))})
    raise TwinInputError(f"model: unknown model {quoted(name_or_path)}{hint}; known: {known}; "
                         f"or give a path to a Hugging Face config.json")
