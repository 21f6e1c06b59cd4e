"""Fuzz cases for round 23's layout keys: the deployment layout a result JSON states at its top level (the twin's
own ``--json`` writes it: ``twin.results.server_keys``; the reader's checks: ``twin.fitting.readers.layout_fields``;
calibration's refusals: ``twin.cli.calibrate_layout``), read by `twin calibrate --from-results` with no other
option.

The design oracle (``layout_refusal``) says whether a planted value must be refused: a wrong type, out of range, a
format or backend the twin does not know, and every layout calibration cannot fit from one result file (more than
one replica or replica group, a disaggregated run, speculative decoding, an expert-parallel exchange the twin does
not model). A valid value may still be refused for what it implies (expert parallelism on the dense model of
the seed, more pipeline stages than its layers): one line either way."""

from __future__ import annotations

import copy
import json
import math

from hypothesis import strategies as st

from fuzz_round22 import BENCH, _whole, calibrate_case
from fuzz_values import VALUES, Case

GROUPS = ("attention", "dense_mlp", "routed_experts", "shared_experts", "router", "lm_head")
KV = ("auto", "bfloat16", "bf16", "float16", "fp16", "float32", "fp32", "fp8", "fp8_e4m3", "fp8_e5m2")
EXTRA = {"quantization": ["fp8", "awq", "awq_marlin", "gptq_marlin", "modelopt_fp4", "mxfp4", "bitsandbytes",
                          "int4-g64-sym", "compressed-tensors", "auto", "None", " FP8 ", "q" * 5000],
         "weight_formats": [{"attention": "fp8"}, {"routed_experts": "awq"}, {"attention": "zz"}, {"mlp": "fp8"},
                            {g: "fp8" for g in GROUPS}, {"attention": 8}, {"attention": ["fp8"]}],
         "kv_cache_dtype": ["fp8", "FP8_E5M2", "auto", "int8", "fp8_ds_mla", "nvfp4", "k" * 5000],
         "pipeline_parallel_size": [2, "2", 32, 33, 64, 65], "data_parallel_size": [2, "4", 1024, 1025],
         "enable_expert_parallel": ["true", "0", "yes"], "all2all_backend": ["allgather_reducescatter", "deepep",
                                                                            "naive", "Deep EP", "a" * 200],
         "replicas": [1, "1", 2, 4096, 4097], "replica_groups": [1, 2, "3"],
         "disaggregation": ["1P1D", "2p1d", "0P1D", "1P", "99999P1D"],
         "speculative_config": ['{"method": "eagle", "num_speculative_tokens": 4}', {"method": "ngram"}, "[" * 3000,
                                "s" * 5000]}
LAYOUT_KEYS = sorted(EXTRA)


def _format_ok(value) -> bool:
    from twin.errors import TwinInputError
    from twin.hardware.quant import normalize_weight_dtype

    if not isinstance(value, str) or not value.strip() or len(value) > 100:
        return False
    try:
        normalize_weight_dtype(value.strip())
    except TwinInputError:
        return False
    return True


def layout_refusal(key: str, value) -> str | None:
    """Why the design refuses ``value`` for the layout key ``key`` (None: valid, or absent when null)."""
    if value is None:
        return None
    bad = f"{key} = {value!r:.40}"
    if key == "quantization":
        skip = isinstance(value, str) and value.strip().lower() in ("auto", "none")
        return None if skip or _format_ok(value) else f"{bad}: not a weight format"
    if key == "weight_formats":
        ok = isinstance(value, dict) and 0 < len(value) <= len(GROUPS) and all(
            k in GROUPS and _format_ok(v) for k, v in value.items())
        return None if ok else f"{bad}: not layer groups of weight formats"
    if key == "kv_cache_dtype":
        ok = isinstance(value, str) and len(value) <= 100 and value.strip().lower() in KV
        return None if ok else f"{bad}: not a KV-cache format"
    if key == "enable_expert_parallel":
        ok = isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in ("true", "false", "1",
                                                                                            "0"))
        return None if ok else f"{bad}: not true or false"
    if key == "all2all_backend":      # the exchanges the twin models (33zJ: replayed, no longer refused)
        return None if isinstance(value, str) and value.strip() in ("allgather_reducescatter", "naive", "deepep") \
            else f"{bad}: not an exchange the twin models"
    if key in ("disaggregation", "speculative_config"):
        return f"{bad}: a layout calibration refuses (or not one)"
    n = _whole(value)
    high = {"pipeline_parallel_size": 64, "data_parallel_size": 1024}.get(key, 1)
    return None if n is not None and 1 <= n <= high else f"{bad}: not a whole number in range"


def _planted_case(draw, surface: str, keys, extra: dict, refusal) -> Case:
    """A result JSON with one or two of ``keys`` planted, half the values drawn from the key's own list in
    ``extra`` (most valid), half from the shared hostile ``VALUES``; refused where ``refusal`` says a value is."""
    doc = copy.deepcopy(BENCH)
    planted = {}
    for _ in range(draw(st.integers(1, 2))):
        key = draw(st.sampled_from(keys))
        pool = extra[key] if draw(st.booleans()) else VALUES
        value = copy.deepcopy(draw(st.sampled_from(pool)))
        doc[key] = value
        planted[key] = value
    why = next((r for k, v in planted.items() if (r := refusal(k, v)) is not None), None)
    return calibrate_case(draw, surface, doc, why)


@st.composite
def layout_key_cases(draw) -> Case:
    return _planted_case(draw, "round23-layout-keys", LAYOUT_KEYS, EXTRA, layout_refusal)


def seeds() -> list[tuple[list[str], dict[str, bytes]]]:
    """The valid layouts of the seed (each must run): an FP8 server with an FP8 KV cache, data parallelism."""
    doc = {**BENCH, "quantization": "fp8", "kv_cache_dtype": "fp8_e4m3", "data_parallel_size": "2",
           "replicas": 1, "all2all_backend": "allgather_reducescatter"}
    return [(["calibrate", "--from-results", "{d}/out.json", "-o", "{d}/out/p.json", "-q", "--max-sim-s", "10"],
             {"out.json": json.dumps(doc).encode(), "out/.keep": b""})]


# round 23 (33zJ): every other server knob the twin's --json writes (twin.results.server_keys.KNOB_KEYS) and
# server_start, read back by calibrate (twin.fitting.readers.knob_fields); scheduling_policy priority is refused
KNOB_FLAGS = ("fuse_allreduce_rms", "static_reserve_max_length", "static_pad_finished",
              "async_free_after_next_schedule", "async_hold_finished_slots", "reserve_null_block",
              "free_unhashed_blocks_to_head", "scheduler_reserve_full_isl", "prefix_cache_stats_at_admission",
              "pad_spec_decode_first_step")
# whole numbers: (lowest, highest)
KNOB_COUNTS = {"num_gpu_blocks_override": (2, 2**31 - 1), "max_cudagraph_capture_size": (1, math.inf),
               "long_prefill_token_threshold": (0, math.inf), "static_batch_size": (1, math.inf)}
# numbers: (lowest, highest, lowest excluded, highest excluded)
KNOB_NUMBERS = {"kv_offloading_size": (0, 1 << 20, True, False), "kv_offloading_bandwidth_gb_s": (0, 1e5, True, False),
                "admission_watermark": (0, 1, False, True), "static_batch_timeout_s": (0, math.inf, False, True)}
KNOB_CHOICES = {"cudagraph_mode": ("full_and_piecewise", "piecewise", "full", "full_decode_only", "none"),
                "entrypoint": ("serve", "llm"), "kv_offloading_backend": ("native", "lmcache"),
                "scheduler": ("continuous", "prefill_first", "static"), "scheduling_policy": ("fcfs",),
                "float32_matmul_precision": ("highest", "high", "medium"), "server_start": ("warm", "cold")}
KNOB_EXTRA = {"cudagraph_mode": ["FULL_DECODE_ONLY", "piecewise", "none", "sometimes"],
              "num_gpu_blocks_override": [2, "20000", 1, 2**31, "lots", 20000.0],
              "max_cudagraph_capture_size": ["64", 0, 512, 10**30], "entrypoint": ["llm", "LLM", "offline"],
              "kv_offloading_size": ["4.5", 4, 0, 1 << 21, "1e309"], "kv_offloading_backend": ["LMCache", "native",
                                                                                               "mooncake"],
              "kv_offloading_lower": ['{"size_gib": 8, "bandwidth_gb_s": 5}', {"size_gib": 8, "bandwidth_gb_s": 5},
                                      {"size_gib": 8}, {"size_gib": 8, "bandwidth_gb_s": 5, "x": 1}, "[" * 3000],
              "scheduling_policy": ["fcfs", "FCFS", "priority", "lifo"], "scheduler": ["static", "prefill_first"],
              "admission_watermark": ["0.05", 0.99, 1.0], "long_prefill_token_threshold": [256, "0", -1],
              "fuse_allreduce_rms": ["true", "0", 1, "yes"], "reserve_null_block": [False, "false"],
              "server_start": ["cold", "WARM", "lukewarm", ["cold"]], "float32_matmul_precision": ["high", "tf32"]}
KNOB_KEYS = sorted(KNOB_EXTRA)


def _number(value) -> float | None:
    """The number the reader reads ``value`` as (numeric text included), or None."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def knob_refusal(key: str, value) -> str | None:
    """Why the design refuses ``value`` for the knob key ``key`` (None: valid, absent when null, or left open)."""
    if value is None:
        return None
    bad = f"{key} = {value!r:.40}"
    if key in KNOB_FLAGS:
        ok = isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in ("true", "false", "1",
                                                                                            "0"))
        return None if ok else f"{bad}: not true or false"
    if key in KNOB_CHOICES:
        ok = isinstance(value, str) and len(value) <= 100 and value.strip().lower() in KNOB_CHOICES[key]
        return None if ok else f"{bad}: not one of the choices calibrate replays"
    if key == "kv_offloading_lower":
        if isinstance(value, str) and len(value) <= 4096:
            try:
                value = json.loads(value)
            except ValueError:
                return f"{bad}: not an object"
        if not isinstance(value, dict) or set(value) != {"size_gib", "bandwidth_gb_s"}:
            return f"{bad}: not an object of size_gib and bandwidth_gb_s"
        if any(isinstance(v, (bool, list, dict)) for v in value.values()):
            return f"{bad}: not numbers"
        return None
    x = _number(value)
    if x is None or not math.isfinite(x):
        return f"{bad}: not a finite number"
    if key in KNOB_COUNTS:
        low, high = KNOB_COUNTS[key]
        return None if x == int(x) and low <= x <= high else f"{bad}: not a whole number in range"
    low, high, low_open, high_open = KNOB_NUMBERS[key]
    ok = (x > low if low_open else x >= low) and (x < high if high_open else x <= high)
    return None if ok else f"{bad}: out of range"


@st.composite
def knob_key_cases(draw) -> Case:
    return _planted_case(draw, "round23-knob-keys", KNOB_KEYS, KNOB_EXTRA, knob_refusal)
