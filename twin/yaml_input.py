"""YAML from users, with a malformed file reported as one line: where, and what the parser found."""

from __future__ import annotations

from typing import Any

import yaml

from twin.errors import TwinInputError


def parse_yaml(text: str, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TwinInputError(f"{source}{where}: malformed YAML: {problem}") from None
