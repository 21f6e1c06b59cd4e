"""JSON from users, parsed with checks every reader shares: nesting at most ``MAX_JSON_DEPTH`` levels (a
deeply nested document is an error, not a ``RecursionError``), no key twice in one object (JSON leaves
duplicates undefined and Python keeps the last silently), numbers of at most Python's digit limit, and each
failure one ``TwinInputError`` line naming the file and line.

``parse_json`` parses one text; ``load_json_path`` reads a file (size and encoding checked by
``twin.yaml_input.read_text``) and parses it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from twin.errors import TwinInputError
from twin.yaml_input import read_text

MAX_JSON_DEPTH = 64       # nesting levels in one document (real result files and configs use fewer than 12)


class JsonSyntaxError(TwinInputError):
    """Text that is not one JSON document: ``msg`` and ``lineno`` as ``json.JSONDecodeError`` gives them."""

    def __init__(self, message: str, msg: str, lineno: int) -> None:
        super().__init__(message)
        self.msg, self.lineno = msg, lineno


class DuplicateKeyError(ValueError):
    """A key given twice in one JSON object (``STRICT_JSON`` raises it; callers add where)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return out


# one decoder, built once (json.loads with a hook builds a decoder per call: twice the cost per trace row)
STRICT_JSON = json.JSONDecoder(object_pairs_hook=_no_duplicates)


def duplicate_key(source: str, exc: DuplicateKeyError) -> TwinInputError:
    return TwinInputError(f"{source}: key {exc.key!r} appears twice in one object; each key once")


def check_depth(doc: Any, source: str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse a parsed document nested more than ``max_depth`` levels (walked without recursion)."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > max_depth:
            raise TwinInputError(f"{source}: JSON nested {depth}+ levels deep; at most {max_depth}")
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def parse_json(text: str, source: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """One JSON document from ``text``; ``source`` names it (a file, a file and line) in errors."""
    try:
        doc = STRICT_JSON.decode(text)
    except DuplicateKeyError as exc:
        raise duplicate_key(source, exc) from None
    except json.JSONDecodeError as exc:
        raise JsonSyntaxError(f"{source}:{exc.lineno}: not valid JSON ({exc.msg})", exc.msg, exc.lineno) from None
    except RecursionError:
        raise TwinInputError(f"{source}: JSON nested too deeply; at most {max_depth} levels") from None
    except ValueError as exc:   # an integer longer than Python's digit limit
        raise TwinInputError(f"{source}: not valid JSON ({str(exc).split(';')[0]})") from None
    check_depth(doc, source, max_depth)
    return doc


def load_json_path(path: str | Path, what: str = "file") -> Any:
    """Read and parse a user's JSON file (size, encoding, syntax, depth and duplicate keys checked)."""
    return parse_json(read_text(path, what), str(path))
