"""The server knobs a `vllm bench serve` result states at its top level beyond the ones every reader reads
(``twin.fitting.readers.server_fields``): CUDA graphs, a KV-block override, KV offloading, the entry point and the
scheduler's behaviours, under the keys the twin's own ``--json`` writes (``twin.results.server_keys.KNOB_KEYS``:
vLLM's option name where vLLM has one, e.g. ``scheduling_policy``, else the twin's field name), and
``server_start`` (``"cold"``: the run is its server's first traffic).

Each value is checked as the scenario's ``server`` section checks it (``twin.scenario.ServerConfig``: its types,
ranges and choices), so a bad value is one line naming the file, the key, what is allowed and the value. Text as
``--metadata KEY=VALUE`` records it is read as the value: a flag's ``"true"`` / ``"false"`` / ``"1"`` / ``"0"``,
a number's digits, a choice in any case (vLLM spells ``cudagraph_mode`` in capitals: ``FULL_DECODE_ONLY``), an
object (``kv_offloading_lower``) as its JSON text."""

from __future__ import annotations

import json
import math
import typing
from typing import Any

from pydantic import ValidationError

from twin.errors import TwinInputError
from twin.fitting.readers.fields import shown
from twin.fitting.readers.server_fields import MAX_NAME_CHARS, flag_field
from twin.results.server_keys import KNOB_KEYS
from twin.scenario import ServerConfig
from twin.workload.validation_errors import format_validation_error

SERVER_STARTS = ("warm", "cold")


def _kind(field: str) -> str:
    """``flag``, ``number``, ``choice`` or ``object``: how ``--metadata`` text for the field is read."""
    annotation = ServerConfig.model_fields[field].annotation
    args = [annotation] if typing.get_origin(annotation) is typing.Literal else \
        [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    if bool in args:
        return "flag"
    if args[0] in (int, float):
        return "number"
    if typing.get_origin(args[0]) is typing.Literal:
        return "choice"
    return "object"


def _as_value(value: Any, key: str, kind: str, where: str) -> Any:
    """``value`` as the field's type where it is ``--metadata`` text; other values are left to the model."""
    if kind == "flag":          # true or false, or the text --metadata writes for one (not a number)
        return flag_field(value, key, where)
    if not isinstance(value, str):
        return value
    if len(value) > MAX_NAME_CHARS:
        raise TwinInputError(f"{where}: {key} = {shown(value)}: at most {MAX_NAME_CHARS:,} characters")
    text = value.strip()
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            return value
        return int(number) if math.isfinite(number) and number == int(number) and "." not in text \
            and "e" not in text.lower() else number
    if kind == "choice":
        return text.lower()
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return value


def _reason(exc: ValidationError, field: str) -> str:
    """The model's one line without the field's own name (an object's inner field kept: ``size_gib: ...``)."""
    line = format_validation_error(exc)
    for head in (f"{field}: ", f"{field}."):
        if line.startswith(head):
            return line[len(head):]
    return line


def knob_fields(doc: dict[str, Any], where: str) -> dict[str, Any]:
    """The knobs of ``KNOB_KEYS`` ``doc`` states, checked, by the twin's field name (``server.FIELD``); absent or
    null keys are left out."""
    out: dict[str, Any] = {}
    for key, field in KNOB_KEYS.items():
        value = doc.get(key)
        if value is None:
            continue
        given = _as_value(value, key, _kind(field), where)
        try:
            checked = ServerConfig.model_validate({field: given})
        except ValidationError as exc:
            raise TwinInputError(f"{where}: {key} = {shown(value)}: {_reason(exc, field)}") from None
        out[field] = checked.model_dump(include={field})[field]
    return out


def cold_start_field(doc: dict[str, Any], where: str) -> bool:
    """Whether ``doc``'s ``server_start`` says the run was its server's first traffic (``"cold"``)."""
    value = doc.get("server_start")
    if value is None:
        return False
    text = value.strip().lower() if isinstance(value, str) and len(value) <= 100 else None
    if text not in SERVER_STARTS:
        raise TwinInputError(f"{where}: server_start = {shown(value)}: must be \"warm\" or \"cold\" (the run was "
                             f"its freshly started server's first traffic)")
    return text == "cold"


__all__ = ["SERVER_STARTS", "cold_start_field", "knob_fields"]
