"""Fuzz cases for traces: Azure, BurstGPT and length-only CSV, Mooncake JSONL (cells, rows and whole files
mutated; the oracle judged on the final rows)."""

from __future__ import annotations

import json
import math

import yaml
from hypothesis import strategies as st

from fuzz_values import VALUES, Case, Spec, encoded, refusal


# each format: the header, a row builder from (t_s, prompt, output), and the scenario's workload section
TRACE_FORMATS = {
    "azure": ("TIMESTAMP,ContextTokens,GeneratedTokens",
              lambda t, p, o: [f"2023-11-16 18:{int(t) // 60:02d}:{t % 60:09.6f}", str(p), str(o)],
              {}),
    "burstgpt": ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
                 lambda t, p, o: [f"{t:.3f}", "ChatGPT", str(p), str(o), str(p + o), "Conversation log"],
                 {}),
    "lengths": ("num_prefill_tokens,num_decode_tokens", lambda t, p, o: [str(p), str(o)],
                {"arrivals": {"process": "poisson", "rate_per_s": 50}}),
}
# cell values that make a row invalid, with the reason
BAD_CELLS = [("-5", "a negative token count"), ("abc", "text for a token count"), ("", "an empty cell"),
             ("1.5", "a fractional token count"), ("nan", "NaN"), ("inf", "an infinity"),
             ("1e30", "a token count beyond any model"), (str(2**64), "a token count beyond int64")]
OK_CELLS = ["0007", " 12 ", "12.0"]
INT64_MAX = 2**63 - 1


@st.composite
def trace_rows(draw):
    n = draw(st.integers(1, 25))
    gaps = draw(st.lists(st.floats(0, 2, allow_nan=False).map(lambda x: round(x, 3)), min_size=n, max_size=n))
    prompts = draw(st.lists(st.integers(1, 3000), min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, 200), min_size=n, max_size=n))
    t, times = 0.0, []
    for g in gaps:
        t += g
        times.append(round(t, 3))
    return times, prompts, outputs


def _trace_scenario(trace: dict, extra: dict) -> bytes:
    doc = {"name": "fuzz-trace", "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b"},
           "workload": {"trace": trace, **extra}}
    return yaml.safe_dump(doc).encode()


def _token_cell_refusal(text: str, what: str) -> str | None:
    try:
        v = float(text.strip())
    except ValueError:
        return f"{what} {text!r} is not a number"
    if not math.isfinite(v) or not v.is_integer() or v < 0 or v > INT64_MAX:
        return f"{what} {text!r} is not a token count"
    return None


def csv_refusal(rows: list[list[str]], times: list[float], width: int, token_cols: list[int],
                zero_output: str) -> str | None:
    """Why the design must refuse these CSV rows (judged on the final rows)."""
    last = -math.inf
    for n, (row, t) in enumerate(zip(rows, times), start=2):
        if not row:
            continue
        if len(row) != width:
            return f"row {n}: {len(row)} fields, the header has {width}"
        for i, what in zip(token_cols, ("prompt", "output")):
            why = _token_cell_refusal(row[i], what)
            if why:
                return f"row {n}: {why}"
        if float(row[token_cols[0]]) == 0:
            return f"row {n}: a prompt of 0 tokens"
        if float(row[token_cols[1]]) == 0 and zero_output == "error":
            return f"row {n}: an output of 0 tokens without zero_output: one or skip"
        if t < last:
            return f"row {n}: a timestamp that goes back in time"
        last = t
    return None


@st.composite
def csv_trace_cases(draw) -> Case:
    fmt = draw(st.sampled_from(sorted(TRACE_FORMATS)))
    header, build, extra = TRACE_FORMATS[fmt]
    times, prompts, outputs = draw(trace_rows())
    rows = [build(t, p, o) for t, p, o in zip(times, prompts, outputs)]
    names = header.split(",")
    width = len(names)
    token_cols = [i for i, name in enumerate(names) if ("oken" in name or "num_" in name) and "Total" not in name]
    zero_output = "error"
    for _ in range(draw(st.integers(0, 3))):
        r = draw(st.integers(0, len(rows) - 1))
        op = draw(st.sampled_from(["bad-cell", "ok-cell", "zero-output", "zero-prompt", "short", "long",
                                   "blank", "back-in-time"]))
        if op in ("bad-cell", "ok-cell", "zero-output", "zero-prompt") and len(rows[r]) != width:
            continue
        if op == "bad-cell":
            rows[r][draw(st.sampled_from(token_cols))] = draw(st.sampled_from(BAD_CELLS))[0]
        elif op == "ok-cell":
            rows[r][token_cols[0]] = draw(st.sampled_from(OK_CELLS))
        elif op == "zero-output":
            rows[r][token_cols[1]] = "0"
            zero_output = draw(st.sampled_from(["error", "one", "skip"]))
        elif op == "zero-prompt":
            rows[r][token_cols[0]] = "0"
        elif op == "short":
            rows[r] = rows[r][:draw(st.integers(1, width - 1))]
        elif op == "long":
            rows[r] = rows[r] + ["9"]
        elif op == "blank":
            rows.insert(r, [])
            times.insert(r, times[r])
        elif op == "back-in-time" and fmt != "lengths" and len(rows[r]) == width and times[r] >= 1:
            times[r] = 0.0
            rows[r][0] = build(0.0, 1, 1)[0]
    case = Case(f"trace-{fmt}", ["run", "{d}/s.yaml", "-q"])
    text = header + "\n" + "\n".join(",".join(row) for row in rows) + "\n"
    data, why, intact = draw(encoded(text))
    case.refuse(why)
    if intact:
        case.refuse(csv_refusal(rows, times if fmt != "lengths" else [0.0] * len(rows), width, token_cols,
                                zero_output))
    case.files = {"t.csv": data, "s.yaml": _trace_scenario(
        {"path": "t.csv", "format": draw(st.sampled_from([fmt, "auto"])), "zero_output": zero_output}, extra)}
    return case


def mooncake_refusal(objs: list[dict]) -> str | None:
    """Why the design must refuse these Mooncake rows (judged on the final rows)."""
    timed = ["timestamp" in o for o in objs]
    if any(timed) and not all(timed):
        return "a timestamp in some rows only"
    last = -math.inf
    for i, o in enumerate(objs, start=1):
        for key in ("input_length", "output_length"):
            if key not in o:
                return f"line {i}: {key} missing"
            why = refusal(o[key], Spec("int", 1, INT64_MAX))
            if why:
                return f"line {i}: {key} = {o[key]!r} is {why}"
        if "timestamp" in o:
            why = refusal(o["timestamp"], Spec("float"))
            if why:
                return f"line {i}: timestamp = {o['timestamp']!r} is {why}"
            # a numeric string the reader accepts compares as its number
            if float(o["timestamp"]) < last:
                return f"line {i}: a timestamp that goes back in time"
            last = float(o["timestamp"])
        ids = o.get("hash_ids")
        if ids is not None:
            if not isinstance(ids, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in ids):
                return f"line {i}: hash_ids = {ids!r} is not a list of integers"
            if len(ids) != -(-int(float(o["input_length"])) // 512):
                return f"line {i}: hash_ids do not match input_length"
    return None


@st.composite
def mooncake_cases(draw) -> Case:
    times, prompts, outputs = draw(trace_rows())
    objs = [{"timestamp": int(t * 1000), "input_length": p, "output_length": o,
             "hash_ids": list(range(i * 10, i * 10 + -(-p // 512)))}
            for i, (t, p, o) in enumerate(zip(times, prompts, outputs))]
    case = Case("trace-mooncake", ["run", "{d}/s.yaml", "-q"])
    for _ in range(draw(st.integers(0, 3))):
        r = draw(st.integers(0, len(objs) - 1))
        key = draw(st.sampled_from(["timestamp", "input_length", "output_length", "hash_ids"]))
        if draw(st.booleans()):
            objs[r].pop(key, None)
        else:
            objs[r][key] = draw(st.sampled_from(VALUES))
    lines = [json.dumps(o, allow_nan=True) for o in objs]
    cut = None
    if draw(st.booleans()):
        r = draw(st.integers(0, len(lines) - 1))
        lines[r] = lines[r][:draw(st.integers(1, len(lines[r]) - 1))]
        cut = f"line {r + 1}: truncated JSON"
    data, why, intact = draw(encoded("\n".join(lines) + "\n"))
    case.refuse(why)
    if intact:
        case.refuse(cut or mooncake_refusal(objs))
    case.files = {"t.jsonl": data, "s.yaml": _trace_scenario({"path": "t.jsonl", "format": "mooncake"}, {})}
    return case
