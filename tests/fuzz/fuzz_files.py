"""Fuzz cases for calibration profiles and ``vllm bench serve`` results (``twin diagnose``, ``twin validate
--bench-json``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml
from hypothesis import strategies as st

from fuzz_scenarios import BASE_SCENARIO, _get
from fuzz_traces import INT64_MAX
from fuzz_values import VALUES, Case, Spec, encoded, refusal

ROOT = Path(__file__).resolve().parents[2]


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
            if any(refusal(v, Spec("float", 0)) for v in pair):
                return f"range.{name} = {pair!r}"
            if all(isinstance(v, (int, float)) for v in pair) and pair[1] < pair[0]:   # ("1e3" is left open)
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
        out = doc["output_lens"][i]
        if isinstance(out, (int, float)) and isinstance(t, (int, float)) and isinstance(lat, (int, float)) \
                and out > 0 and t > lat + 1e-9:   # (a numeric string such as "1e3" is left open)
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
