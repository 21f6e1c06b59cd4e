"""The base of every config section's pydantic model, and the checks the workload's models share.

``StrictModel`` is frozen and lists the allowed keys when it meets an unknown one; ``one_of`` asks for exactly
one of a set of fields, ``one_distribution`` does so for a distribution (and orders a uniform range) and
``check_min_max`` orders a pair of bounds.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from twin.errors import did_you_mean, suggestion
from twin.workload.vllm_option_names import class_length_hint, vllm_name_hint


def _takes_bool(annotation: Any) -> bool:
    """Whether a field's type admits ``true``/``false`` (pydantic would otherwise read them as 1 and 0)."""
    if annotation is bool or annotation is Any:
        return True
    if typing.get_origin(annotation) in (dict, list, tuple):
        return True  # the items are checked by their own types
    return any(_takes_bool(arg) for arg in typing.get_args(annotation) if not isinstance(arg, (str, int)))


def _sections(annotation: Any) -> list[type]:
    """The ``StrictModel`` classes a field's type names (``ServerConfig``, ``X | None``), one level deep."""
    found = [annotation] if isinstance(annotation, type) and issubclass(annotation, StrictModel) else []
    return found + [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, StrictModel)]


def unknown_field_hint(model: type[BaseModel], key: object) -> str:
    """``"; did you mean 'max_num_seqs'?"`` for an unknown ``key`` of ``model``: a field the key begins with its
    unit left off (``rate`` -> ``rate_per_s``), else a section one level down that has the key
    (``max_num_seqs`` at the top -> ``server.max_num_seqs``), else a benchmark's length name in a task class
    (``input_tokens`` -> ``prompt.suffix_tokens``), else a close spelling, else the scenario's key for a vLLM
    option name (``quantization`` -> ``deployment.weight_dtype``); ``""`` when none fits."""
    names = sorted(model.model_fields)
    with_unit = [n for n in names if n.startswith(f"{key}_")]
    if with_unit:
        return suggestion(with_unit)
    nested = [f"{name}.{key}" for name, field in model.model_fields.items()
              for section in _sections(field.annotation) if key in section.model_fields]
    if nested:
        return suggestion(nested)
    return class_length_hint(names, key) or did_you_mean(key, names) or vllm_name_hint(key)


class StrictModel(BaseModel):
    """Base: unknown keys are an error that lists the allowed ones; ``true``/``false`` where a number belongs
    is an error too (not 1 or 0)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            allowed = set(cls.model_fields)
            unknown = [k for k in data if k not in allowed]
            if unknown:
                hint = unknown_field_hint(cls, unknown[0])
                raise ValueError(f"unknown field {unknown[0]!r}{hint} (allowed: {', '.join(sorted(allowed))})")
            for name, value in data.items():
                if isinstance(value, bool) and not _takes_bool(cls.model_fields[name].annotation):
                    raise ValueError(f".{name}: must be a number, not {str(value).lower()}")
        return data


def one_of(model: BaseModel, names: tuple[str, ...], what: str) -> str:
    given = [n for n in names if getattr(model, n) is not None]
    if len(given) != 1:
        got = ", ".join(given) if given else "none"
        raise ValueError(f"give exactly one of {', '.join(names)} for {what} (got {got})")
    return given[0]


def one_distribution(model: BaseModel, kinds: tuple[str, ...], what: str) -> BaseModel:
    """Exactly one kind is set, and a uniform range is ordered."""
    one_of(model, kinds, what)
    uniform = getattr(model, "uniform", None)
    if uniform is not None and uniform[0] > uniform[1]:
        raise ValueError(f".uniform: must be [lo, hi] with lo <= hi (got {list(uniform)})")
    return model


def check_min_max(lo: float | None, hi: float | None) -> None:
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"min must be <= max (got min {lo}, max {hi})")
