"""A Hugging Face checkpoint's ``quantization_config`` read as weight formats per layer group.

Methods read (as vLLM's loaders interpret them):

* ``compressed-tensors``: each ``config_groups`` entry's ``weights`` (``type`` int/float, ``num_bits``,
  ``group_size``, ``symmetric``) applied to its ``targets`` (``Linear``: every linear layer; ``re:``-prefixed
  regular expressions otherwise), minus the ``ignore`` list. int 4-bit -> ``int4-g<group>[-sym]``, int 8-bit ->
  int8, float 8-bit -> fp8, float 4-bit group 16 (``nvfp4-pack-quantized``) -> nvfp4, ``mxfp4-pack-quantized``
  -> mxfp4.
* ``modelopt`` (``quant_algo`` FP8 / NVFP4, ``exclude_modules``), also nested as ``{"quantization": {...}}``.
* ``fp8`` / ``fbgemm_fp8`` (block or per-tensor FP8), ``mxfp4`` (gpt-oss), ``awq`` / ``gptq`` (``bits``,
  ``group_size``; AWQ with ``zero_point``, GPTQ checkpoints store zeros), ``bitsandbytes`` (nf4); each with its
  ``modules_to_not_convert`` / ``ignore`` / ``exclude_modules`` list.

A layer group is excluded when a module of that group matches an entry (a ``re:`` regular expression, a glob
with ``*``, or a module name that is the module itself, one of its parents, or its last components). The router
and the LM head stay in the activation dtype (vLLM builds the gate without a quant config and serves the LM head
unquantized for these methods); so does the embedding.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from twin.errors import TwinInputError
from twin.hardware.weight_formats import WeightFormats

# representative module names of each group (both the Llama/DeepSeek and the Mixtral/MiniMax spellings);
# {d}: a dense layer's index, {m}: a MoE layer's
_MODULES = {
    "attention": ("model.layers.{d}.self_attn.q_proj", "model.layers.{d}.self_attn.o_proj",
                  "model.layers.{d}.self_attn.kv_a_proj_with_mqa"),
    "dense_mlp": ("model.layers.{d}.mlp.gate_proj", "model.layers.{d}.mlp.down_proj"),
    "routed_experts": ("model.layers.{m}.mlp.experts.0.gate_proj", "model.layers.{m}.mlp.experts.0.down_proj",
                       "model.layers.{m}.block_sparse_moe.experts.0.w1", "model.layers.{m}.mlp.experts.gate_up_proj"),
    "shared_experts": ("model.layers.{m}.mlp.shared_experts.gate_proj", "model.layers.{m}.mlp.shared_expert.gate_proj"),
}
_QUANTIZABLE = tuple(_MODULES)


def _matches(name: str, pattern: str) -> bool:
    if pattern.startswith("re:"):
        return re.match(pattern[3:], name) is not None
    if "*" in pattern or "?" in pattern:
        return fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(name, pattern + ".*")
    return name == pattern or name.startswith(pattern + ".") or name.endswith("." + pattern) \
        or f".{pattern}." in f".{name}."


def _group_names(group: str, first_dense: int, layers: int) -> list[str]:
    d, m = 0, min(first_dense, layers - 1)
    return [n.format(d=d if group != "attention" else m, m=m) for n in _MODULES[group]]


def _excluded(group: str, patterns: list[str], first_dense: int, layers: int) -> bool:
    return any(_matches(n, p) for n in _group_names(group, first_dense, layers) for p in patterns)


def _patterns(value: Any, source: str, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TwinInputError(f"model config {source}: quantization_config.{key}: must be a list of module names")
    return value


def _ct_format(weights: dict[str, Any], fmt: str, source: str) -> str:
    kind, bits = str(weights.get("type", "int")).lower(), weights.get("num_bits")
    group = weights.get("group_size")
    if "mxfp4" in fmt:
        return "mxfp4"
    if kind == "float" and bits == 4:
        return "nvfp4"
    if kind == "float" and bits == 8:
        return "fp8"
    if kind == "int" and bits == 8:
        return "int8"
    if kind == "int" and bits == 4:
        if group is None or group <= 0:    # per-channel scales: negligible bytes (one scale per row)
            return "int4-g65536-sym"
        return f"int4-g{int(group)}{'-sym' if weights.get('symmetric', True) else ''}"
    raise TwinInputError(f"model config {source}: quantization_config weights type={kind!r} num_bits={bits!r}: "
                         f"not a modelled format (int 4/8-bit, float 4/8-bit)")


def formats_from_quantization_config(qc: Any, source: str = "config", *, first_dense: int = 0, layers: int = 2,
                                     torch_dtype: Any = None) -> WeightFormats:
    """The weight format of each layer group a ``quantization_config`` describes (see the module docstring)."""
    act = "fp16" if str(torch_dtype).lower() in ("float16", "torch.float16", "fp16") else "bf16"
    base = WeightFormats(act, act, act, act, act, act, act)
    if not isinstance(qc, dict):
        raise TwinInputError(f"model config {source}: quantization_config: expected a JSON object")
    if isinstance(qc.get("quantization"), dict) and "quant_method" not in qc:
        qc = {"quant_method": "modelopt", **qc["quantization"]}
    method = str(qc.get("quant_method", "")).lower().replace("_", "-")
    fmt = str(qc.get("format", "")).lower()
    excluded = _patterns(qc.get("ignore"), source, "ignore") + \
        _patterns(qc.get("modules_to_not_convert"), source, "modules_to_not_convert") + \
        _patterns(qc.get("exclude_modules"), source, "exclude_modules")
    chosen: dict[str, str] = {}

    def apply(fmt_name: str, targets: list[str] | None = None) -> None:
        for g in _QUANTIZABLE:
            if _excluded(g, excluded, first_dense, layers):
                continue
            if targets is not None and "Linear" not in targets and not any(
                    _matches(n, t) for n in _group_names(g, first_dense, layers) for t in targets):
                continue
            chosen[g] = fmt_name

    if method == "compressed-tensors":
        groups = qc.get("config_groups")
        if not isinstance(groups, dict) or not groups:
            raise TwinInputError(f"model config {source}: quantization_config.config_groups: required for "
                                 f"compressed-tensors (a mapping of scheme groups)")
        for gname, scheme in groups.items():
            if not isinstance(scheme, dict) or not isinstance(scheme.get("weights"), dict):
                raise TwinInputError(f"model config {source}: quantization_config.config_groups.{gname}.weights: "
                                     f"required (the weight scheme)")
            apply(_ct_format(scheme["weights"], fmt, source), _patterns(scheme.get("targets"), source, "targets"))
    elif method == "modelopt":
        algo = str(qc.get("quant_algo", "")).upper()
        if algo not in ("FP8", "NVFP4"):
            raise TwinInputError(f"model config {source}: quantization_config.quant_algo = {algo!r}: modelled "
                                 f"ModelOpt algorithms are FP8 and NVFP4")
        apply(algo.lower())
    elif method in ("fp8", "fbgemm-fp8"):
        apply("fp8")
    elif method == "mxfp4":
        apply("mxfp4")
    elif method in ("awq", "awq-marlin", "gptq", "gptq-marlin"):
        bits, group = qc.get("bits", qc.get("w_bit", 4)), qc.get("group_size", qc.get("q_group_size", 128))
        if bits == 8:
            apply("int8")
        elif bits == 4 and isinstance(group, int):
            apply("int4" if group in (128, -1) else f"int4-g{group}")
        else:
            raise TwinInputError(f"model config {source}: quantization_config bits = {bits!r}, group_size = "
                                 f"{group!r}: modelled AWQ/GPTQ checkpoints are 4-bit with a group size, or 8-bit")
    elif method == "bitsandbytes":
        apply("nf4")
    else:
        raise TwinInputError(f"model config {source}: quantization_config.quant_method = {qc.get('quant_method')!r}: "
                             f"not modelled; allowed: compressed-tensors, modelopt, fp8, fbgemm_fp8, mxfp4, awq, "
                             f"gptq, bitsandbytes (or state deployment.weight_formats explicitly)")
    return base.with_groups(chosen)
