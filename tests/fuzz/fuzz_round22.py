"""Fuzz cases for round 22's new surfaces: the server keys a result JSON states at its top level, which `twin
calibrate --from-results` reads with no other option (the twin's own ``--json`` writes them:
``twin.results.server_keys``; the reader's checks: ``twin.fitting.readers.server_fields``), and inference-perf's
``exp-config.yaml`` states; `twin diagnose --run NAME`; and the ``fitted_on`` record of a server profile, whose
models a run for another model names in a note. Also two readers round 21 gave `twin diagnose` that the corpus did
not reach: AIPerf's ``profile_export.jsonl`` (calibrate and diagnose) and a GuideLLM report read by diagnose.

Each case's design oracle says whether the input must be refused: a key present with a value the design refuses
(a wrong type, out of range, an unknown GPU, a vLLM release the twin does not model, a JSON number for a release;
a run name the file does not hold; ``fitted_on`` not an object, its ``gpus`` / ``models`` not a list of names).
A valid value may still be refused for what it implies (a TP size that does not divide the model's heads, a
``max_model_len`` below the requests': one line either way)."""

from __future__ import annotations

import copy
import json
import math

import yaml
from hypothesis import strategies as st

from fuzz_results import BAD_NUMBERS, _stage_folder, calibrate_args, dumps, guidellm_cases, reader_args, text_mutation
from fuzz_values import VALUES, Case, encoded

# the server keys of `twin run concurrency_cap_trap --json` beside a `vllm bench serve` result's own keys
SERVER = {"gpu": "H100-SXM", "tensor_parallel_size": 1, "vllm_version": "0.28", "max_num_seqs": 4,
          "max_num_batched_tokens": 16384, "max_model_len": 131072, "enable_prefix_caching": True,
          "enable_chunked_prefill": True, "block_size": 16, "gpu_memory_utilization": 0.9, "async_scheduling": True}
BENCH = {"backend": "llm-serving-twin", "model_id": "llama-3.1-8b", "num_prompts": 4, "request_rate": "inf",
         "max_concurrency": 4, "duration": 2.0, "completed": 4, "failed": 0, "total_input_tokens": 2048,
         "total_output_tokens": 256, "request_throughput": 2.0, "output_throughput": 128.0,
         "mean_ttft_ms": 60.0, "median_ttft_ms": 60.0, "p99_ttft_ms": 80.0, "mean_tpot_ms": 6.5,
         "median_tpot_ms": 6.5, "p99_tpot_ms": 7.0, "mean_itl_ms": 6.5, **SERVER}
EXTRA = {"gpu": ["h100", "B200", "H100-SXMM", "x" * 300, "y" * 5000, "/etc/passwd", "gpu.yaml"],
         "tensor_parallel_size": ["2", "8", 64, 65, 8.0, "1e3"],
         "vllm_version": ["0.11.0", "v0.19.0-cu130", "nightly", "0.7.3", "9.99", 0.19, "z" * 100_000],
         "block_size": [7, 32, "64", 2048], "gpu_memory_utilization": ["0.85", 1.0, 1.0000001, "0"],
         "max_model_len": [2, 513, 2**31, "131072"], "max_num_seqs": [2**31 - 1, 2**31, "4"],
         "enable_prefix_caching": ["true", "0", "yes", 1]}
BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
FLAGS = ("enable_prefix_caching", "enable_chunked_prefill", "async_scheduling")
COUNTS = ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "block_size")


def _whole(value) -> int | None:
    """The whole number the reader reads ``value`` as (numeric text included), or None."""
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value != int(value):
        return None
    return int(value)


def server_refusal(key: str, value) -> str | None:
    """Why the design refuses ``value`` for the server key ``key`` (None: valid, or absent when null)."""
    from twin.core.vllm_versions import parse_vllm_version
    from twin.hardware.catalog import list_gpus

    if value is None:
        return "no GPU named (no --gpu either)" if key == "gpu" else None
    if key == "gpu":
        names = {n.lower() for g in list_gpus() for n in (g.name, *g.aliases)}
        return None if isinstance(value, str) and value.lower() in names else f"gpu = {value!r:.40}: not a GPU"
    if key == "vllm_version":
        if not isinstance(value, str) or len(value) > 100:
            return f"vllm_version = {value!r:.40}: not a release string"
        try:
            parse_vllm_version(value)
        except ValueError:
            return f"vllm_version = {value!r:.40}: not a modelled release"
        return None
    if key in FLAGS:
        ok = isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in ("true", "false", "1",
                                                                                            "0"))
        return None if ok else f"{key} = {value!r:.40}: not true or false"
    if key == "gpu_memory_utilization":
        try:
            x = float(value.strip()) if isinstance(value, str) else value
        except ValueError:
            x = None
        ok = not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x) and 0 < x <= 1
        return None if ok else f"{key} = {value!r:.40}: not in (0, 1]"
    n = _whole(value)
    high = 64 if key == "tensor_parallel_size" else 2**31 - 1
    if n is None or not 1 <= n <= high or (key == "block_size" and n not in BLOCK_SIZES):
        return f"{key} = {value!r:.40}: not a whole number in range"
    return None


def calibrate_case(draw, surface: str, doc: dict, why: str | None) -> Case:
    """`twin calibrate --from-results` on ``doc`` as a result JSON, its text and encoding drawn mutated too; refused
    for the first of the encoding's, the text's or ``why`` (the planted values') reasons that applies."""
    text, text_why = text_mutation(draw, dumps(doc))
    data, enc_why, intact = draw(encoded(text))
    case = Case(surface, ["calibrate", "--from-results", "{d}/out.json", "-o", "{d}/out/p.json", "-q",
                          "--max-sim-s", "10"], {"out.json": data, "out/.keep": b""})
    case.refuse(enc_why)
    case.refuse(text_why if intact else None)
    case.refuse(why if intact else None)
    return case


@st.composite
def server_key_cases(draw) -> Case:
    doc = copy.deepcopy(BENCH)
    planted = {}
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(sorted(SERVER)))
        value = copy.deepcopy(draw(st.sampled_from(VALUES + EXTRA.get(key, []))))
        if draw(st.integers(0, 9)) == 0:
            doc.pop(key, None)
            value = None
        else:
            doc[key] = value
        planted[key] = value
    why = next((r for k, v in planted.items() if (r := server_refusal(k, v)) is not None), None)
    return calibrate_case(draw, "round22-server-keys", doc, why)


# ------------------------------------------------------------------------------------------------ diagnose --run
SWEEP_ROWS = [{"send_time": 0.25 * i, "ttft": 0.05, "latency": 0.4, "prompt_tokens": 100, "output_tokens": 4}
              for i in range(4)]
RUN_NAMES = ["", " ", "sweep/c", "sweep/c1", "sweep/c2", "sweep/c1 ", "SWEEP/C1", "sweep/c1\nsweep/c2",
             "sweep/c1\u200b", "ßwéep/c1", "x" * 100_000, "--help", "-", "b", "b#1", "\u202e1c/peews"]


@st.composite
def run_name_cases(draw) -> Case:
    """``twin diagnose FILE --run NAME`` on a sweep of two runs (``sweep/c1``, ``sweep/c2``) or a one-run bench
    result (``b``): only those names are valid."""
    name = draw(st.sampled_from(RUN_NAMES))
    if draw(st.booleans()):
        rows = [{**r, "concurrency": c} for c in (1, 2) for r in SWEEP_ROWS]
        files = {"sweep.jsonl": "".join(json.dumps(r) + "\n" for r in rows).encode()}
        target, valid = "{d}/sweep.jsonl", ("sweep/c1", "sweep/c2")
    else:
        doc = {**BENCH, "input_lens": [100] * 4, "output_lens": [4] * 4, "ttfts": [0.05] * 4,
               "latencies": [0.4] * 4, "start_times": [0.25 * i for i in range(4)], "itls": [[0.1] * 3] * 4}
        files = {"b.json": json.dumps(doc).encode()}
        target, valid = "{d}/b.json", ("b",)
    case = Case("round22-diagnose-run", ["diagnose", target, "--run", name], files)
    case.refuse(None if name in valid else f"--run {name!r:.40}: not a run of the file")
    return case


# --------------------------------------------------------------------------------------- a profile's fitted_on
SERVER_PROFILE = {"format": "twin-server-profile", "version": 1, "params": {"step_overhead_s": 2e-3},
                  "fitted_on": {"gpus": ["H100-SXM"], "models": ["llama-3.1-8b"]}}
PROFILE_RUN = {"name": "fz", "deployment": {"gpu": "H100-SXM", "model": "qwen3-32b"}, "server": {"max_model_len": 4096},
               "cost_model": {"kind": "profile", "profile": "p.json"},
               "workload": {"arrivals": {"process": "poisson", "rate_per_s": 20}, "num_requests": 8,
                            "classes": [{"name": "c", "share": 1.0, "prompt": {"suffix_tokens": 64},
                                         "output_tokens": 4}]}}
NAMES = [["llama-3.1-8b"], ["qwen3-32b"], ["H100-SXM", "B200"], [f"m{i}" for i in range(1000)], ["y" * 5000],
         ["z" * 4000], "llama-3.1-8b", [1, None], [["qwen3-32b"]], [""], [True]]


def fitted_on_refusal(fitted_on) -> str | None:
    if fitted_on is None:
        return None
    if not isinstance(fitted_on, dict):
        return "fitted_on is not an object"
    for key in ("gpus", "models"):
        names = fitted_on.get(key)
        if names is not None and (not isinstance(names, list) or any(
                not isinstance(n, str) or not n.strip() or len(n) > 4096 for n in names)):
            return f"fitted_on.{key} is not a list of names"
    return None


@st.composite
def fitted_on_cases(draw) -> Case:
    doc = copy.deepcopy(SERVER_PROFILE)
    op = draw(st.sampled_from(["gpus", "models", "models", "whole"]))
    if op == "whole":
        doc["fitted_on"] = copy.deepcopy(draw(st.sampled_from(VALUES)))
    else:
        doc["fitted_on"][op] = copy.deepcopy(draw(st.sampled_from(NAMES + VALUES)))
    case = Case("round22-profile-fitted-on", ["run", "{d}/s.yaml", "-q"],
                {"p.json": json.dumps(doc).encode(), "s.yaml": yaml.safe_dump(PROFILE_RUN).encode()})
    case.refuse(fitted_on_refusal(doc["fitted_on"]))
    return case


EXP_CONFIG = {"model": "meta-llama/Llama-3.1-8B-Instruct", "tensor_parallelism": 1, "max_num_seqs": 128,
              "max_model_len": 4096, "vllm_version": "0.11"}


def exp_config_refusal(key: str, value) -> str | None:
    """As ``server_refusal``, for YAML: a release written as a number is its text; ``model`` a name."""
    if value is None:
        return None
    if key == "model":
        return None if isinstance(value, str) and value.strip() and len(value) <= 4096 else "model: not a name"
    if key == "tensor_parallelism":
        key = "tensor_parallel_size"
    if key == "vllm_version" and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    return server_refusal(key, value)


@st.composite
def exp_config_cases(draw) -> Case:
    """An inference-perf folder whose ``exp-config.yaml`` states hostile server settings."""
    cfg = dict(EXP_CONFIG)
    key = draw(st.sampled_from(["model", "tensor_parallelism", *sorted(k for k in SERVER if k != "gpu")]))
    cfg[key] = copy.deepcopy(draw(st.sampled_from(VALUES + EXTRA.get(key, []) + ["w" * 100_000])))
    files = {**_stage_folder(), "res/exp-config.yaml": yaml.safe_dump(cfg, allow_unicode=True).encode(),
             "out/.keep": b""}
    case = Case("round22-exp-config", calibrate_args("{d}/res"), files)
    case.refuse(exp_config_refusal(key, cfg[key]))
    return case


# ------------------------------------------------------------------------- AIPerf; GuideLLM read by diagnose
AIPERF_READ = {"time_to_first_token": ("metrics", "time_to_first_token", "value"),
               "request_latency": ("metrics", "request_latency", "value"),
               "input_sequence_length": ("metrics", "input_sequence_length", "value"),
               "output_sequence_length": ("metrics", "output_sequence_length", "value"),
               "request_start_ns": ("metadata", "request_start_ns")}


def _aiperf_records() -> list[dict]:
    import sys
    import tempfile
    from pathlib import Path

    from fuzz_results import TESTS

    if str(TESTS.parent) not in sys.path:
        sys.path.insert(0, str(TESTS.parent))
    from tests.client_layouts import write_aiperf
    from tests.test_diagnose_formats import REQS

    with tempfile.TemporaryDirectory() as d:
        text = (write_aiperf(Path(d) / "aiperf", REQS, concurrency=2, rate=None) / "profile_export.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@st.composite
def aiperf_cases(draw) -> Case:
    """AIPerf's per-request records: a completed request's value that is read (its times and lengths) set to a
    bad number must be refused while it stays there; any other leaf set to a hostile value may go either way."""
    from fuzz_results import _leaves, _set

    records = _aiperf_records()
    planted = []           # (request, key, value)
    for _ in range(draw(st.integers(1, 2))):
        if draw(st.booleans()):
            key = draw(st.sampled_from(sorted(AIPERF_READ)))
            i = draw(st.sampled_from([0, 1, 3]))          # completed requests (request 2 failed)
            value = draw(st.sampled_from(BAD_NUMBERS))
            if _try_set(records[i], AIPERF_READ[key], value):
                planted.append((i, key, value))
        else:
            path = draw(st.sampled_from([p for p in _leaves(records) if p]))
            _set(records, path, copy.deepcopy(draw(st.sampled_from(VALUES))))
    why = next((f"request {i}: {key} = {value!r}" for i, key, value in planted
                if _holds(records, i, AIPERF_READ[key], value)), None)
    text = "".join(json.dumps(r) + "\n" for r in records)
    case = Case("round22-aiperf", reader_args(draw, "{d}/aiperf/profile_export.jsonl"),
                {"aiperf/profile_export.jsonl": text.encode(), "out/.keep": b""})
    case.refuse(why)
    return case


def _try_set(doc, path, value) -> bool:
    try:
        for part in path[:-1]:
            doc = doc[part]
        doc[path[-1]] = value
        return True
    except (KeyError, IndexError, TypeError):
        return False


def _holds(records, i, path, value) -> bool:
    """Whether request ``i`` is still a completed record holding ``value`` at ``path``."""
    try:
        rec = records[i]
        doc = rec
        for part in path:
            doc = doc[part]
        return isinstance(rec, dict) and rec.get("error") is None and doc is value
    except (KeyError, IndexError, TypeError):
        return False


@st.composite
def guidellm_diagnose_cases(draw) -> Case:
    """fuzz_results' GuideLLM cases read by `twin diagnose` (the same reader: the same refusals)."""
    case = draw(guidellm_cases())
    return Case("round22-guidellm-diagnose", ["diagnose", "{d}/benchmarks.json"], case.files, case.must_fail)


def seeds() -> list[tuple[list[str], dict[str, bytes]]]:
    """The unmutated inputs (each must run)."""
    rows = [{**r, "concurrency": c} for c in (1, 2) for r in SWEEP_ROWS]
    return [
        (["calibrate", "--from-results", "{d}/out.json", "-o", "{d}/out/p.json", "-q", "--max-sim-s", "10"],
         {"out.json": json.dumps(BENCH).encode(), "out/.keep": b""}),
        (["diagnose", "{d}/sweep.jsonl", "--run", "sweep/c2"],
         {"sweep.jsonl": "".join(json.dumps(r) + "\n" for r in rows).encode()}),
        (["run", "{d}/s.yaml", "-q"], {"p.json": json.dumps(SERVER_PROFILE).encode(),
                                       "s.yaml": yaml.safe_dump(PROFILE_RUN).encode()}),
        (calibrate_args("{d}/res"), {**_stage_folder(), "res/exp-config.yaml": yaml.safe_dump(EXP_CONFIG).encode(),
                                     "out/.keep": b""}),
        (["diagnose", "{d}/aiperf/profile_export.jsonl"],
         {"aiperf/profile_export.jsonl": "".join(json.dumps(r) + "\n" for r in _aiperf_records()).encode()}),
    ]

