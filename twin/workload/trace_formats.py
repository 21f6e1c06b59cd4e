"""The trace formats' readers: Azure LLM inference 2023 CSV, BurstGPT CSV, length-only CSV and Mooncake JSONL,
each a ``Trace`` (see ``twin.workload.traces`` for the policies they share)."""

from __future__ import annotations

from pathlib import Path

from twin.errors import TwinInputError
from twin.workload.trace_data import MOONCAKE_BLOCK, Trace
from twin.workload.trace_rows import TraceRows, WallClock, csv_rows, jsonl_rows, seconds, token_count

LENGTH_COLUMN_DEFAULTS = ("num_prefill_tokens", "num_decode_tokens")


def read_azure(path: Path, *, zero_output: str = "error") -> Trace:
    """Azure LLM inference trace 2023/2024: ``TIMESTAMP, ContextTokens, GeneratedTokens``."""
    rows = TraceRows(path, "ContextTokens", "GeneratedTokens", "TIMESTAMP", zero_output)
    clock = WallClock()
    ti = ci = gi = None
    for line, row, index in csv_rows(path, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")):
        if ti is None:
            ti, ci, gi = index["TIMESTAMP"], index["ContextTokens"], index["GeneratedTokens"]
        rows.add(line, token_count(row[ci], path, line, "ContextTokens"),
                 token_count(row[gi], path, line, "GeneratedTokens"),
                 clock(row[ti], path, line, "TIMESTAMP"))
    return rows.build("azure", timed=True)


def read_burstgpt(path: Path, *, zero_output: str = "error") -> Trace:
    """BurstGPT: ``Timestamp, Session ID, Elapsed time, Model, Request tokens, Response tokens, ...``.

    ``Session ID`` values (when the column is there and the cell is not empty) are numbered 0, 1, ... in
    order of first appearance."""
    rows = TraceRows(path, "Request tokens", "Response tokens", "Timestamp", zero_output)
    sessions: list[int | None] = []
    session_index: dict[str, int] = {}
    for line, row, index in csv_rows(path, ("Timestamp", "Request tokens", "Response tokens")):
        t = seconds(row[index["Timestamp"]], path, line, "Timestamp")
        kept = rows.add(line, token_count(row[index["Request tokens"]], path, line, "Request tokens"),
                        token_count(row[index["Response tokens"]], path, line, "Response tokens"), t)
        if kept:
            sid = row[index["Session ID"]].strip() if "Session ID" in index else ""
            sessions.append(session_index.setdefault(sid, len(session_index)) if sid else None)
    has_sessions = any(s is not None for s in sessions)
    return rows.build("burstgpt", timed=True, session_ids=sessions if has_sessions else None)


def read_lengths(path: Path, *, zero_output: str = "error", prompt_column: str | None = None,
                 output_column: str | None = None) -> Trace:
    """A length-only CSV (no timestamps), by default ``num_prefill_tokens, num_decode_tokens``."""
    pc = prompt_column or LENGTH_COLUMN_DEFAULTS[0]
    oc = output_column or LENGTH_COLUMN_DEFAULTS[1]
    rows = TraceRows(path, pc, oc, None, zero_output)
    pi = oi = None
    for line, row, index in csv_rows(path, (pc, oc)):
        if pi is None:
            pi, oi = index[pc], index[oc]
        rows.add(line, token_count(row[pi], path, line, pc), token_count(row[oi], path, line, oc), None)
    return rows.build("lengths", timed=False)


def read_mooncake(path: Path, *, zero_output: str = "error", block_size: int = MOONCAKE_BLOCK) -> Trace:
    """Mooncake JSONL: ``timestamp`` (ms), ``input_length``, ``output_length``, ``hash_ids``.

    ``timestamp`` may be absent from every row (then the trace is length-only); ``hash_ids`` may be absent
    (then that row's prompt is unique)."""
    rows = TraceRows(path, "input_length", "output_length", "timestamp", zero_output)
    hashes: list[tuple[int, ...]] = []
    any_hash = False
    timed: bool | None = None
    for line, obj in jsonl_rows(path):
        for key in ("input_length", "output_length"):
            if key not in obj:
                raise TwinInputError(f"{path}:{line}: column {key!r} is missing")
        has_t = "timestamp" in obj
        if timed is None:
            timed = has_t
        elif has_t != timed:
            raise TwinInputError(f"{path}:{line}: column 'timestamp' is "
                                 f"{'missing' if timed else 'present'} here but not in earlier rows")
        t = seconds(obj["timestamp"], path, line, "timestamp") / 1000.0 if has_t else None
        prompt = token_count(obj["input_length"], path, line, "input_length")
        ids = obj.get("hash_ids")
        if ids is not None:
            if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
                raise TwinInputError(f"{path}:{line}: column 'hash_ids' must be a list of integers")
            need = -(-prompt // block_size)
            if len(ids) != need:
                raise TwinInputError(f"{path}:{line}: column 'hash_ids' has {len(ids)} ids but input_length "
                                     f"{prompt} needs ceil({prompt}/{block_size}) = {need} (block_size "
                                     f"{block_size}; set workload.trace.block_size if the trace uses another)")
            any_hash = any_hash or bool(ids)
        if rows.add(line, prompt, token_count(obj["output_length"], path, line, "output_length"), t):
            hashes.append(tuple(ids) if ids else ())
    return rows.build("mooncake", timed=bool(timed), hash_ids=hashes if any_hash else None,
                      block_size=block_size)
