"""`vllm bench serve` results: the JSON ``--save-result`` writes (one run), or the file ``--append-result``
grows (one run per line).

Load: ``request_rate`` (a number, or "inf": everything at once), ``burstiness`` (the gamma shape of the gaps,
1 when absent) and ``max_concurrency``. Lengths: with ``--save-detailed``, the completed requests' exact
``input_lens`` and ``output_lens`` in send order; without, the means ``total_input_tokens / completed`` and
``total_output_tokens / completed`` as constants. Metrics: the file's own (``mean_ttft_ms``, ``p99_tpot_ms``,
...), with E2EL statistics computed from the per-request ``latencies`` when the file has those but not the
statistics (``--percentile-metrics`` leaves e2el out by default). Model: ``model_id``.

vLLM saves no dataset arguments, but ``--metadata KEY=VALUE`` entries land at the top level and are read:
``random_prefix_len`` (one prefix every prompt shares), ``prefix_repetition_prefix_len`` with
``prefix_repetition_num_prefixes``, ``gpu``, ``tensor_parallel_size`` and the server settings ``max_num_seqs``,
``max_num_batched_tokens``, ``max_model_len``, ``enable_prefix_caching``, ``enable_chunked_prefill``,
``block_size``, ``gpu_memory_utilization``, ``vllm_version``, ``async_scheduling`` (each checked as it is read:
``twin.fitting.readers.server_fields``), and the layout (``quantization``, ``kv_cache_dtype``,
``data_parallel_size``, ``enable_expert_parallel``, ...: ``twin.fitting.readers.layout_fields``), every other
server knob the twin's ``--json`` writes (``cudagraph_mode``, ``num_gpu_blocks_override``, ``kv_offloading_size``,
...) and ``server_start`` (``twin.fitting.readers.knob_fields``). Ramp-up runs
(``ramp_up_strategy``) change rate as they go and are refused."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from twin.errors import TwinInputError
from twin.fitting.measured_run import METRIC_KEYS, LengthSample, MeasuredRun, PromptPool
from twin.fitting.readers.fields import JsonLines, get, load_json, number, number_list, shown, try_json, whole
from twin.fitting.readers.knob_fields import cold_start_field, knob_fields
from twin.fitting.readers.layout_fields import layout_fields
from twin.fitting.readers.server_fields import name_field, server_fields, tp_field
from twin.results.metrics import describe
from twin.scenario import MAX_SIM_TIME_S
from twin.workload.clients import VLLM_BENCH

# keys only `vllm bench serve` results carry together (the twin's own --json writes them too)
SIGNATURE = ("completed", "request_throughput", "mean_ttft_ms")


def _is_bench_doc(doc: Any) -> bool:
    return isinstance(doc, dict) and "benchmarks" not in doc and sum(k in doc for k in SIGNATURE) >= 2


def is_vllm_bench(path: Path) -> bool:
    doc = try_json(path)
    if isinstance(doc, JsonLines):
        return bool(doc) and all(_is_bench_doc(d) for d in doc)
    return _is_bench_doc(doc)


def _rate(value: Any, where: str) -> float:
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value <= 0:
        raise TwinInputError(f"{where}: request_rate = {shown(value)}: must be a number > 0 or \"inf\"")
    return float(value)


def _prompt_pool(doc: dict[str, Any], n: int, where: str) -> PromptPool | None:
    if doc.get("random_prefix_len") is not None:
        prefix = whole(doc["random_prefix_len"], "random_prefix_len", where)
        return PromptPool(1, n, prefix) if prefix else None
    if doc.get("prefix_repetition_prefix_len") is not None:
        prefix = whole(doc["prefix_repetition_prefix_len"], "prefix_repetition_prefix_len", where)
        groups = whole(doc.get("prefix_repetition_num_prefixes", 1), "prefix_repetition_num_prefixes", where,
                       low=1)
        return PromptPool(groups, math.ceil(n / groups), prefix) if prefix else None
    return None


def _completed_mask(doc: dict[str, Any], output: np.ndarray, n: int, where: str) -> np.ndarray:
    errors = doc.get("errors")
    if errors is None:
        return output > 0
    if not isinstance(errors, list) or len(errors) != n:
        raise TwinInputError(f"{where}: errors must be a list with one entry per request ({n})")
    return np.array([not e for e in errors], dtype=bool)


def _lengths(doc: dict[str, Any], completed: int, where: str) -> tuple[LengthSample, LengthSample, np.ndarray | None]:
    """(prompt, output, completed-request mask or None when the file has no per-request arrays)."""
    if doc.get("input_lens") is not None:
        prompt = number_list(doc["input_lens"], "input_lens", where)
        output = number_list(get(doc, "output_lens", where), "output_lens", where, length=prompt.size)
        for key in ("ttfts", "latencies", "itls", "start_times", "generated_texts"):
            if isinstance(doc.get(key), list) and len(doc[key]) != prompt.size:
                raise TwinInputError(f"{where}: {key} has {len(doc[key])} entries, expected {prompt.size} (one per "
                                     f"request, as input_lens)")
        # times in seconds, if given: finite, >= 0, latencies no longer than the longest run the twin simulates
        # and send times (perf_counter or epoch seconds) below 1e11
        for key, high in (("ttfts", MAX_SIM_TIME_S), ("latencies", MAX_SIM_TIME_S), ("start_times", 1e11)):
            if doc.get(key) is not None:
                arr = number_list(doc[key], key, where, length=prompt.size)
                over = np.flatnonzero(arr > high)
                if over.size:
                    i = int(over[0])
                    raise TwinInputError(f"{where}: {key}[{i}] = {arr[i]:g} s: at most {high:g} s")
        for i, row in enumerate(doc.get("itls") or []):
            if max(number_list(row, f"itls[{i}]", where), default=0.0) > MAX_SIM_TIME_S:
                raise TwinInputError(f"{where}: itls[{i}]: a gap over {MAX_SIM_TIME_S:g} s")
        ok = _completed_mask(doc, output, prompt.size, where)
        if not ok.any():
            raise TwinInputError(f"{where}: errors: every request failed; nothing to calibrate on")
        for name, arr in (("input_lens", prompt), ("output_lens", output)):
            bad = np.flatnonzero(ok & ((arr < 1) | (arr != np.round(arr))))
            if bad.size:
                i = int(bad[0])
                raise TwinInputError(f"{where}: {name}[{i}] = {arr[i]:g}: a completed request needs a whole "
                                     f"number of tokens >= 1")
        return (LengthSample(values=tuple(int(v) for v in prompt[ok])),
                LengthSample(values=tuple(int(v) for v in output[ok])), ok)
    means = []
    for key in ("total_input_tokens", "total_output_tokens"):
        mean = number(get(doc, key, where), key, where) / completed
        if mean < 1:
            raise TwinInputError(f"{where}: {key} / completed = {mean:g}: must be >= 1 token per request")
        means.append(LengthSample.constant(int(round(mean))))
    return means[0], means[1], None


def _metrics(doc: dict[str, Any], ok: np.ndarray | None, where: str) -> dict[str, float]:
    metrics: dict[str, float] = {}
    for key in METRIC_KEYS:
        if doc.get(key) is not None:
            metrics[key] = number(doc[key], key, where)
    if "mean_e2el_ms" not in metrics and isinstance(doc.get("latencies"), list):
        lat = number_list(doc["latencies"], "latencies", where)
        # failed requests carry latency 0; without per-request errors that is how to tell them
        lat = lat[ok] if ok is not None and ok.size == lat.size else lat[lat > 0]
        stats = describe(lat, "e2el", (99,))
        metrics.update({k: v for k, v in stats.items() if k in METRIC_KEYS and v is not None})
    return metrics


def read_run(doc: Any, name: str, where: str, experiment: str | None = None) -> MeasuredRun:
    """One run from one `vllm bench serve` result document."""
    if not isinstance(doc, dict):
        raise TwinInputError(f"{where}: expected a JSON object (a vllm bench serve result)")
    if doc.get("ramp_up_strategy"):
        raise TwinInputError(f"{where}: ramp_up_strategy = {doc['ramp_up_strategy']!r}: a ramp-up run changes "
                             f"its rate as it goes; calibrate on constant-rate or fixed-concurrency runs")
    completed = whole(get(doc, "completed", where), "completed", where)
    if completed < 1:
        raise TwinInputError(f"{where}: completed = 0: no request completed; nothing to calibrate on")
    failed = whole(doc.get("failed", 0), "failed", where)
    rate = _rate(get(doc, "request_rate", where), where)
    burstiness = number(doc.get("burstiness", 1.0), "burstiness", where)
    if burstiness <= 0:
        raise TwinInputError(f"{where}: burstiness = {burstiness!r}: must be a number > 0")
    max_c = doc.get("max_concurrency")
    max_c = None if max_c is None else whole(max_c, "max_concurrency", where, low=1)
    prompt, output, ok = _lengths(doc, completed, where)
    n = completed + failed
    if ok is not None and (int(ok.sum()) != completed or ok.size != n):
        # vllm bench serve writes one entry per request sent, and completed + failed = requests sent
        raise TwinInputError(f"{where}: completed = {completed}, failed = {failed} but the per-request arrays "
                             f"hold {ok.size} requests of which {int(ok.sum())} completed; the counts must agree")
    if doc.get("num_prompts") is not None and whole(doc["num_prompts"], "num_prompts", where) != n:
        # vllm bench serve sends num_prompts requests; each completes or fails
        raise TwinInputError(f"{where}: num_prompts = {doc['num_prompts']!r} but completed + failed = {n}; the "
                             f"counts must agree")
    duration = doc.get("duration")
    return MeasuredRun(
        name=name, source="vllm-bench-serve", num_requests=n, prompt_tokens=prompt, output_tokens=output,
        metrics=_metrics(doc, ok, where), rate_per_s=rate, max_concurrency=max_c, burstiness=burstiness,
        duration_s=None if duration is None else number(duration, "duration", where),
        prompt_pool=_prompt_pool(doc, n, where),
        model=name_field(doc, "model_id", where), gpu=name_field(doc, "gpu", where),
        tensor_parallel_size=tp_field(doc, where),
        server={**server_fields(doc, where), **knob_fields(doc, where)}, layout=layout_fields(doc, where),
        experiment=experiment, client=VLLM_BENCH, cold_start=cold_start_field(doc, where))


def read_vllm_bench(path: Path) -> list[MeasuredRun]:
    doc = load_json(path)
    if isinstance(doc, JsonLines):
        return [read_run(d, f"{path.stem}#{k + 1}", f"{path}, line {line}", experiment=path.stem)
                for k, (d, line) in enumerate(zip(doc, doc.line_numbers))]
    return [read_run(doc, path.stem, str(path))]
