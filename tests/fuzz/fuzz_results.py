"""Fuzz cases for the files ``twin calibrate --from-results`` reads (``vllm bench serve`` JSON, GuideLLM reports,
inference-perf stage folders and per-request files, per-request CSV / JSON Lines tables; ``twin diagnose`` reads
the per-request ones through the same readers, and draws its command too) and for Hugging Face
``config.json`` models named by a scenario.

Each case starts from a valid document (the readers' own test fixtures), applies one to three mutations and
states, per mutation, whether the design must refuse the result: a value the reader reads that is negative, not
finite, not a number or beyond the scenario's limits; per-request arrays of different lengths; counts that
disagree with the arrays; duplicate keys; nesting deeper than any real file. A mutation of a field the reader
may ignore, or whose refusal the design leaves open, may go either way (exit 0, or exit 2 with one line)."""

from __future__ import annotations

import copy
import json
import math
import sys
import tempfile
from pathlib import Path

import yaml
from hypothesis import strategies as st

from fuzz_values import VALUES, Case, encoded

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from fitting_helpers import write_config, write_stage  # noqa: E402
from test_fitting_readers import bench_doc  # noqa: E402
from test_fitting_readers_guidellm import STRATEGIES, benchmark, report  # noqa: E402
from test_fitting_readers_tables import lifecycle_requests  # noqa: E402

# values no reader may take for a number it reads: negative, not finite, not a number, absurdly large
BAD_NUMBERS = [-1, -0.5, math.nan, math.inf, -math.inf, "abc", [], {}, True, 10**30]
HUGE_COUNTS = [10**12, 2**63, 10**30, 1e300]
DEPTH = 100_000

CALIBRATE = ["calibrate", "--from-results", None, "--gpu", "H100-SXM", "--model", "llama-3.1-8b",
             "-o", "{d}/out/p.json", "-q", "--max-sim-s", "10"]


def calibrate_args(target: str) -> list[str]:
    return [target if a is None else a for a in CALIBRATE]


def reader_args(draw, target: str) -> list[str]:
    """``twin calibrate --from-results`` or ``twin diagnose`` on ``target``: diagnose reads the per-request
    formats through the same readers (``twin.analysis.measured_readers``), so the same refusals apply."""
    return draw(st.sampled_from([calibrate_args(target), ["diagnose", target]]))


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def _set(doc, path, value) -> None:
    _get(doc, path[:-1])[path[-1]] = value


def _fresh_value(draw):
    """A hostile value, copied: VALUES holds lists and dicts that a later mutation could grow (the strategy's
    own state would then change from one example to the next)."""
    return copy.deepcopy(draw(st.sampled_from(VALUES)))


def _try_set(doc, path, value) -> bool:
    """``_set`` where an earlier mutation may have replaced a parent: whether the value landed."""
    try:
        _set(doc, path, value)
        return True
    except (KeyError, IndexError, TypeError):
        return False


def _leaves(doc, path=(), ancestors=()):
    # a mutation may put a container inside itself: a cycle has no leaves below the repeat
    if isinstance(doc, (dict, list)) and any(doc is a for a in ancestors):
        return
    inner = ancestors + (doc,)
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, path + (k,), inner)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _leaves(v, path + (i,), inner)
    yield path


def dumps(doc) -> str:
    return json.dumps(doc, allow_nan=True)


def text_mutation(draw, text: str) -> tuple[str, str | None]:
    """A mutation of the JSON text itself: ``(text, why it must be refused)``."""
    op = draw(st.sampled_from(["dup", "deep", "deep-inside", "none", "none", "none", "none"]))
    if op == "dup" and text.startswith("{") and len(text) > 2:
        key = next(iter(json.loads(text)))
        return '{"%s": 0, ' % key + text[1:], f"duplicate key {key!r}"
    if op == "deep":
        return "[" * DEPTH + "]" * DEPTH, "nesting 100,000 deep"
    if op == "deep-inside" and text.startswith("{"):
        return '{"deep": ' + "[" * DEPTH + "]" * DEPTH + ", " + text[1:], "nesting 100,000 deep"
    return text, None


# ------------------------------------------------------------------------------------------- vllm bench serve
BENCH_ARRAYS = ("input_lens", "output_lens", "ttfts", "latencies", "start_times")
BENCH_METRICS = ("mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms",
                 "mean_itl_ms", "request_throughput", "output_throughput")
BENCH_OK = (0, 1, 3)  # the seed's completed requests (request 2 failed)


def _still(doc, path, value) -> bool:
    """Whether ``doc`` still holds the planted ``value`` at ``path`` (a later mutation may have replaced it)."""
    try:
        return _get(doc, path) is value
    except (KeyError, IndexError, TypeError):
        return False


def _judged(doc, planted, completed=lambda doc, i: True) -> str | None:
    """The first planted reason that still holds in the final document (for a per-request entry, only while
    that request still counts as completed)."""
    for path, value, reason, request in planted:
        if _still(doc, path, value) and (request is None or completed(doc, request)):
            return reason
    return None


def _bench_completed(doc, i: int) -> bool:
    errors = doc.get("errors")
    return isinstance(errors, list) and i < len(errors) and errors[i] == ""


@st.composite
def bench_result_cases(draw) -> Case:
    doc = bench_doc(detailed=draw(st.booleans()))
    planted = []      # (path, value, why the design must refuse it, the request it belongs to or None)
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["element", "element", "metric", "count", "huge", "append", "rate", "any",
                                   "delete"]))
        detailed = "input_lens" in doc and isinstance(doc["input_lens"], list)
        if op == "element" and detailed:
            key = draw(st.sampled_from(BENCH_ARRAYS))
            i = draw(st.sampled_from(BENCH_OK))
            if isinstance(doc.get(key), list) and i < len(doc[key]):
                doc[key][i] = draw(st.sampled_from(BAD_NUMBERS))
                planted.append(((key, i), doc[key][i], f"{key}[{i}] = {doc[key][i]!r}", i))
        elif op == "metric":
            key = draw(st.sampled_from(BENCH_METRICS))
            doc[key] = draw(st.sampled_from(BAD_NUMBERS))
            planted.append(((key,), doc[key], f"{key} = {doc[key]!r}", None))
        elif op == "count" and detailed:
            doc["completed"] = draw(st.sampled_from([1, 2, 4, 40]))
            planted.append((("completed",), doc["completed"],
                            f"completed = {doc['completed']} disagrees with the arrays (3 completed)", None))
        elif op == "huge":
            key = draw(st.sampled_from(["completed", "failed", "num_prompts", "total_input_tokens",
                                        "total_output_tokens", "max_concurrency", "random_prefix_len"]))
            doc[key] = draw(st.sampled_from(HUGE_COUNTS))
            if key != "max_concurrency" and (key != "num_prompts" or not detailed):
                planted.append(((key,), doc[key], f"{key} = {doc[key]!r} beyond the limits", None))
        elif op == "append" and detailed:
            key = draw(st.sampled_from(BENCH_ARRAYS))
            if isinstance(doc.get(key), list):
                doc[key].append(1.0)
                planted.append(((key, len(doc[key]) - 1), doc[key][-1], f"{key} has one entry more", None))
        elif op == "rate":
            doc["request_rate"] = draw(st.sampled_from([0, -1, math.nan, "abc", None, [], True]))
            planted.append((("request_rate",), doc["request_rate"], f"request_rate = {doc['request_rate']!r}", None))
        elif op == "delete":
            doc.pop(draw(st.sampled_from(sorted(doc))), None)
        else:
            path = draw(st.sampled_from([p for p in _leaves(doc) if p]))
            _set(doc, path, _fresh_value(draw))
    why = _judged(doc, planted, _bench_completed)
    text, text_why = text_mutation(draw, dumps(doc))
    data, enc_why, intact = draw(encoded(text))
    case = Case("results-vllm-bench", calibrate_args("{d}/b.json"), {"b.json": data, "out/.keep": b""})
    case.refuse(enc_why)
    case.refuse(text_why if intact else None)
    case.refuse(why if intact else None)
    return case


# ------------------------------------------------------------------------------------------------- GuideLLM
@st.composite
def guidellm_cases(draw) -> Case:
    strategy = draw(st.sampled_from(STRATEGIES))
    doc = report([benchmark(0, strategy)])
    bench = doc["benchmarks"][0]
    why = None
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["request", "request", "reverse", "count", "huge", "any", "delete"]))
        ok = bench.get("requests", {}).get("successful") if isinstance(bench.get("requests"), dict) else None
        if not isinstance(ok, list) or not all(isinstance(r, dict) for r in ok):
            ok = []         # an earlier mutation replaced the request list
        if op == "request" and ok:
            i = draw(st.integers(0, len(ok) - 1))
            key = draw(st.sampled_from(["prompt_tokens", "output_tokens", "request_start_time",
                                        "request_end_time"]))
            ok[i][key] = draw(st.sampled_from(BAD_NUMBERS))
            why = why or f"requests.successful[{i}].{key} = {ok[i][key]!r}"
        elif op == "reverse" and ok:
            i = draw(st.integers(0, len(ok) - 1))
            r = ok[i]
            if all(isinstance(r.get(k), float) for k in ("request_start_time", "request_end_time")):
                r["request_start_time"], r["request_end_time"] = r["request_end_time"] + 5, r["request_start_time"]
                why = why or f"requests.successful[{i}] ends before it starts"
        elif op == "count":
            value = draw(st.sampled_from([0, 7, 10**12]))
            _try_set(bench, ("metrics", "request_totals", "successful"), value)
            _try_set(bench, ("scheduler_metrics", "requests_made", "successful"), value)
        elif op == "huge":
            path = draw(st.sampled_from([("metrics", "request_totals", "total"),
                                         ("metrics", "prompt_token_count", "successful", "mean"),
                                         ("metrics", "output_token_count", "successful", "max"),
                                         ("config", "strategy", "max_concurrency"), ("duration",)]))
            try:
                _set(bench, path, draw(st.sampled_from(HUGE_COUNTS)))
            except (KeyError, TypeError, IndexError):
                pass
        elif op == "delete":
            path = draw(st.sampled_from([p for p in _leaves(bench) if p]))
            try:
                parent = _get(bench, path[:-1])
                if isinstance(parent, dict):
                    parent.pop(path[-1], None)
            except (KeyError, TypeError, IndexError):
                pass
        else:
            path = draw(st.sampled_from([p for p in _leaves(bench) if p]))
            _set(bench, path, _fresh_value(draw))
    text, text_why = text_mutation(draw, dumps(doc))
    data, enc_why, intact = draw(encoded(text))
    case = Case("results-guidellm", calibrate_args("{d}/benchmarks.json"),
                {"benchmarks.json": data, "out/.keep": b""})
    case.refuse(enc_why)
    case.refuse(text_why if intact else None)
    case.refuse(why if intact else None)
    return case


# ------------------------------------------------------------------------------------------- inference-perf
def _stage_folder() -> dict[str, bytes]:
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d) / "res"
        write_config(folder, model="meta-llama/Llama-3.1-8B-Instruct", tp=1, groups=2, per_group=4,
                     system_tokens=64, question_tokens=32, output_tokens=8, stages=[(4.0, 5.0)])
        write_stage(folder, 0, rate=4.0, duration_s=5.0, prompt_tokens=96, output_tokens=8,
                    metrics={"mean_ttft_ms": 30.0, "median_ttft_ms": 28.0, "p90_ttft_ms": 35.0,
                             "p99_ttft_ms": 50.0, "mean_e2el_ms": 120.0, "median_e2el_ms": 110.0,
                             "p99_e2el_ms": 200.0})
        return {f"res/{p.name}": p.read_bytes() for p in folder.iterdir()}


STAGE_NUMBERS = [("load_summary", "count"), ("load_summary", "requested_rate"), ("load_summary", "send_duration"),
                 ("successes", "count"), ("successes", "latency", "time_to_first_token", "median"),
                 ("successes", "latency", "request_latency", "mean"), ("successes", "prompt_len", "max")]
# (the measured output_len quantiles are not read: the client sent ignore_eos, so the configured output_len is
# what the server generated; a mutation there may go either way, through the "any" operation)


@st.composite
def inference_perf_cases(draw) -> Case:
    files = _stage_folder()
    stage_name = next(n for n in files if "results_stage_0" in n)
    doc = json.loads(files[stage_name])
    planted = []
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["number", "number", "huge", "any", "config"]))
        if op == "number":
            path = draw(st.sampled_from(STAGE_NUMBERS))
            value = draw(st.sampled_from(BAD_NUMBERS))
            if path == ("load_summary", "requested_rate") and value == 10**30:
                continue      # a finite rate of 1e30 is an unbounded rate: either way
            if _try_set(doc, path, value):
                planted.append((path, value, f"{'.'.join(path)} = {value!r}", None))
        elif op == "huge":
            path = draw(st.sampled_from(STAGE_NUMBERS[:4] + [("successes", "prompt_len", "max")]))
            value = draw(st.sampled_from(HUGE_COUNTS))
            if _try_set(doc, path, value) and path != ("load_summary", "requested_rate"):
                planted.append((path, value, f"{'.'.join(path)} = {value!r} beyond the limits", None))
        elif op == "config":
            cfg = yaml.safe_load(files["res/results_config.yaml"])
            key = draw(st.sampled_from(["num_groups", "num_prompts_per_group", "system_prompt_len", "output_len"]))
            cfg["data"]["shared_prefix"][key] = draw(st.sampled_from(BAD_NUMBERS[:5] + HUGE_COUNTS))
            files["res/results_config.yaml"] = yaml.safe_dump(cfg).encode()
        else:
            path = draw(st.sampled_from([p for p in _leaves(doc) if p] or [("x",)]))
            _try_set(doc, path, _fresh_value(draw))
    why = _judged(doc, planted)
    text, text_why = text_mutation(draw, dumps(doc))
    data, enc_why, intact = draw(encoded(text))
    files = {**files, stage_name: data, "out/.keep": b""}
    case = Case("results-inference-perf", calibrate_args("{d}/res"), files)
    case.refuse(enc_why)
    case.refuse(text_why if intact else None)
    case.refuse(why if intact else None)
    return case


@st.composite
def inference_perf_request_cases(draw) -> Case:
    reqs = lifecycle_requests()
    planted = []    # (request, field path, value, why): judged on the final document
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["number", "number", "reverse", "any"]))
        i = draw(st.sampled_from([0, 1]))
        if op == "number":
            key = draw(st.sampled_from([("start_time",), ("end_time",), ("info", "input_tokens"),
                                        ("info", "output_tokens"), ("info", "output_token_times", 0)]))
            if _try_set(reqs[i], key, draw(st.sampled_from(BAD_NUMBERS))):
                planted.append((i, key, _get(reqs[i], key),
                                f"request [{i}].{'.'.join(map(str, key))} = {_get(reqs[i], key)!r}"))
        elif op == "reverse" and isinstance(reqs[i], dict) and all(
                isinstance(reqs[i].get(k), (int, float)) and not isinstance(reqs[i].get(k), bool)
                and math.isfinite(reqs[i][k]) for k in ("start_time", "end_time")):
            reqs[i]["start_time"], reqs[i]["end_time"] = reqs[i]["end_time"] + 1, reqs[i]["start_time"]
            planted.append((i, ("start_time",), reqs[i]["start_time"], f"request [{i}] ends before it starts"))
        elif op == "any":
            path = draw(st.sampled_from([p for p in _leaves(reqs) if p]))
            _try_set(reqs, path, _fresh_value(draw))
    why = None
    for i, key, value, reason in planted:
        # a request the reader reads (still an object, still without an error) that still holds the value
        try:
            still = isinstance(reqs[i], dict) and reqs[i].get("error") is None and _get(reqs[i], key) is value
        except (KeyError, IndexError, TypeError):
            still = False
        why = why or (reason if still else None)
    text, text_why = text_mutation(draw, dumps(reqs))
    data, enc_why, intact = draw(encoded(text))
    case = Case("results-inference-perf-requests", reader_args(draw, "{d}/exp/per_request_lifecycle_metrics.json"),
                {"exp/per_request_lifecycle_metrics.json": data, "out/.keep": b""})
    case.refuse(enc_why)
    case.refuse(text_why if intact else None)
    case.refuse(why if intact else None)
    return case


# ------------------------------------------------------------------------------------------ per-request tables
TABLE_HEADER = ["send_time_ms", "ttft_ms", "e2el_ms", "prompt_tokens", "output_tokens"]
TABLE_ROWS = [[0.0, 100.0, 1100.0, 50, 11], [1000.0, 200.0, 2200.0, 60, 21], [2000.0, 300.0, 300.0, 70, 1],
              [2500.0, 150.0, 900.0, 80, 5]]


def _csv_cell(v) -> str:
    return "" if v is None else str(v)


@st.composite
def table_cases(draw) -> Case:
    rows = copy.deepcopy(TABLE_ROWS)
    header = list(TABLE_HEADER)
    why = None
    raw_line = None
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["cell", "cell", "reverse", "zero", "raw", "column"]))
        i = draw(st.integers(0, len(rows) - 1))
        if op == "cell":
            j = draw(st.integers(0, len(header) - 1))
            rows[i][j] = draw(st.sampled_from(BAD_NUMBERS))
            why = why or f"row {i}: {header[j]} = {rows[i][j]!r}"
        elif op == "reverse":
            rows[i][2] = -1000.0     # a latency below zero: the request ends before it was sent
            why = why or f"row {i} ends before it was sent"
        elif op == "zero":
            j = draw(st.sampled_from([3, 4]))
            rows[i][j] = draw(st.sampled_from([0, -3]))
            why = why or f"row {i}: {header[j]} = {rows[i][j]}"
        elif op == "raw":
            raw_line = draw(st.sampled_from(['1,2,"3', "1,2,3,4,5,6,7", "x" * 200_000, "1,\r2,3\n4", "\x00,1",
                                             ",,,,", '"a\nb",1,2,3,4']))
        else:
            header[draw(st.integers(0, len(header) - 1))] = draw(st.sampled_from(["", "x", "send_time_ms",
                                                                                  "prompt_tokens"]))
    fmt = draw(st.sampled_from(["csv", "jsonl"]))
    if fmt == "csv":
        lines = [",".join(header)] + [",".join(_csv_cell(v) for v in r) for r in rows]
        if raw_line is not None:
            lines.insert(draw(st.integers(1, len(lines))), raw_line)
        text = "\n".join(lines) + "\n"
        name = "requests.csv"
    else:
        text = "".join(dumps(dict(zip(header, r))) + "\n" for r in rows)
        if raw_line is not None:
            text += raw_line + "\n"
        name = "requests.jsonl"
    data, enc_why, intact = draw(encoded(text))
    args = calibrate_args("{d}/" + name) if fmt == "csv" else reader_args(draw, "{d}/" + name)
    case = Case("results-table", args, {name: data, "out/.keep": b""})
    case.refuse(enc_why)
    if len(set(header)) == len(header) and set(header) == set(TABLE_HEADER):
        case.refuse(why if intact else None)
    return case


# ------------------------------------------------------------------------------------ Hugging Face config.json
HF_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
             "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
             "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 131072,
             "tie_word_embeddings": True, "torch_dtype": "bfloat16"}
HF_WHOLE = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "vocab_size", "max_position_embeddings")
HF_SCENARIO = {"name": "fuzz-hf", "deployment": {"gpu": "H100-SXM", "model": "config.json"},
               "server": {"max_num_seqs": 8, "max_model_len": 4096},
               "workload": {"arrivals": {"process": "poisson", "rate_per_s": 20}, "num_requests": 8,
                            "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 64},
                                         "output_tokens": 4}]}}


@st.composite
def model_config_cases(draw) -> Case:
    cfg = copy.deepcopy(HF_CONFIG)
    why = None
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["whole", "whole", "moe", "any", "delete"]))
        if op == "whole":
            key = draw(st.sampled_from(HF_WHOLE))
            cfg[key] = draw(st.sampled_from(BAD_NUMBERS + [0, 1.5, 2**63]))
            why = why or f"{key} = {cfg[key]!r}"
        elif op == "moe":
            cfg["num_local_experts"] = draw(st.sampled_from([8, 8.0, 0, -1, 1.5, "8", math.inf, 10**30]))
            cfg["num_experts_per_tok"] = draw(st.sampled_from([2, 2.0, 0, 9, math.nan]))
            cfg["model_type"] = "mixtral"
        elif op == "delete":
            cfg.pop(draw(st.sampled_from(sorted(cfg))), None)
        else:
            cfg[draw(st.sampled_from(sorted(cfg)))] = _fresh_value(draw)
    text, text_why = text_mutation(draw, dumps(cfg))
    data, enc_why, intact = draw(encoded(text))
    case = Case("model-config", ["run", "{d}/s.yaml", "-q"],
                {"config.json": data, "s.yaml": yaml.safe_dump(HF_SCENARIO).encode()})
    case.refuse(enc_why)
    case.refuse(text_why if intact else None)
    case.refuse(why if intact else None)
    return case


def seeds() -> list[tuple[list[str], dict[str, bytes]]]:
    """The unmutated documents every category here starts from (each must run)."""
    keep = {"out/.keep": b""}
    table = "\n".join([",".join(TABLE_HEADER)] + [",".join(map(str, r)) for r in TABLE_ROWS]) + "\n"
    return [
        (calibrate_args("{d}/b.json"), {"b.json": dumps(bench_doc()).encode(), **keep}),
        (calibrate_args("{d}/benchmarks.json"),
         {"benchmarks.json": dumps(report([benchmark(0, STRATEGIES[2])])).encode(), **keep}),
        (calibrate_args("{d}/res"), {**_stage_folder(), **keep}),
        (calibrate_args("{d}/exp/per_request_lifecycle_metrics.json"),
         {"exp/per_request_lifecycle_metrics.json": dumps(lifecycle_requests()).encode(), **keep}),
        (calibrate_args("{d}/requests.csv"), {"requests.csv": table.encode(), **keep}),
        (["diagnose", "{d}/exp/per_request_lifecycle_metrics.json"],
         {"exp/per_request_lifecycle_metrics.json": dumps(lifecycle_requests()).encode()}),
        (["diagnose", "{d}/requests.jsonl"],
         {"requests.jsonl": "".join(dumps(dict(zip(TABLE_HEADER, r))) + "\n" for r in TABLE_ROWS).encode()}),
        (["run", "{d}/s.yaml", "-q"], {"config.json": dumps(HF_CONFIG).encode(),
                                       "s.yaml": yaml.safe_dump(HF_SCENARIO).encode()}),
        (["run", "{d}/s.yaml", "-q"], {"gpu.yaml": yaml.safe_dump(GPU_SPEC).encode(),
                                       "s.yaml": yaml.safe_dump(GPU_SCENARIO).encode()}),
    ]



# ------------------------------------------------------------------------------------------------ GPU spec file
GPU_SPEC = {"name": "my-gpu", "peak_flops": {"bf16": "989 TFLOPS", "fp8": "1979 TFLOPS"},
            "memory_bandwidth_bytes_per_s": "3.35 TB/s", "memory_bytes": "80 GB",
            "interconnect_bytes_per_s": "900 GB/s"}
GPU_SCENARIO = {**HF_SCENARIO, "deployment": {"gpu": "gpu.yaml", "model": "llama-3.1-8b"}}
GPU_NUMBERS = (("peak_flops", "bf16"), ("memory_bandwidth_bytes_per_s",), ("memory_bytes",),
               ("interconnect_bytes_per_s",))


@st.composite
def gpu_spec_cases(draw) -> Case:
    spec = copy.deepcopy(GPU_SPEC)
    planted = []
    for _ in range(draw(st.integers(0, 2))):
        op = draw(st.sampled_from(["number", "number", "unit", "any", "delete"]))
        if op == "number":
            path = draw(st.sampled_from(GPU_NUMBERS))
            value = draw(st.sampled_from([-1, 0, math.nan, math.inf, "abc", [], "-5 GB", "1e400 TB/s", 10**30]))
            if _try_set(spec, path, value):
                planted.append((path, value, f"{'.'.join(path)} = {value!r}", None))
        elif op == "unit":
            path = draw(st.sampled_from(GPU_NUMBERS))
            value = draw(st.sampled_from(["80 parsecs", "TB/s", "1 2 GB", "nan GB", "inf TB/s"]))
            if _try_set(spec, path, value):
                planted.append((path, value, f"{'.'.join(path)} = {value!r}", None))
        elif op == "delete":
            spec.pop(draw(st.sampled_from(sorted(spec))), None)
        else:
            spec[draw(st.sampled_from(sorted(spec)))] = _fresh_value(draw)
    why = _judged(spec, planted)
    data, enc_why, intact = draw(encoded(yaml.safe_dump(spec, allow_unicode=True)))
    case = Case("gpu-spec", ["run", "{d}/s.yaml", "-q"],
                {"gpu.yaml": data, "s.yaml": yaml.safe_dump(GPU_SCENARIO).encode()})
    case.refuse(enc_why)
    case.refuse(why if intact else None)
    return case
