"""Structure-aware fuzz cases: hypothesis strategies that start from small valid inputs (a scenario, its
``--set`` overrides, traces in the four formats, a calibration profile, a bench result, a sweep grid and a
plan file), mutate them, and say which mutations the design requires the CLI to refuse.

A ``Case`` holds the files to write (name -> bytes), the command line (``{d}`` stands for the folder the
files are in) and ``must_fail``: the reason the input is invalid, or None when either outcome is allowed."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from hypothesis import strategies as st

from fuzz_values import VALUES, Spec, refusal, yaml_scalar
from twin.hardware.catalog import list_gpus, list_models
from twin.workload.limits import MAX_REQUESTS

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Case:
    category: str
    args: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    must_fail: str | None = None

    def refuse(self, reason: str | None) -> None:
        if reason and self.must_fail is None:
            self.must_fail = reason


# ---------------------------------------------------------------------------------------------- scenarios
BASE_SCENARIO = {
    "name": "fuzz",
    "deployment": {"gpu": "H100-SXM", "model": "llama-3.1-8b", "tensor_parallel_size": 1, "replicas": 1},
    "server": {"max_num_seqs": 8},
    "workload": {
        "arrivals": {"process": "poisson", "rate_per_s": 20},
        "num_requests": 12,
        "classes": [{"name": "chat", "share": 1.0,
                     "prompt": {"shared_prefix_tokens": 64, "suffix_tokens": {"uniform": [8, 32]}},
                     "output_tokens": {"uniform": [2, 8]}}],
    },
    "slo": {"ttft_ms": {"p99": 1000}, "tpot_ms": 50},
    "variants": {"big": {"server": {"max_num_seqs": 16}}},
}

GPUS = tuple(g.name for g in list_gpus())
MODELS = tuple(m.name for m in list_models())
SCENARIO_FIELDS: dict[tuple, Spec] = {
    ("deployment", "replicas"): Spec("int", 1, 4096),
    ("deployment", "tensor_parallel_size"): Spec("int", 1, 64),
    ("deployment", "gpu"): Spec("choice", choices=GPUS),
    ("deployment", "model"): Spec("choice", choices=MODELS),
    ("server", "max_num_seqs"): Spec("int", 1, nullable=True),
    ("server", "max_num_batched_tokens"): Spec("int", 1, nullable=True),
    ("server", "max_model_len"): Spec("int", 2, nullable=True),
    ("server", "block_size"): Spec("int", 1, 1024),
    ("server", "gpu_memory_utilization"): Spec("float", 0, 1, lo_open=True),
    ("server", "num_gpu_blocks_override"): Spec("int", 2, nullable=True),
    ("workload", "num_requests"): Spec("int", 1, MAX_REQUESTS),
    ("workload", "arrivals", "rate_per_s"): Spec("float", 0, lo_open=True, finite=False),
    ("workload", "duration_s"): Spec("float", 0, lo_open=True, nullable=True),
    ("workload", "header_tokens"): Spec("int", 1),
    ("workload", "classes", 0, "share"): Spec("float", 1, 1),
    ("workload", "classes", 0, "prompt", "shared_prefix_tokens"): Spec("int", 0),
    ("workload", "classes", 0, "prompt", "num_prefix_groups"): Spec("int", 1),
    ("workload", "classes", 0, "output_tokens"): Spec("int", 1, mapping_ok=True),
    ("slo", "ttft_ms", "p99"): Spec("float", 0, lo_open=True, finite=False),
    ("slo", "tpot_ms"): Spec("float", 0, lo_open=True, finite=False, nullable=True),
    ("seed",): Spec("int", 0),
    ("replications",): Spec("int", 1, 1000),
    ("warmup_s",): Spec("float", 0),
    ("max_sim_time_s",): Spec("float", 0, lo_open=True, nullable=True),
}
# sections that are pydantic models: text or a list in their place is an error
MODEL_SECTIONS = [("deployment",), ("server",), ("workload",), ("workload", "arrivals"), ("slo",),
                  ("workload", "classes", 0), ("workload", "classes", 0, "prompt")]
FIELD_PATHS = sorted(SCENARIO_FIELDS, key=str)
# values whose runs are long but legal: the fuzz corpus keeps every case short
SLOW_BUT_VALID = {("replications",): lambda v: isinstance(v, int) and v > 64,
                  ("workload", "num_requests"): lambda v: isinstance(v, int) and v > 2000}


def _set(doc, path, value) -> None:
    node = doc
    for key in path[:-1]:
        if isinstance(node, dict):
            node = node.setdefault(key, {})
        else:
            node = node[key]
    node[path[-1]] = value


def _mappings(doc, path=()):
    """Every mapping in ``doc`` with its path (lists are walked too)."""
    if isinstance(doc, dict):
        yield path, doc
        for k, v in doc.items():
            yield from _mappings(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _mappings(v, path + (i,))


@st.composite
def field_values(draw, paths=FIELD_PATHS):
    path = draw(st.sampled_from(paths))
    value = draw(st.sampled_from(VALUES))
    slow = SLOW_BUT_VALID.get(path)
    if slow is not None and slow(value) and refusal(value, SCENARIO_FIELDS[path]) is None:
        value = 2
    return path, value


def _get(doc, path):
    node = doc
    for key in path:
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and key < len(node):
            node = node[key]
        else:
            raise KeyError(key)
    return node


def scenario_refusal(doc) -> str | None:
    """Why the design must refuse scenario ``doc`` (its baseline), judged on the final document."""
    for path, spec in SCENARIO_FIELDS.items():
        try:
            value = _get(doc, path)
        except KeyError:
            continue
        why = refusal(value, spec)
        if why:
            return f"{'.'.join(map(str, path))}: {value!r} is {why}"
    for path, m in _mappings(doc):
        if "bogus_key" in m and "params" not in path:
            return f"unknown key bogus_key in {'.'.join(map(str, path)) or 'the top level'}"
    for path in MODEL_SECTIONS:
        try:
            value = _get(doc, path)
        except KeyError:
            continue
        if isinstance(value, (str, list, int)):
            return f"{'.'.join(map(str, path))} replaced by {value!r}"
    return None


@st.composite
def mutated_scenario(draw) -> tuple[dict, str | None]:
    doc = copy.deepcopy(BASE_SCENARIO)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["field", "field", "field", "delete", "unknown", "section"]))
        if op == "field":
            path, value = draw(field_values())
        elif op == "section":
            path, value = draw(st.sampled_from(MODEL_SECTIONS)), draw(st.sampled_from(["abc", [1, 2], 7]))
        elif op == "delete":
            maps = [(p, m) for p, m in _mappings(doc) if m]
            p, m = draw(st.sampled_from(maps))
            del m[draw(st.sampled_from(sorted(m, key=str)))]
            continue
        else:
            maps = [(p, m) for p, m in _mappings(doc) if "params" not in p and p[:1] != ("variants",)]
            p, m = draw(st.sampled_from(maps))
            m["bogus_key"] = 1
            continue
        try:
            _set(doc, path, value)
        except (KeyError, IndexError, TypeError, AttributeError):
            pass  # an earlier mutation replaced its parent
    return doc, scenario_refusal(doc)


@st.composite
def encoded(draw, text: str) -> tuple[bytes, str | None, bool]:
    """``text`` as bytes, maybe in another encoding, truncated or with a stray byte: ``(data, why the design
    must refuse it or None, whether the content survives unchanged)``."""
    how = draw(st.sampled_from(["utf8", "utf8", "utf8", "utf8-bom", "utf16", "latin1-byte", "truncate",
                                "empty", "nul"]))
    data = text.encode()
    if how == "utf8-bom":
        return b"\xef\xbb\xbf" + data, None, True
    if how == "utf16":
        return text.encode("utf-16"), None, True
    if how == "latin1-byte":
        at = draw(st.integers(0, len(data)))
        at = data.rfind(b"\n", 0, at) + 1
        return data[:at] + b"# caf\xe9\n" + data[at:], "a byte that is not UTF-8", False
    if how == "truncate":
        return data[:draw(st.integers(0, len(data)))], None, False
    if how == "empty":
        return b"", "an empty file", False
    if how == "nul":
        at = draw(st.integers(0, len(data)))
        return data[:at] + b"\x00" + data[at:], None, False
    return data, None, True


@st.composite
def scenario_cases(draw) -> Case:
    doc, reason = draw(mutated_scenario())
    data, enc_reason, intact = draw(encoded(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)))
    command = draw(st.sampled_from([["run", "{d}/s.yaml", "-q"], ["compare", "{d}/s.yaml", "-q"],
                                    ["run", "{d}/s.yaml", "--all-variants", "-q"]]))
    case = Case("scenario", command, {"s.yaml": data})
    case.refuse(enc_reason)
    case.refuse(reason if intact else None)
    return case


# --seed and --replications are fuzzed as options (they override --set seed=...)
SET_PATHS = [p for p in FIELD_PATHS if 0 not in p and p not in (("seed",), ("replications",))]
JUNK_SETS = [("noequals", "no '='"), ("=5", "an empty key"), ("bogus.key=1", "an unknown section"),
             ("server.bogus=1", "an unknown server knob"), ("server=5", "a section replaced by a number"),
             ("workload.classes.0.share=1", "a list indexed like a mapping"), ("server.max_num_seqs=[1", None),
             ("server..max_num_seqs=4", None), ("workload.arrivals.process=pareto", "an unknown process"),
             ("slo.ttft_ms.p42=10", "an unknown statistic")]


@st.composite
def set_cases(draw) -> Case:
    args = ["run", "{d}/s.yaml", "-q"]
    case = Case("set", args, {"s.yaml": yaml.safe_dump(BASE_SCENARIO).encode()})
    fields: dict[tuple, object] = {}
    options: dict[str, str | None] = {}  # click keeps the last --seed / --replications
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["field", "field", "junk", "seed", "replications"]))
        if kind == "field":
            path, value = draw(field_values(SET_PATHS))
            args += ["--set", f"{'.'.join(map(str, path))}={yaml_scalar(value)}"]
            fields[path] = value  # the last --set of a key wins
        elif kind == "junk":
            item, why = draw(st.sampled_from(JUNK_SETS))
            args += ["--set", item]
            case.refuse(why and f"--set {item}: {why}")
        elif kind == "seed":
            v = draw(st.sampled_from(["-1", "0", "abc", "1.5", str(2**70)]))
            args += ["--seed", v]
            options["seed"] = {"-1": "a negative seed", "abc": "text for --seed", "1.5": "a fraction for --seed"}.get(v)
        else:
            v = draw(st.sampled_from(["0", "1", "2", "1001", "abc"]))
            args += ["--replications", v]
            options["replications"] = None if v in ("1", "2") else f"--replications {v} outside 1..1000"
    for why in options.values():
        case.refuse(why)
    for path, value in fields.items():
        why = refusal(value, SCENARIO_FIELDS[path])
        case.refuse(why and f"--set {'.'.join(map(str, path))}: {value!r} is {why}")
    return case


# ------------------------------------------------------------------------------------------------- traces
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
            if o["timestamp"] < last:
                return f"line {i}: a timestamp that goes back in time"
            last = o["timestamp"]
        ids = o.get("hash_ids")
        if ids is not None:
            if not isinstance(ids, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in ids):
                return f"line {i}: hash_ids = {ids!r} is not a list of integers"
            if len(ids) != -(-int(o["input_length"]) // 512):
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


# ------------------------------------------------------------------------------------------------ profiles
PROFILE = json.loads((ROOT / "calibration" / "profiles" / "tiny-llama-cpu.json").read_text())
PROFILE_SCENARIO = {
    "name": "fuzz-profile", "deployment": {"gpu": "CPU", "model": "tiny-llama"},
    "server": {"max_num_seqs": 8, "max_model_len": 2048, "num_gpu_blocks_override": 512},
    "cost_model": {"kind": "profile", "profile": "p.json"},
    "workload": {"arrivals": {"process": "poisson", "rate_per_s": 6}, "num_requests": 10,
                 "classes": [{"name": "chat", "share": 1.0, "prompt": {"suffix_tokens": {"uniform": [16, 64]}},
                              "output_tokens": {"uniform": [4, 16]}}]},
}
PROFILE_FEATURES = ("step", "seqs", "tokens", "tokens_over_knee", "attn_pairs", "kv_read_tokens", "padded_kv_tokens")
PROFILE_RANGES = ("seqs", "tokens", "attn_pairs", "kv_read_tokens", "max_seq_len", "padded_kv_tokens")
PROFILE_SHAPE = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                 "intermediate_size", "vocab_size")


def profile_refusal(doc) -> str | None:
    """Why the design must refuse this profile (the checks ``twin.cost.profile`` documents)."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    if doc.get("format") != "twin-profile":
        return f"format {doc.get('format')!r}"
    if isinstance(doc.get("version"), bool) or doc.get("version") != 1:
        return f"version {doc.get('version')!r}"
    cm = doc.get("cost_model")
    if not isinstance(cm, dict) or not isinstance(cm.get("coefficients"), dict):
        return "cost_model.coefficients missing or not an object"
    coefs = cm["coefficients"]
    if "step" not in coefs:
        return "cost_model.coefficients.step missing"
    for name, v in coefs.items():
        if name not in PROFILE_FEATURES:
            return f"unknown coefficient {name}"
        why = refusal(v, Spec("float", 0))
        if why:
            return f"cost_model.coefficients.{name} = {v!r} is {why}"
    why = refusal(cm.get("knee_tokens", 0), Spec("float", 0))
    if why:
        return f"cost_model.knee_tokens is {why}"
    rng = doc.get("range")
    if rng is not None:
        if not isinstance(rng, dict):
            return "range is not an object"
        for name in PROFILE_RANGES:
            pair = rng.get(name)
            if name not in rng:
                continue
            if not isinstance(pair, list) or len(pair) != 2:
                return f"range.{name} = {pair!r} is not a pair"
            if any(refusal(v, Spec("float", 0)) for v in pair) or pair[1] < pair[0]:
                return f"range.{name} = {pair!r}"
    model = doc.get("model")
    if model is not None:
        if not isinstance(model, dict):
            return "model is not an object"
        for name in PROFILE_SHAPE:
            if model.get(name) is not None and refusal(model[name], Spec("int", 1)):
                return f"model.{name} = {model[name]!r}"
    return None


PROFILE_PATHS = ([("format",), ("version",), ("cost_model",), ("cost_model", "coefficients"),
                  ("cost_model", "knee_tokens"), ("range",), ("model",), ("fit",), ("device",)]
                 + [("cost_model", "coefficients", f) for f in PROFILE_FEATURES]
                 + [("range", r) for r in PROFILE_RANGES] + [("range", r, i) for r in PROFILE_RANGES[:2]
                                                              for i in (0, 1)]
                 + [("model", m) for m in PROFILE_SHAPE])


@st.composite
def profile_cases(draw) -> Case:
    doc = copy.deepcopy(PROFILE)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PROFILE_PATHS))
        try:
            parent = _get(doc, path[:-1])
            if draw(st.integers(0, 3)) == 0 and isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                parent[path[-1]] = draw(st.sampled_from(VALUES))
        except (KeyError, IndexError, TypeError):
            pass
    data, why, intact = draw(encoded(json.dumps(doc, allow_nan=True)))
    case = Case("profile", ["run", "{d}/s.yaml", "-q"],
                {"p.json": data, "s.yaml": yaml.safe_dump(PROFILE_SCENARIO).encode()})
    case.refuse(why)
    case.refuse(profile_refusal(doc) if intact else None)
    return case


# -------------------------------------------------------------------------------------------- bench JSON
BENCH_ARRAYS = ("input_lens", "output_lens", "ttfts", "latencies")


def bench_refusal(doc: dict) -> str | None:
    """Why the design must refuse this ``vllm bench serve`` result."""
    doc = dict(doc)
    itls, ttfts = doc.get("itls"), doc.get("ttfts")
    if not isinstance(doc.get("latencies"), list) and isinstance(doc.get("e2els"), list):
        doc["latencies"] = doc["e2els"]
    elif not isinstance(doc.get("latencies"), list) and isinstance(itls, list) and isinstance(ttfts, list) \
            and len(itls) == len(ttfts):
        # vllm bench serve results without latencies: TTFT + the sum of the ITLs
        for i, (t, row) in enumerate(zip(ttfts, itls)):
            if refusal(t, Spec("float", 0)) or not isinstance(row, list) or \
                    any(refusal(x, Spec("float", 0)) for x in row):
                return f"itls[{i}] or ttfts[{i}] cannot give a latency"
        doc["latencies"] = [t + sum(row) for t, row in zip(ttfts, itls)]
    n = None
    for key in BENCH_ARRAYS:
        if not isinstance(doc.get(key), list):
            return f"{key} missing or not a list"
        if n is not None and len(doc[key]) != n:
            return f"{key} has another length"
        n = len(doc[key])
    if not n:
        return "no requests"
    if doc.get("start_times") is not None and not isinstance(doc["start_times"], list):
        return "start_times is not a list"
    for key in (*BENCH_ARRAYS, "start_times"):
        for i, v in enumerate(doc.get(key) or []):
            spec = Spec("int", 0, INT64_MAX) if key.endswith("_lens") else Spec("float", 0)
            why = refusal(v, spec)
            if why:
                return f"{key}[{i}] = {v!r} is {why}"
    if doc.get("start_times") is not None and (not isinstance(doc["start_times"], list)
                                               or len(doc["start_times"]) != n):
        return "start_times has another length"
    itls = doc.get("itls")
    if itls is not None:
        if not isinstance(itls, list) or len(itls) != n:
            return "itls is not a list per request"
        for i, row in enumerate(itls):
            if not isinstance(row, list) or any(refusal(x, Spec("float", 0)) for x in row):
                return f"itls[{i}] = {row!r} is not a list of seconds >= 0"
    for i, (t, lat) in enumerate(zip(doc["ttfts"], doc["latencies"])):
        if doc["output_lens"][i] > 0 and t > lat + 1e-9:
            return f"ttfts[{i}] exceeds latencies[{i}]"
    mc = doc.get("max_concurrency")
    if mc is not None and refusal(mc, Spec("int", 1)):
        return f"max_concurrency = {mc!r}"
    rate = doc.get("request_rate")
    if rate is not None and rate != "inf" and refusal(rate, Spec("float", 0, lo_open=True, finite=False)):
        return f"request_rate = {rate!r}"
    return None


@st.composite
def bench_docs(draw) -> dict:
    n = draw(st.integers(1, 12))
    ins = draw(st.lists(st.integers(1, 500), min_size=n, max_size=n))
    outs = draw(st.lists(st.integers(1, 20), min_size=n, max_size=n))
    ttfts = [0.02 + 0.001 * i for i in range(n)]
    itls = [[0.01] * (o - 1) for o in outs]
    return {"input_lens": ins, "output_lens": outs, "ttfts": ttfts,
            "latencies": [t + sum(g) for t, g in zip(ttfts, itls)], "itls": itls,
            "start_times": [0.05 * i for i in range(n)], "request_rate": 20.0, "max_concurrency": None,
            "errors": [""] * n, "completed": n}


@st.composite
def bench_cases(draw) -> Case:
    doc = draw(bench_docs())
    n = len(doc["input_lens"])
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from([*BENCH_ARRAYS, "start_times", "itls", "max_concurrency", "request_rate"]))
        op = draw(st.sampled_from(["element", "element", "whole", "delete", "append"]))
        if op == "delete":
            doc.pop(key, None)
        elif op == "whole" or not isinstance(doc.get(key), list):
            doc[key] = draw(st.sampled_from(VALUES))
        elif op == "append":
            doc[key].append(draw(st.sampled_from(VALUES)))
        else:
            i = draw(st.integers(0, n - 1))
            if i < len(doc[key]):
                if key == "itls" and isinstance(doc[key][i], list) and doc[key][i] and draw(st.booleans()):
                    doc[key][i][0] = draw(st.sampled_from(VALUES))
                else:
                    doc[key][i] = draw(st.sampled_from(VALUES))
    command = draw(st.sampled_from([["diagnose", "{d}/b.json", "--scenario", "{d}/s.yaml"],
                                    ["validate", "{d}/s.yaml", "--bench-json", "{d}/b.json"]]))
    data, why, intact = draw(encoded(json.dumps(doc, allow_nan=True)))
    case = Case(f"bench-{command[0]}", command, {"b.json": data, "s.yaml": yaml.safe_dump(BASE_SCENARIO).encode()})
    case.refuse(why)
    case.refuse(bench_refusal(doc) if intact else None)
    return case


# ------------------------------------------------------------------------------------------ sweep and plan
SWEEP_PATHS = [p for p in SET_PATHS if p[0] in ("server", "deployment", "slo")]


@st.composite
def sweep_cases(draw) -> Case:
    from twin.plan.grid import MAX_GRID_POINTS

    args = ["sweep", "{d}/s.yaml", "--backend", "serial", "-q"]
    case = Case("sweep", args, {"s.yaml": yaml.safe_dump(BASE_SCENARIO).encode()})
    points = 1
    keys = draw(st.lists(st.sampled_from(SWEEP_PATHS + [("rate",), ("rate_scale",)]), min_size=1, max_size=3,
                         unique=True))
    if len([k for k in keys if k[0] in ("rate", "rate_scale")]) > 1:
        case.refuse("both rate and rate_scale")
    for path in keys:
        key = ".".join(map(str, path))
        if draw(st.integers(0, 5)) == 0:  # a long axis: the grid's size is what matters
            count = draw(st.sampled_from([3, MAX_GRID_POINTS + 1]))
            values = list(range(1, count + 1))
        else:
            values = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=3))
            if len(values) > 1 and draw(st.booleans()):
                values[0] = 4
        points *= len(values)
        spec = SCENARIO_FIELDS.get(path, Spec("float", 0, lo_open=True))
        for v in values:
            why = refusal(v, spec)
            case.refuse(why and f"--grid {key}: {v!r} is {why}")
        args += ["--grid", f"{key}={json.dumps(values, allow_nan=True).replace('NaN', '.nan').replace('Infinity', '.inf')}"]
    if points > MAX_GRID_POINTS:
        case.refuse(f"{points} grid points, over the limit of {MAX_GRID_POINTS}")
    elif points > 12 and case.must_fail is None:
        args[-1] = args[-1].split("=")[0] + "=[2]"  # keep valid cases short
    return case


PLAN_BASE = {"scenario": "s.yaml", "target_rate_per_s": 40, "search": {"server.max_num_seqs": [8]},
             "replications": 1, "max_replicas": 4, "slo": {"ttft_ms": {"p99": 2000}}, "rel_tol": 0.2}
PLAN_FIELDS = {
    ("target_rate_per_s",): Spec("float", 0, lo_open=True),
    ("replications",): Spec("int", 1, 1000),
    ("max_replicas",): Spec("int", 1, 4096),
    ("rel_tol",): Spec("float", 0, 1, lo_open=True),
    ("confidence",): Spec("float", 0, 1, lo_open=True),
    ("frontier_extra_replicas",): Spec("int", 0, 16),
    ("goodput",): Spec("float", 0, 1, lo_open=True, nullable=True),
    ("router",): Spec("choice", choices=("round_robin", "least_outstanding", "least_kv_usage", "prefix_affinity",
                                         "kv_cache_aware")),
}


@st.composite
def plan_cases(draw) -> Case:
    doc = copy.deepcopy(PLAN_BASE)
    reason = None
    for _ in range(draw(st.integers(1, 2))):
        op = draw(st.sampled_from(["field", "field", "field", "unknown", "search"]))
        if op == "field":
            path = draw(st.sampled_from(sorted(PLAN_FIELDS)))
            value = draw(st.sampled_from(VALUES))
            if path in (("replications",), ("max_replicas",), ("frontier_extra_replicas",)) and \
                    isinstance(value, int) and not isinstance(value, bool) and 16 < value <= 4096:
                value = 2  # valid but slow: keep the corpus short
            doc[path[0]] = value
        elif op == "unknown":
            doc["bogus_key"] = 1
        else:
            doc["search"] = draw(st.sampled_from([5, "abc", [], {"server.max_num_seqs": []},
                                                  {"server.max_num_seqs": [0]}, {"server.max_num_seqs": [-3, 8]}]))
    for path, spec in PLAN_FIELDS.items():
        if path[0] in doc:
            why = refusal(doc[path[0]], spec)
            reason = reason or (why and f"{path[0]}: {doc[path[0]]!r} is {why}")
    if "bogus_key" in doc:
        reason = reason or "unknown key bogus_key"
    if doc["search"] != PLAN_BASE["search"]:
        reason = reason or f"search: {doc['search']!r}"
    case = Case("plan", ["plan", "{d}/plan.yaml", "--backend", "serial", "-q"],
                {"plan.yaml": yaml.safe_dump(doc).encode(), "s.yaml": yaml.safe_dump(BASE_SCENARIO).encode()})
    case.refuse(reason)
    return case
