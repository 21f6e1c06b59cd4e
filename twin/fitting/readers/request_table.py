"""Per-request tables: a CSV with a header row, JSON Lines (one object per request) or a JSON list of objects,
one row per request a benchmark client sent (the twin's own ``--requests-out`` table reads as it is).

Columns, matched case-insensitively by name (the first listed that is present wins):

=================  ============================================================================================
send time          send_time, start_time, arrival_time, request_start_time, arrival, start, timestamp
first token time   first_token_time, first_token       (or a TTFT: ttft, time_to_first_token)
end time           end_time, finish_time, completion_time, request_end_time, finish, end
                   (or a latency: e2el, e2e_latency, latency, request_latency)
prompt tokens      prompt_tokens, input_tokens, num_prompt_tokens, input_len, prompt_len, input_length
output tokens      output_tokens, completion_tokens, num_output_tokens, output_len, generated_tokens,
                   output_length
status (optional)  status / success (completed when ok, success, succeeded, finished, completed, true, 1 or
                   200), or error (completed when empty)
concurrency (opt.) concurrency, max_concurrency, num_users
=================  ============================================================================================

Units: a time column's name says its unit by its ending: ``_ms`` milliseconds, ``_us`` microseconds, ``_ns``
nanoseconds, ``_s`` or no ending seconds (``send_time_ms``, ``ttft_s``, ``latency``). Times may have any
origin (epoch or run start). A row without a first-token or end time is a failed request.

Load: with a concurrency column, each distinct value is one run of that many users in a closed loop (a
concurrency sweep in one file); without, one open-loop run at the rate and burstiness of the send times
(``twin.fitting.readers.request_times``). Metrics are computed from the rows as `vllm bench serve` defines them."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

import numpy as np

from twin.errors import TwinInputError
from twin.fitting.measured_run import MeasuredRun
from twin.fitting.readers.fields import JsonLines, load_json, read_text, shown, whole
from twin.fitting.readers.request_times import RequestTimes, run_from_requests

ROLES: dict[str, tuple[str, ...]] = {
    "send": ("send_time", "start_time", "arrival_time", "request_start_time", "arrival", "start", "timestamp"),
    "first": ("first_token_time", "first_token"),
    "ttft": ("ttft", "time_to_first_token"),
    "end": ("end_time", "finish_time", "completion_time", "request_end_time", "finish", "end"),
    "e2el": ("e2el", "e2e_latency", "latency", "request_latency"),
    "prompt": ("prompt_tokens", "input_tokens", "num_prompt_tokens", "input_len", "prompt_len", "input_length"),
    "output": ("output_tokens", "completion_tokens", "num_output_tokens", "output_len", "generated_tokens",
               "output_length"),
    "status": ("status", "success"),
    "error": ("error",),
    "concurrency": ("concurrency", "max_concurrency", "num_users"),
}
TIME_ROLES = ("send", "first", "ttft", "end", "e2el")
UNIT_S = {"": 1.0, "_s": 1.0, "_ms": 1e-3, "_us": 1e-6, "_ns": 1e-9}
OK_STATUS = {"ok", "success", "succeeded", "finished", "completed", "true", "1", "200"}


def _columns(names: list[str]) -> dict[str, tuple[str, float]]:
    """role -> (the file's column name, seconds per unit) for every role the names cover."""
    lower = {n.strip().lower(): n for n in names if isinstance(n, str)}
    found: dict[str, tuple[str, float]] = {}
    for role, bases in ROLES.items():
        suffixes = UNIT_S if role in TIME_ROLES else {"": 1.0}
        for base in bases:
            hit = next(((lower[base + s], scale) for s, scale in suffixes.items() if base + s in lower), None)
            if hit:
                found[role] = hit
                break
    return found


def _covers(cols: dict[str, Any]) -> bool:
    return all(r in cols for r in ("send", "prompt", "output")) and ("first" in cols or "ttft" in cols) \
        and ("end" in cols or "e2el" in cols)


def _rows(path: Path) -> tuple[list[dict[str, Any]], list[int], str]:
    """(rows, their line numbers, kind) of a CSV, JSON Lines or JSON-list table."""
    doc = None
    if path.suffix.lower() != ".csv":
        try:
            doc = load_json(path)
        except TwinInputError:
            if path.suffix.lower() in (".json", ".jsonl"):
                raise
    if isinstance(doc, JsonLines):
        return list(doc), list(doc.line_numbers), "JSON Lines"
    if isinstance(doc, list):
        return doc, [i + 1 for i in range(len(doc))], "JSON list"
    if doc is not None:
        raise TwinInputError(f"{path}: expected a per-request table (CSV, JSON Lines or a JSON list of objects)")
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    rows, lines = [], []
    try:
        for row in reader:
            extra = row.pop(None, None)
            if extra and any(str(cell).strip() for cell in extra):   # more cells than the header names
                raise TwinInputError(f"{path}, line {reader.line_num}: {len(row) + len(extra)} cells; the "
                                     f"header names {len(reader.fieldnames or [])} columns")
            rows.append(row)
            lines.append(reader.line_num)
    except csv.Error as exc:      # a cell over the csv module's size limit, a stray quote or carriage return
        raise TwinInputError(f"{path}, line {reader.line_num}: not a valid CSV row ({exc})") from None
    return rows, lines, "CSV"


def is_request_table(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        rows, _, _ = _rows(path)
    except (TwinInputError, csv.Error):
        return False
    return bool(rows) and isinstance(rows[0], dict) and _covers(_columns(list(rows[0])))


def _time(row: dict[str, Any], col: tuple[str, float] | None, where: str) -> float:
    """Seconds, or NaN for an empty cell."""
    if col is None:
        return math.nan
    name, scale = col
    v = row.get(name)
    if v is None or (isinstance(v, str) and not v.strip()):
        return math.nan
    try:
        f = float(v) if not isinstance(v, bool) else math.nan
    except (TypeError, ValueError, OverflowError):
        f = math.nan
    if not math.isfinite(f) or f < 0 or not math.isfinite(f * scale):
        raise TwinInputError(f"{where}: {name} = {shown(v)}: must be a finite number >= 0 (the column name's ending "
                             f"gives the unit: _ms, _us, _ns, else seconds)")
    return f * scale


def _completed(row: dict[str, Any], cols: dict[str, tuple[str, float]]) -> bool:
    if "status" in cols:
        v = row.get(cols["status"][0])
        return str(v).strip().lower() in OK_STATUS
    if "error" in cols:
        v = row.get(cols["error"][0])
        return v is None or not str(v).strip() or str(v).strip().lower() in ("none", "null")
    return True


def read_request_table(path: Path) -> list[MeasuredRun]:
    rows, lines, kind = _rows(path)
    if not rows:
        raise TwinInputError(f"{path}: no rows")
    if not all(isinstance(r, dict) for r in rows):
        raise TwinInputError(f"{path}: every {kind} entry must be an object of named fields")
    names = list(dict.fromkeys(k for r in rows for k in r))
    cols = _columns(names)
    for role, alt, label in (("send", None, "send time"), ("prompt", None, "prompt tokens"),
                             ("output", None, "output tokens"), ("first", "ttft", "first-token time or TTFT"),
                             ("end", "e2el", "end time or latency")):
        if role not in cols and (alt is None or alt not in cols):
            accepted = ROLES[role] + (ROLES[alt] if alt else ())
            raise TwinInputError(f"{path}: no {label} column (accepted names: {', '.join(accepted)})")
    send, ttft, e2el, prompt, output, ok, users = [], [], [], [], [], [], []
    for row, line in zip(rows, lines):
        where = f"{path}, {'row' if kind == 'CSV' else 'line' if kind == 'JSON Lines' else 'entry'} {line}"
        s = _time(row, cols["send"], where)
        if math.isnan(s):
            raise TwinInputError(f"{where}: {cols['send'][0]} is empty: every request needs its send time")
        first = _time(row, cols.get("first"), where) if "first" in cols else s + _time(row, cols["ttft"], where)
        end = _time(row, cols.get("end"), where) if "end" in cols else s + _time(row, cols["e2el"], where)
        done = _completed(row, cols) and math.isfinite(first) and math.isfinite(end)
        p = whole(row.get(cols["prompt"][0]), cols["prompt"][0], where, low=1) if done else 0
        o = whole(row.get(cols["output"][0]), cols["output"][0], where, low=1) if done else 0
        if done and not s <= first <= end + 1e-9:
            raise TwinInputError(f"{where}: times out of order (send {s:g} s, first token {first:g} s, end "
                                 f"{end:g} s): need send <= first token <= end")
        send.append(s)
        ttft.append(first - s if done else math.nan)
        e2el.append(end - s if done else math.nan)
        prompt.append(p)
        output.append(o)
        ok.append(done)
        if "concurrency" in cols:
            users.append(whole(row.get(cols["concurrency"][0]), cols["concurrency"][0], where, low=1))
    times = RequestTimes(np.array(send), np.array(ttft), np.array(e2el), np.array(prompt, float),
                         np.array(output, float), np.array(ok, bool))
    names_for = {"ttft": "TTFT", "e2el": "latency", "prompt": cols["prompt"][0], "output": cols["output"][0]}
    if not users:
        times.check(str(path), names_for)
        return [run_from_requests(path.stem, f"request-table ({kind})", times)]
    runs = []
    users_arr = np.array(users)
    for c in sorted(set(users)):
        m = users_arr == c
        part = RequestTimes(times.send_s[m], times.ttft_s[m], times.e2el_s[m], times.prompt_tokens[m],
                            times.output_tokens[m], times.ok[m])
        part.check(f"{path} ({cols['concurrency'][0]} = {c})", names_for)
        runs.append(run_from_requests(f"{path.stem}/c{c}", f"request-table ({kind})", part, max_concurrency=c,
                                      closed_loop=True, experiment=path.stem))
    return runs
