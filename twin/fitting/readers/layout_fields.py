"""The deployment layout a `vllm bench serve` result states at its top level (``--metadata KEY=VALUE`` entries
under vLLM's option names, and the keys the twin's own ``--json`` writes: ``twin.results.server_keys``), checked
as it is read, so a malformed value is one line naming the file, the key, what is allowed and the value.

Read as the fields calibration replays (``twin.fitting.replay.Target``): ``quantization`` as ``weight_dtype`` (a
weight format the twin models: its own names or vLLM's ``fp8``, ``awq``, ``gptq``, ``awq_marlin``,
``gptq_marlin``, ``modelopt_fp4``, ``mxfp4``, ``bitsandbytes``; ``auto`` / ``none``: the checkpoint's own, as
absent), ``weight_formats`` (an object of layer group -> format), ``kv_cache_dtype`` as ``kv_dtype`` (vLLM's
``auto`` / ``bfloat16`` -> bf16, ``float16`` -> fp16, ``float32`` -> fp32, ``fp8`` / ``fp8_e4m3`` /
``fp8_e5m2`` -> fp8), ``pipeline_parallel_size`` (1 to 64), ``data_parallel_size`` (1 to 1,024),
``enable_expert_parallel`` (a flag), ``all2all_backend`` (one the twin models: ``allgather_reducescatter``,
``naive``, ``deepep``). A well-formed weight or KV-cache format or backend name the twin does not model
(``compressed-tensors``, ``int8``, ``pplx``) is kept under ``unmodelled``: calibration refuses it, `twin diagnose`
(which does not use it) still reads the file. Read as stated, for calibration to refuse
(``twin.cli.calibrate_layout``): ``replicas`` and ``replica_groups`` (1 to 4,096), ``disaggregation``
(``"<P>P<D>D"``) and ``speculative_config`` (an object, or its JSON text as ``--metadata`` records it; without
it, the ``spec_decode_*`` counters `vllm bench serve` records for a speculative server say the same)."""

from __future__ import annotations

import json
import re
from typing import Any

from twin.errors import TwinInputError
from twin.fitting.readers.fields import shown, whole
from twin.fitting.readers.server_fields import MAX_NAME_CHARS, MAX_TP, flag_field
from twin.hardware.parallel import ALL2ALL_BACKENDS
from twin.hardware.quant import normalize_weight_dtype
from twin.hardware.weight_formats import GROUPS
from twin.results.metric_keys import SPEC_DECODE_KEYS
from twin.scenario import MAX_REPLICAS

MAX_DP = 1024                  # twin.scenario.DeploymentConfig.data_parallel_size
MAX_FORMAT_CHARS = 100
# vLLM's --kv-cache-dtype values (and the twin's own kv_dtype names) -> the twin's kv_dtype
KV_CACHE_DTYPES = {"auto": "bf16", "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16",
                   "float32": "fp32", "fp32": "fp32", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}
_PD = re.compile(r"^([0-9]{1,4})P([0-9]{1,4})D$", re.IGNORECASE)
_BACKEND = re.compile(r"^[a-z0-9_]{1,100}$")


def _text(value: Any, key: str, where: str, allowed: str, limit: int = MAX_FORMAT_CHARS) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise TwinInputError(f"{where}: {key} = {shown(value)}: must be {allowed}")
    return value.strip()


def _weight_format(value: Any, key: str, where: str) -> str:
    text = _text(value, key, where, "a weight format name, e.g. fp8, awq, modelopt_fp4, mxfp4")
    try:
        return normalize_weight_dtype(text, key)
    except TwinInputError as exc:
        raise TwinInputError(f"{where}: {exc}") from None


def _known_format(text: str) -> bool:
    try:
        normalize_weight_dtype(text)
    except TwinInputError:
        return False
    return True


def _weight_formats(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not value or len(value) > len(GROUPS):
        raise TwinInputError(f"{where}: weight_formats = {shown(value)}: must be an object of layer group -> "
                             f"weight format (groups: {', '.join(GROUPS)})")
    out = {}
    for group, fmt in value.items():
        if group not in GROUPS:
            raise TwinInputError(f"{where}: weight_formats key {shown(group)}: unknown layer group; allowed: "
                                 f"{', '.join(GROUPS)}")
        out[group] = _weight_format(fmt, f"weight_formats.{group}", where)
    return out


def _count(doc: dict[str, Any], key: str, where: str, high: int) -> int:
    n = whole(doc[key], key, where, low=1)
    if n > high:
        raise TwinInputError(f"{where}: {key} = {shown(doc[key])}: must be a whole number 1 to {high:,}")
    return n


def _speculative(value: Any, where: str) -> str:
    """What the run drafted with, as a short phrase (``eagle, 4 tokens``); the text or object is not replayed."""
    if isinstance(value, str) and 0 < len(value) <= MAX_NAME_CHARS:
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return value.strip()[:40] or "speculative decoding"
    if not isinstance(value, dict):
        raise TwinInputError(f"{where}: speculative_config = {shown(value)}: must be vLLM's --speculative-config "
                             f"(an object, or its JSON text, of at most {MAX_NAME_CHARS:,} characters)")
    method, k = value.get("method"), value.get("num_speculative_tokens")
    said = [str(method)[:40]] if isinstance(method, str) and method else []
    if isinstance(k, int) and not isinstance(k, bool) and 0 < k < 10**6:
        said.append(f"{k} draft tokens")
    return ", ".join(said) or "speculative decoding"


def layout_fields(doc: dict[str, Any], where: str) -> dict[str, Any]:
    """The layout ``doc`` states, checked: Target field names for what calibration replays, the file's own key
    names for what it refuses (``speculative_config`` as a short phrase); absent or null keys are left out."""
    out: dict[str, Any] = {}
    get = doc.get
    unmodelled: dict[str, str] = {}     # a well-formed vLLM value the twin does not model: calibration refuses it
    quant = get("quantization")
    if quant is not None and not (isinstance(quant, str) and quant.strip().lower() in ("auto", "none")):
        text = _text(quant, "quantization", where, "a weight format name, e.g. fp8, awq, modelopt_fp4, mxfp4")
        if _known_format(text):
            out["weight_dtype"] = normalize_weight_dtype(text)
        else:
            unmodelled["quantization"] = text
    if get("weight_formats") is not None:
        out["weight_formats"] = _weight_formats(get("weight_formats"), where)
    if get("kv_cache_dtype") is not None:
        text = _text(get("kv_cache_dtype"), "kv_cache_dtype", where, "a KV-cache format name (vLLM's "
                     "--kv-cache-dtype, e.g. fp8)")
        if text.lower() in KV_CACHE_DTYPES:
            out["kv_dtype"] = KV_CACHE_DTYPES[text.lower()]
        else:
            unmodelled["kv_cache_dtype"] = text
    for key, high in (("pipeline_parallel_size", MAX_TP), ("data_parallel_size", MAX_DP),
                      ("replicas", MAX_REPLICAS), ("replica_groups", MAX_REPLICAS)):
        if get(key) is not None:
            out[key] = _count(doc, key, where, high)
    if get("enable_expert_parallel") is not None:
        out["enable_expert_parallel"] = flag_field(get("enable_expert_parallel"), "enable_expert_parallel", where)
    if get("all2all_backend") is not None:
        text = _text(get("all2all_backend"), "all2all_backend", where, "a backend name (vLLM's --all2all-backend, "
                     "e.g. allgather_reducescatter)")
        if not _BACKEND.match(text):
            raise TwinInputError(f"{where}: all2all_backend = {shown(text)}: must be a backend name (vLLM's "
                                 f"--all2all-backend, e.g. allgather_reducescatter)")
        if text in ALL2ALL_BACKENDS:
            out["all2all_backend"] = text
        else:
            unmodelled["all2all_backend"] = text
    if unmodelled:
        out["unmodelled"] = unmodelled
    if get("disaggregation") is not None:
        value = get("disaggregation")
        m = _PD.match(value.strip()) if isinstance(value, str) else None
        if m is None or not 1 <= int(m.group(1)) <= MAX_REPLICAS or not 1 <= int(m.group(2)) <= MAX_REPLICAS:
            raise TwinInputError(f"{where}: disaggregation = {shown(value)}: must be \"<P>P<D>D\", the prefill and "
                                 f"decode replicas (1 to {MAX_REPLICAS:,} each), e.g. \"1P2D\"")
        out["disaggregation"] = f"{int(m.group(1))}P{int(m.group(2))}D"
    if get("speculative_config") is not None:
        out["speculative_config"] = _speculative(get("speculative_config"), where)
    elif any(get(k) is not None for k in SPEC_DECODE_KEYS):
        # vllm bench serve records these counters only for a speculative server
        out["speculative_config"] = "the file's spec_decode_* counters"
    return out


__all__ = ["KV_CACHE_DTYPES", "MAX_DP", "layout_fields"]
