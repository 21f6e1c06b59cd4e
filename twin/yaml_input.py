"""Text files and YAML from users, read with checks: a stated size limit, the encoding (UTF-8, or UTF-16 /
UTF-32 when the file starts with their byte-order mark; a UTF-8 BOM is dropped), no NUL characters, and a
malformed file reported as one line: where, and what the parser found."""

from __future__ import annotations

import codecs
import copy
import io
import math
import os
import select
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import yaml

from twin.errors import TwinInputError

MAX_INPUT_BYTES = 64 << 20        # a scenario, plan, profile, bench result or price file (64 MiB)
MAX_TRACE_BYTES = 4 << 30         # a trace file (4 GiB; its rows are limited too, see twin.workload.trace_rows)
PIPE_WAIT_S = 10.0                # how long a pipe may stay silent before its first byte (a named pipe nobody writes)

# UTF-32 first: its little-endian mark begins with UTF-16's
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def text_encoding(head: bytes) -> str:
    """The codec for a file starting with ``head``: by its byte-order mark, else UTF-8."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    return "utf-8"


def _check_size(p: Path, what: str, max_bytes: int) -> bool:
    """Refuse a device, a socket or a file over ``max_bytes``; True when ``p`` is a pipe (read as a stream)."""
    try:
        st = p.stat()
    except OSError as exc:
        raise TwinInputError(f"{p}: cannot read {what} ({exc.strerror or exc})") from None
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        # /dev/zero or /dev/urandom never end; a pipe (e.g. bash's <(...)) is read, up to the size limit
        raise TwinInputError(f"{p}: a device or socket; the {what} must be a file")
    size = st.st_size
    if size > max_bytes:
        raise TwinInputError(f"{p}: {size:,} bytes; a {what} may be at most {max_bytes:,} bytes")
    return stat.S_ISFIFO(st.st_mode)


def _open_pipe(p: Path, what: str) -> IO[bytes]:
    """A pipe opened for reading once it has given its first bytes (or its writer has closed it): a named pipe
    that nothing writes to is an error after ``PIPE_WAIT_S`` instead of a wait without end."""
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)    # opening a named pipe without a writer blocks otherwise
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(PIPE_WAIT_S * 1000):
            raise TwinInputError(f"{p}: a pipe that gave nothing in {PIPE_WAIT_S:g} s (no writer?); the {what} "
                                 f"must be a file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open_binary(p: Path, what: str, max_bytes: int) -> IO[bytes]:
    is_pipe = _check_size(p, what, max_bytes)
    try:
        return _open_pipe(p, what) if is_pipe else open(p, "rb")
    except OSError as exc:
        raise TwinInputError(f"{p}: cannot read {what} ({exc.strerror or exc})") from None


def not_a_file(path: Path) -> str | None:
    """What an existing ``path`` is when it is not a regular file ("a folder", "a pipe", "a device or socket"):
    for readers that read a file twice (a trace: its format from the header, then its rows) or check it exists
    before reading; None for a regular file or a path that does not exist."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a pipe" if stat.S_ISFIFO(mode) else "a device or socket"


def must_be_file(path: Path, *, shown: Callable[[object], str], kind: str = "a file",
                 missing: str = "no such file") -> None:
    """One line unless ``path`` names something to read: a name no path may have (too long, a NUL byte; echoed
    through ``shown``), a folder ("a directory, not ``kind``") or nothing there (``missing``). A pipe, a device or
    a link loop passes: the reader says what each is."""
    try:
        folder, there = path.is_dir(), path.exists() or path.is_symlink()
    except (OSError, ValueError):      # ENAMETOOLONG, a NUL byte
        raise TwinInputError(f"{shown(path)}: not a file name (longer than a path may be, or holding a NUL "
                             "byte)") from None
    if folder:
        raise TwinInputError(f"{path}: a directory, not {kind}")
    if not there:
        raise TwinInputError(f"{path}: {missing}")


def decode_error(source: str, encoding: str, exc: UnicodeDecodeError, data: bytes | None = None,
                 line: int | None = None) -> TwinInputError:
    """One line for text that does not decode: where, which byte, and what to do."""
    if line is None and data is not None:
        line = data.count(b"\n", 0, exc.start) + 1
    where = f"{source}:{line}" if line is not None else source
    name = "UTF-8" if encoding.startswith("utf-8") else encoding.upper()
    bad = exc.object[exc.start:exc.start + 1]
    byte = f" (byte 0x{bad[0]:02x})" if bad else ""
    return TwinInputError(f"{where}: not {name} text{byte}; save the file as UTF-8")


def stream_decode_error(path: str | Path, encoding: str, exc: UnicodeDecodeError) -> TwinInputError:
    """``decode_error`` for a file read as a stream (the stream reads in chunks, so find the line again)."""
    if not encoding.startswith("utf-8"):
        return decode_error(str(path), encoding, exc)
    with open(path, "rb") as f:
        for line, raw in enumerate(f, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as bad:
                return decode_error(str(path), encoding, bad, line=line)
    return decode_error(str(path), encoding, exc)


def decode_text(data: bytes, source: str) -> str:
    encoding = text_encoding(data[:4])
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise decode_error(source, encoding, exc, data if encoding == "utf-8" else None) from None
    nul = text.find("\x00")
    if nul >= 0:
        raise TwinInputError(f"{source}:{text.count(chr(10), 0, nul) + 1}: a NUL character; not a text file")
    return text


def read_text(path: str | Path, what: str = "file", max_bytes: int = MAX_INPUT_BYTES) -> str:
    """A user's text file, whole (``what`` names it in errors: "scenario", "profile", ...)."""
    p = Path(path)
    try:
        with _open_binary(p, what, max_bytes) as f:
            data = f.read(max_bytes + 1)    # a pipe has no size to check beforehand
    except OSError as exc:
        raise TwinInputError(f"{p}: cannot read {what} ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise TwinInputError(f"{p}: more than {max_bytes:,} bytes; a {what} may be at most {max_bytes:,} bytes")
    return decode_text(data, str(p))


def open_text(path: str | Path, what: str = "trace", max_bytes: int = MAX_TRACE_BYTES,
              newline: str | None = None) -> IO[str]:
    """A user's text file as a stream (for files read row by row); decoding errors surface while reading
    (``decode_error`` words them)."""
    p = Path(path)
    raw = _open_binary(p, what, max_bytes)
    encoding = text_encoding(raw.peek(4)[:4]) if hasattr(raw, "peek") else "utf-8"
    return io.TextIOWrapper(raw, encoding=encoding, newline=newline)


class DuplicateKeyYAMLError(yaml.constructor.ConstructorError):
    """A key given twice in one YAML mapping (``UniqueKeyLoader``)."""


class UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses a key given twice in one mapping (YAML forbids it; PyYAML keeps the last one
    silently, so ``server:`` written twice would drop the first block's settings). Keys merged in with ``<<``
    may be overridden, as YAML intends."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    raise DuplicateKeyYAMLError(
                        None, None, f"the key {key!r} appears twice in one mapping; give each key once",
                        key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


class UntaggedLoader(UniqueKeyLoader):
    """A safe loader that refuses every explicit YAML tag (``!!binary``, ``!!str``, ``!custom``, even ``!``):
    for files from people the server does not trust (dashboard uploads), where a tag would turn a scalar
    into a type (bytes, a set, a timestamp) that the checks on plain text never see."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        tag = getattr(event, "tag", None)
        if tag is not None:
            tag = tag.replace("tag:yaml.org,2002:", "!!")
            raise yaml.constructor.ConstructorError(
                None, None, f"the YAML tag {tag!r} is not allowed here (write plain values)", event.start_mark)
        return super().compose_node(parent, index)


def parse_yaml(text: str, source: str, *, tags: bool = True) -> Any:
    """YAML text from a user as plain data; ``tags=False`` refuses every explicit tag (``UntaggedLoader``)."""
    try:
        data = yaml.load(text, Loader=UniqueKeyLoader if tags else UntaggedLoader)  # noqa: S506 (safe loaders)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TwinInputError(f"{source}{where}: malformed YAML: {problem}") from None
    except RecursionError:
        raise TwinInputError(f"{source}: malformed YAML: nested too deeply") from None
    check_expanded_size(data, source)
    return data


# libyaml's parser (when PyYAML was built with it) reads the bundled catalogs ~10x faster; user files keep the
# pure-Python parser, whose error messages and marks the one-line errors above are written against.
_PACKAGED_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_packaged_yaml(path: Path) -> Any:
    """A YAML data file shipped with the twin (trusted, well-formed): same values as ``yaml.safe_load``."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_PACKAGED_LOADER)  # noqa: S506 (a safe loader)


MAX_YAML_NODES = 1_000_000        # values in a YAML document once its aliases are expanded


def check_expanded_size(data: Any, source: str, limit: int = MAX_YAML_NODES) -> None:
    """Aliases let a few lines of YAML stand for billions of values (or for a structure that contains itself);
    everything downstream copies them out, so count the expanded size first."""
    sizes: dict[int, int] = {}
    open_ids: set[int] = set()

    def size(node: Any) -> int:
        if not isinstance(node, (dict, list)):
            return 1
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_ids:
            raise TwinInputError(f"{source}: malformed YAML: an alias refers to a value that contains it")
        open_ids.add(key)
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        total = 1
        for child in children:
            total += size(child)
            if total > limit:
                raise TwinInputError(f"{source}: YAML expands to more than {limit:,} values (through aliases); "
                                     f"at most {limit:,}")
        open_ids.discard(key)
        sizes[key] = total
        return total

    try:
        size(data)
    except RecursionError:
        raise TwinInputError(f"{source}: malformed YAML: nested too deeply") from None


def load_yaml_file(path: str | Path, what: str = "file") -> Any:
    """Read and parse a user's YAML file (size, encoding and syntax checked)."""
    return parse_yaml(read_text(path, what), str(path))


REPLACE_MARKER = "_replace"


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Merge ``overrides`` into ``base`` key by key; a mapping with ``_replace: true`` replaces instead
    (e.g. switching ``workload.arrivals`` from poisson to closed_loop). A mapping of indices over a list merges
    into those items (``--set workload.classes.0.output_tokens=64``)."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and value.get(REPLACE_MARKER) is True:
            out[key] = {k: copy.deepcopy(v) for k, v in value.items() if k != REPLACE_MARKER}
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        elif isinstance(value, dict) and isinstance(out.get(key), list) and value and all(
                str(k).isdigit() for k in value):
            out[key] = _merge_items(out[key], value, key)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_items(items: list[Any], overrides: dict[Any, Any], name: str) -> list[Any]:
    """``overrides`` ({index: value}) merged into a copy of the list ``items``."""
    out = copy.deepcopy(items)
    for index, value in overrides.items():
        i = int(index)
        if i >= len(out):
            raise TwinInputError(f"{name}.{index} (an override): no such item ({name} has {len(out)}, numbered from 0)")
        both = isinstance(value, dict) and isinstance(out[i], dict)
        out[i] = deep_merge(out[i], value) if both else copy.deepcopy(value)
    return out


def parse_numeric_set_options(items: list[str] | tuple[str, ...], flag: str = "--set") -> dict[str, float]:
    """``--set NAME=NUMBER`` overrides of flat, numeric parameters (fit keys such as
    ``request_path_s@client_vllm_bench+vllm_0.10``, whose scope may hold a dot, so NAME is not split into a path)
    -> {name: finite float}; a missing ``=``, an empty name, a name given twice or a value that is not a finite
    number (a bool, text, NaN, inf) is a one-line error."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise TwinInputError(f"{flag} {item!r}: expected NAME=NUMBER")
        if name in out:
            raise TwinInputError(f"{flag} {name}: given twice")
        try:
            value = float(raw.strip())
        except ValueError:
            value = float("nan")
        if not math.isfinite(value):
            raise TwinInputError(f"{flag} {name}={raw.strip()!r}: expected a finite number")
        out[name] = value
    return out


def parse_set_options(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``--set server.max_num_seqs=4`` style overrides -> a nested mapping (values parsed as YAML scalars)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise TwinInputError(f"--set {item!r}: expected key.path=value")
        path, raw = item.split("=", 1)
        keys = [k for k in path.strip().split(".") if k]
        if not keys:
            raise TwinInputError(f"--set {item!r}: empty key path")
        value = parse_option_value(raw, f"--set {path.strip()}")
        node = out
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise TwinInputError(f"--set {item!r}: {key} is set twice")
        node[keys[-1]] = value
    return out


def parse_option_value(raw: str, source: str, *, text_if_malformed: bool = True) -> Any:
    """A value typed after ``KEY=`` on the command line (``--set``, ``--grid``, ``--search``), parsed as YAML with
    the checks a YAML file gets: no key twice, no nesting past the parser's depth, aliases expanded to at most
    ``MAX_YAML_NODES`` values. Malformed YAML is the text itself (``text_if_malformed``) or one line."""
    if not raw.strip():
        return ""
    try:
        value = yaml.load(raw, Loader=UniqueKeyLoader)  # noqa: S506 (a safe loader)
    except DuplicateKeyYAMLError as exc:
        raise TwinInputError(f"{source}: {exc.problem}") from None
    except yaml.YAMLError:
        if text_if_malformed:
            return raw
        raise TwinInputError(f"{source}: not a YAML value") from None
    except RecursionError:
        raise TwinInputError(f"{source}: the value is nested too deeply") from None
    check_expanded_size(value, source)
    return value
