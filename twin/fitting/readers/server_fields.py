"""The server a `vllm bench serve` result states at its top level (``--metadata KEY=VALUE`` entries, and the
keys the twin's own ``--json`` writes: ``twin.results.server_keys``) or inference-perf's ``exp-config.yaml``
states (``exp_config_server``), checked as it is read, so a bad value is one line naming the file, the key, what
is allowed and the value (cut to a readable length).

``gpu`` and ``model_id``: text (a catalogue name, an alias, a Hugging Face id or a spec / config path), at most
``MAX_NAME_CHARS`` characters. ``tensor_parallel_size``: a whole number 1 to 64. ``vllm_version``: a release
string the twin models (``twin.core.vllm_versions``); a JSON number is refused, since it loses the release's
trailing zeros (``0.10`` reads ``0.1``). The flags: true or false (or the text ``"true"`` / ``"false"`` / ``"1"`` /
``"0"`` that ``--metadata`` writes). The counts (``max_num_seqs``, ``max_num_batched_tokens``, ``max_model_len``,
``block_size``): whole numbers 1 to ``MAX_KNOB`` (``block_size`` one of vLLM's). ``gpu_memory_utilization``: a
number in (0, 1]. ``--metadata`` records every value as text, so numeric text is read as the number. A key given
as null is absent."""

from __future__ import annotations

import math
from typing import Any

from twin.core.vllm_versions import parse_vllm_version
from twin.errors import TwinInputError
from twin.fitting.readers.fields import shown, whole
from twin.results.server_keys import SERVER_KNOBS
from twin.scenario import VLLM_BLOCK_SIZES

MAX_NAME_CHARS = 4096          # a GPU or model name, alias, Hugging Face id or a path (PATH_MAX)
MAX_VERSION_CHARS = 100        # the longest release string vLLM tags (e.g. 0.11.1rc2+cu130.post1...) fits
MAX_KNOB = 2**31 - 1           # a count vLLM keeps as a 32-bit integer (block ids, token budgets)
MAX_TP = 64                    # twin.fitting.run_checks: a run's tensor-parallel size
FLAGS = ("enable_prefix_caching", "enable_chunked_prefill", "async_scheduling")


def name_field(doc: dict[str, Any], key: str, where: str) -> str | None:
    """``doc[key]`` as a name (None when absent or null): text, not blank, at most ``MAX_NAME_CHARS``."""
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS or "\x00" in value:
        raise TwinInputError(f"{where}: {key} = {shown(value)}: must be a name (text of 1 to {MAX_NAME_CHARS:,} "
                             f"characters), e.g. " + ("H100-SXM (twin list gpus)" if key == "gpu" else
                                                      "meta-llama/Llama-3.1-8B-Instruct (twin list models)"))
    return value


def tp_field(doc: dict[str, Any], where: str, key: str = "tensor_parallel_size") -> int | None:
    value = doc.get(key)
    if value is None:
        return None
    tp = whole(value, key, where, low=1)
    if tp > MAX_TP:
        raise TwinInputError(f"{where}: {key} = {shown(value)}: must be a whole number 1 to {MAX_TP}")
    return tp


def exp_config_server(doc: dict[str, Any], where: str) -> dict[str, Any]:
    """inference-perf's ``exp-config.yaml``, checked: ``model`` (a name), ``tensor_parallelism`` (or
    ``tensor_parallel_size``; both, if given, must agree) as ``tensor_parallel_size``, and the vLLM settings; other
    keys are not read."""
    if not isinstance(doc, dict):
        raise TwinInputError(f"{where}: expected a mapping of server settings (model, tensor_parallelism, ...)")
    tp, other = tp_field(doc, where, "tensor_parallelism"), tp_field(doc, where)
    if tp is not None and other is not None and tp != other:
        raise TwinInputError(f"{where}: tensor_parallelism = {tp} but tensor_parallel_size = {other}: give one")
    out: dict[str, Any] = {"model": name_field(doc, "model", where),
                           "tensor_parallel_size": tp if tp is not None else other}
    return {**{k: v for k, v in out.items() if v is not None}, **server_fields(doc, where, yaml_numbers=True)}


def flag_field(value: Any, field: str, where: str) -> bool:
    """A flag: true or false, or the text ``--metadata`` writes for one."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "1", "0"):
        return value.strip().lower() in ("true", "1")
    raise TwinInputError(f"{where}: {field} = {shown(value)}: must be true or false")


def _version(value: Any, where: str, yaml_numbers: bool = False) -> str:
    if yaml_numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)          # YAML reads 0.11 as a number, as a scenario's server.vllm_version
    if not isinstance(value, str) or len(value) > MAX_VERSION_CHARS:
        why = "a JSON number loses the release's trailing zeros (0.10 reads 0.1): " if \
            isinstance(value, (int, float)) and not isinstance(value, bool) else ""
        raise TwinInputError(f"{where}: vllm_version = {shown(value)}: {why}must be a release string (at most "
                             f"{MAX_VERSION_CHARS} characters), e.g. \"0.11.0\"")
    try:
        parse_vllm_version(value)
    except ValueError as exc:
        raise TwinInputError(f"{where}: vllm_version = {exc}") from None
    return value


def _fraction(given: Any, field: str, where: str) -> float:
    value = given
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 < value <= 1:
        raise TwinInputError(f"{where}: {field} = {shown(given)}: must be a number in (0, 1], the fraction of GPU "
                             f"memory vLLM may use")
    return float(value)


def server_fields(doc: dict[str, Any], where: str, *, yaml_numbers: bool = False) -> dict[str, Any]:
    """The vLLM settings ``doc`` states (``SERVER_KNOBS``), checked; absent or null keys are left out.
    ``yaml_numbers``: ``doc`` is YAML (inference-perf's ``exp-config.yaml``), where a release written ``0.11``
    reads as a number: taken as its text, as a scenario takes it."""
    out: dict[str, Any] = {}
    for knob in SERVER_KNOBS:
        value = doc.get(knob)
        if value is None:
            continue
        if knob == "vllm_version":
            out[knob] = _version(value, where, yaml_numbers)
        elif knob in FLAGS:
            out[knob] = flag_field(value, knob, where)
        elif knob == "gpu_memory_utilization":
            out[knob] = _fraction(value, knob, where)
        else:
            n = whole(value, knob, where, low=1)
            if n > MAX_KNOB:
                raise TwinInputError(f"{where}: {knob} = {shown(value)}: must be a whole number 1 to {MAX_KNOB:,}")
            if knob == "block_size" and n not in VLLM_BLOCK_SIZES:
                raise TwinInputError(f"{where}: block_size = {shown(value)}: must be one of vLLM's block sizes "
                                     f"{', '.join(map(str, VLLM_BLOCK_SIZES))}")
            out[knob] = n
    return out


__all__ = ["FLAGS", "MAX_KNOB", "MAX_NAME_CHARS", "MAX_TP", "MAX_VERSION_CHARS", "exp_config_server", "flag_field",
           "name_field", "server_fields", "tp_field"]
