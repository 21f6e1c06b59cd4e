"""AIPerf (NVIDIA, ai-dynamo/aiperf) results: ``profile_export.jsonl`` (one record per request) and
``profile_export_aiperf.json`` (aggregate statistics and the configuration the run used), both in the run's
artifacts folder (layout: aiperf's ``docs/tutorials/working-with-profile-exports.md`` and
``src/aiperf/exporters/metrics_json_exporter.py``).

Per-request records: ``metadata.request_start_ns`` / ``request_end_ns`` (epoch ns), ``metadata.benchmark_phase``
(only ``profiling`` records count; warm-up ones are left out), ``metrics.<tag>.value`` with its ``unit``
(``time_to_first_token`` and ``request_latency`` in ms, ``input_sequence_length`` and ``output_sequence_length``
in tokens) and ``error`` (null when the request succeeded). They give exact lengths and metrics computed as
`vllm bench serve` defines them (``twin.fitting.readers.request_times``).

Aggregate: each metric by its tag with ``avg``, ``p50``, ``p90``, ``p99`` (...) and its ``unit``, at the top
level in current releases and under ``records`` in older ones (where TTFT's tag is ``ttft``). AIPerf's
``inter_token_latency`` is per request (latency - TTFT) / (output tokens - 1), vLLM's TPOT. Lengths are the
``input_sequence_length`` / ``output_sequence_length`` percentiles.

Load, from ``input_config.loadgen``: ``concurrency`` users in a closed loop, or ``request_rate`` (Poisson, or
evenly spaced with ``request_rate_mode: constant``), capped at ``concurrency`` when both are given. A folder
with both files reads as one run: the records, with the load the aggregate's configuration states."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from twin.errors import TwinInputError
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.fitting.readers.fields import JsonLines, load_json, number, try_json, whole
from twin.fitting.readers.request_times import MAX_BURSTINESS, RequestTimes, run_from_requests
from twin.scenario import MAX_SIM_TIME_S
from twin.workload.trace_rows import MAX_TOKEN_COUNT

MAX_EPOCH_S = 1e11          # send times: epoch seconds (year ~5000) at most, as the other readers allow
RECORDS_NAME = "profile_export.jsonl"
AGGREGATE_NAME = "profile_export_aiperf.json"
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}
QUANTILE_KEYS = (("min", 0.0), ("p1", 0.01), ("p5", 0.05), ("p10", 0.1), ("p25", 0.25), ("p50", 0.5),
                 ("p75", 0.75), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))


def _is_record(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("metadata"), dict) and "metrics" in doc \
        and "request_start_ns" in doc["metadata"]


def _metrics_of(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["records"] if isinstance(doc.get("records"), dict) else doc


def _is_aggregate(doc: Any) -> bool:
    if not isinstance(doc, dict) or "input_config" not in doc:
        return False
    m = _metrics_of(doc)
    return any(isinstance(m.get(k), dict) and "avg" in m[k] for k in ("request_throughput", "request_latency"))


def _folder_files(folder: Path) -> tuple[Path | None, Path | None]:
    rec, agg = folder / RECORDS_NAME, folder / AGGREGATE_NAME
    return (rec if rec.is_file() else None), (agg if agg.is_file() else None)


def is_aiperf(path: Path) -> bool:
    if path.is_dir():
        return any(_folder_files(path))
    doc = try_json(path)
    if isinstance(doc, JsonLines) or isinstance(doc, list):
        return bool(doc) and _is_record(doc[0])
    return _is_record(doc) or _is_aggregate(doc)


def _load(agg: dict[str, Any] | None, where: str) -> dict[str, Any] | None:
    """MeasuredRun load arguments from the aggregate's configuration (None when it does not say)."""
    if agg is None:
        return None
    loadgen = _dig(agg, "input_config", "loadgen")
    if not isinstance(loadgen, dict):
        return None
    users = loadgen.get("concurrency")
    users = None if users is None else whole(users, "input_config.loadgen.concurrency", where, low=1)
    rate = loadgen.get("request_rate")
    if rate is not None:
        rate = number(rate, "input_config.loadgen.request_rate", where)
        if rate <= 0:
            raise TwinInputError(f"{where}: input_config.loadgen.request_rate = {rate!r}: must be > 0")
        constant = str(loadgen.get("request_rate_mode", "")).lower() == "constant"
        return {"rate_per_s": rate, "max_concurrency": users, "burstiness": MAX_BURSTINESS if constant else 1.0}
    if users is not None:
        return {"rate_per_s": None, "max_concurrency": users}
    return None


def _dig(d: Any, *keys: str) -> Any:
    """``d[k1][k2]...``, or None where a level is missing or not an object (optional fields only)."""
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def _model(agg: dict[str, Any] | None) -> str | None:
    """The served model the configuration names (current releases: ``models.items[0].name``; older:
    ``endpoint.model_names[0]``), or None."""
    cfg = _dig(agg, "input_config")
    names = _dig(cfg, "endpoint", "model_names")
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0]
    items = _dig(cfg, "models", "items")
    if isinstance(items, list) and items and isinstance(items[0], dict) and isinstance(items[0].get("name"), str):
        return items[0]["name"]
    return None


def _value_s(metrics: dict[str, Any], tag: str, where: str) -> float:
    m = metrics.get(tag)
    if not isinstance(m, dict) or "value" not in m:
        raise TwinInputError(f"{where}: missing field metrics.{tag}.value")
    unit = m.get("unit", "ms")
    if not isinstance(unit, str) or unit not in TIME_UNITS:
        raise TwinInputError(f"{where}: metrics.{tag}.unit = {unit!r}: expected one of {', '.join(TIME_UNITS)}")
    seconds = number(m["value"], f"metrics.{tag}.value", where) * TIME_UNITS[unit]
    if seconds > MAX_SIM_TIME_S:
        raise TwinInputError(f"{where}: metrics.{tag}.value = {m['value']!r} {unit}: at most {MAX_SIM_TIME_S:g} s")
    return seconds


def _tokens(metrics: dict[str, Any], tag: str, where: str) -> float:
    m = metrics.get(tag)
    if not isinstance(m, dict) or "value" not in m:
        raise TwinInputError(f"{where}: missing field metrics.{tag}.value")
    tokens = whole(m["value"], f"metrics.{tag}.value", where)
    if tokens > MAX_TOKEN_COUNT:
        raise TwinInputError(f"{where}: metrics.{tag}.value = {tokens}: at most {MAX_TOKEN_COUNT:,} tokens")
    return float(tokens)


def _records(path: Path) -> RequestTimes:
    doc = load_json(path)
    docs = list(doc) if isinstance(doc, (JsonLines, list)) else [doc]
    lines = doc.line_numbers if isinstance(doc, JsonLines) else list(range(1, len(docs) + 1))
    rows = []
    for r, line in zip(docs, lines):
        where = f"{path}, line {line}"
        if not _is_record(r):
            raise TwinInputError(f"{where}: expected an AIPerf record (metadata.request_start_ns, metrics, error)")
        meta = r["metadata"]
        if meta.get("benchmark_phase", "profiling") != "profiling":
            continue          # warm-up requests are not part of the measurement
        send = number(meta["request_start_ns"], "metadata.request_start_ns", where) * 1e-9
        if send > MAX_EPOCH_S:
            raise TwinInputError(f"{where}: metadata.request_start_ns = {meta['request_start_ns']!r}: epoch "
                                 f"nanoseconds, at most {MAX_EPOCH_S:g} s")
        metrics = r.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise TwinInputError(f"{where}: metrics must be an object")
        if r.get("error") or meta.get("was_cancelled"):
            rows.append((send, np.nan, np.nan, 0.0, 0.0, False))
            continue
        ttft = _value_s(metrics, "time_to_first_token", where)
        e2el = _value_s(metrics, "request_latency", where)
        rows.append((send, ttft, e2el, _tokens(metrics, "input_sequence_length", where),
                     _tokens(metrics, "output_sequence_length", where), True))
    if not rows:
        raise TwinInputError(f"{path}: no profiling record (every record is a warm-up one)")
    a = np.array(rows, dtype=float)
    t = RequestTimes(a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4], a[:, 5].astype(bool))
    t.check(str(path), {"ttft": "metrics.time_to_first_token", "e2el": "metrics.request_latency",
                        "prompt": "metrics.input_sequence_length", "output": "metrics.output_sequence_length"})
    return t


def _stat_ms(metrics: dict[str, Any], tags: tuple[str, ...], stat: str, where: str) -> float | None:
    for tag in tags:
        m = metrics.get(tag)
        if isinstance(m, dict) and m.get(stat) is not None:
            unit = m.get("unit", "ms")
            if not isinstance(unit, str) or unit not in TIME_UNITS:
                raise TwinInputError(f"{where}: {tag}.unit = {unit!r}: expected one of {', '.join(TIME_UNITS)}")
            return 1e3 * TIME_UNITS[unit] * number(m[stat], f"{tag}.{stat}", where)
    return None


def _quantiles(metrics: dict[str, Any], tag: str, where: str) -> LengthSample:
    m = metrics.get(tag)
    if not isinstance(m, dict):
        raise TwinInputError(f"{where}: missing field {tag} (the request lengths)")
    pts = [(q, number(m[k], f"{tag}.{k}", where)) for k, q in QUANTILE_KEYS if m.get(k) is not None]
    if len(pts) < 2:
        if m.get("avg") is None:
            raise TwinInputError(f"{where}: {tag}: needs avg or at least two of min, p1 .. p99, max")
        return LengthSample.constant(max(1, int(round(number(m["avg"], f"{tag}.avg", where)))))
    if any(b < a for (_, a), (_, b) in zip(pts, pts[1:])):
        raise TwinInputError(f"{where}: {tag}: percentiles must not decrease")
    return LengthSample(quantiles=tuple(pts))


def _aggregate_run(doc: dict[str, Any], path: Path, name: str) -> MeasuredRun:
    where = str(path)
    m = _metrics_of(doc)
    load = _load(doc, where)
    if load is None:
        raise TwinInputError(f"{where}: input_config.loadgen states neither concurrency nor request_rate; the "
                             f"offered load is unknown (give the run's profile_export.jsonl beside it)")
    metrics: dict[str, float] = {}
    for key, tags, stat in (("mean_ttft_ms", ("time_to_first_token", "ttft"), "avg"),
                            ("median_ttft_ms", ("time_to_first_token", "ttft"), "p50"),
                            ("p90_ttft_ms", ("time_to_first_token", "ttft"), "p90"),
                            ("p99_ttft_ms", ("time_to_first_token", "ttft"), "p99"),
                            ("mean_tpot_ms", ("inter_token_latency",), "avg"),
                            ("median_tpot_ms", ("inter_token_latency",), "p50"),
                            ("p99_tpot_ms", ("inter_token_latency",), "p99"),
                            ("mean_e2el_ms", ("request_latency",), "avg"),
                            ("median_e2el_ms", ("request_latency",), "p50"),
                            ("p99_e2el_ms", ("request_latency",), "p99")):
        v = _stat_ms(m, tags, stat, where)
        if v is not None:
            metrics[key] = v
    for key, tag in (("request_throughput", "request_throughput"), ("output_throughput", "output_token_throughput"),
                     ("completed", "request_count"), ("failed", "error_request_count")):
        if isinstance(m.get(tag), dict) and m[tag].get("avg") is not None:
            metrics[key] = number(m[tag]["avg"], f"{tag}.avg", where)
    if "mean_ttft_ms" not in metrics or "mean_e2el_ms" not in metrics:
        raise TwinInputError(f"{where}: missing field time_to_first_token (or request_latency): a streamed run "
                             f"(--streaming) measures TTFT")
    completed = int(metrics.get("completed", 0))
    if completed < 1:
        raise TwinInputError(f"{where}: request_count.avg = {completed}: no request completed")
    failed = int(metrics.get("failed", 0))
    duration = m.get("benchmark_duration")
    duration = number(duration["avg"], "benchmark_duration.avg", where) \
        if isinstance(duration, dict) and duration.get("avg") is not None else None
    return MeasuredRun(name=name, source="aiperf", num_requests=completed + failed,
                       prompt_tokens=_quantiles(m, "input_sequence_length", where),
                       output_tokens=_quantiles(m, "output_sequence_length", where), metrics=metrics,
                       duration_s=duration, model=_model(doc), experiment=name, client="aiperf", **load)


def read_aiperf(path: Path) -> list[MeasuredRun]:
    path = Path(path)
    if path.is_dir():
        rec, agg = _folder_files(path)
        name = path.name
    else:
        doc = load_json(path)
        single_record = _is_record(doc)
        rec, agg = (path, None) if isinstance(doc, (JsonLines, list)) or single_record else (None, path)
        if rec is not None and (path.parent / AGGREGATE_NAME).is_file():
            agg = path.parent / AGGREGATE_NAME         # the configuration beside the records
        name = path.parent.name or path.stem
    agg_doc = load_json(agg) if agg is not None else None
    if agg_doc is not None and not _is_aggregate(agg_doc):
        raise TwinInputError(f"{agg}: not an AIPerf aggregate (expected input_config and metric statistics)")
    if rec is None:
        return [_aggregate_run(agg_doc, agg, name)]
    t = _records(rec)
    load = _load(agg_doc, str(agg)) if agg_doc is not None else None
    if load is not None and load["rate_per_s"] is None:
        run = run_from_requests(name, "aiperf", t, max_concurrency=load["max_concurrency"], closed_loop=True,
                                model=_model(agg_doc), experiment=name)
    else:
        run = run_from_requests(name, "aiperf", t, max_concurrency=load["max_concurrency"] if load else None,
                                model=_model(agg_doc), experiment=name)
    return [run]

