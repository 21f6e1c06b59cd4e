"""GuideLLM reports (``benchmarks.json``): one ``MeasuredRun`` per benchmark of the report, in file order.

Each benchmark's scheduling strategy (``config.strategy``; ``scheduler.strategy`` or ``args.strategy`` in older
reports) is its load: ``synchronous`` is one user in a closed loop, ``concurrent`` ``streams`` users,
``throughput`` everything at once (capped at its ``max_concurrency`` when set), ``constant`` a fixed ``rate``
(evenly spaced: the most regular gamma gaps the replay draws), ``poisson`` a Poisson ``rate``. A sweep is its
synchronous, throughput and constant-rate benchmarks, each read as such.

When the report holds every successful request (``requests.successful`` as long as
``request_totals.successful``), lengths are their exact token counts and metrics are computed from their
timings as `vllm bench serve` defines them (``twin.fitting.readers.request_times``). When the requests were
sampled (``--sample-requests``) or left out, lengths are the ``prompt_token_count`` / ``output_token_count``
percentiles of the successful requests and metrics come from the summaries: TTFT from
``time_to_first_token_ms``, TPOT and ITL from ``inter_token_latency_ms`` (GuideLLM's per-request (last token -
first token) / (output tokens - 1), vLLM's TPOT), E2EL from ``request_latency`` (seconds), throughputs from
``requests_per_second`` and ``output_tokens_per_second``. Prefix sharing is read from synthetic data arguments
(``prefix_tokens`` with ``prefix_count``, or a single ``prefix_buckets`` entry) in the report's ``args.data``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from twin.errors import TwinInputError
from twin.json_input import parse_json
from twin.fitting.measured_run import LengthSample, MeasuredRun, PromptPool
from twin.fitting.readers.fields import get, load_json, number, try_json, whole
from twin.fitting.readers.request_times import MAX_BURSTINESS, RequestTimes, measured_metrics

PERCENTILE_KEYS = (("min", 0.0), ("p001", 0.001), ("p01", 0.01), ("p05", 0.05), ("p10", 0.1), ("p25", 0.25),
                   ("p50", 0.5), ("p75", 0.75), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999),
                   ("max", 1.0))


def is_guidellm(path: Path) -> bool:
    doc = try_json(path)
    return isinstance(doc, dict) and isinstance(doc.get("benchmarks"), list)


def _load(strategy: Any, where: str) -> tuple[str, dict[str, Any]]:
    """(label, MeasuredRun load arguments) of a scheduling strategy."""
    if not isinstance(strategy, dict):
        raise TwinInputError(f"{where}: missing field config.strategy (or scheduler.strategy, args.strategy)")
    kind = strategy.get("type_")
    cap = strategy.get("max_concurrency")
    cap = None if cap is None else whole(cap, "strategy.max_concurrency", where, low=1)
    if kind == "synchronous":
        return "synchronous", {"rate_per_s": None, "max_concurrency": 1}
    if kind == "concurrent":
        streams = whole(get(strategy, "streams", where), "strategy.streams", where, low=1)
        return f"concurrent@{streams}", {"rate_per_s": None, "max_concurrency": streams}
    if kind == "throughput":
        return "throughput", {"rate_per_s": math.inf, "max_concurrency": cap}
    if kind in ("constant", "poisson"):
        rate = number(get(strategy, "rate", where), "strategy.rate", where)
        if rate <= 0:
            raise TwinInputError(f"{where}: strategy.rate = {rate!r}: must be > 0")
        return f"{kind}@{rate:g}", {"rate_per_s": rate, "max_concurrency": cap,
                                    "burstiness": MAX_BURSTINESS if kind == "constant" else 1.0}
    raise TwinInputError(f"{where}: strategy.type_ = {kind!r}: expected synchronous, concurrent, throughput, "
                         f"constant or poisson")


def _first(d: dict[str, Any], *paths: str) -> Any:
    for p in paths:
        v = get(d, p, "", required=False)
        if v is not None:
            return v
    return None


def _requests(b: dict[str, Any], where: str) -> tuple[RequestTimes | None, int]:
    """The successful and errored requests (None when the report has no per-request list) and the number of
    successful ones listed."""
    reqs = b.get("requests")
    if not isinstance(reqs, dict) or not isinstance(reqs.get("successful"), list) or not reqs["successful"]:
        return None, 0
    rows = []
    for status in ("successful", "errored"):
        listed = reqs.get(status) or []
        if not isinstance(listed, list):
            raise TwinInputError(f"{where}: requests.{status} must be a list")
        for i, r in enumerate(listed):
            field = f"requests.{status}[{i}]"
            if not isinstance(r, dict):
                raise TwinInputError(f"{where}: {field} must be an object")
            send = _first(r, "request_start_time", "info.timings.request_start", "start_time")
            if send is None:
                raise TwinInputError(f"{where}: {field}: missing field request_start_time (or start_time)")
            send = number(send, f"{field}.request_start_time", where)
            ok = status == "successful"
            if not ok:
                rows.append((send, np.nan, np.nan, 0.0, 0.0, False))
                continue
            end = number(_first(r, "request_end_time", "info.timings.request_end", "end_time"),
                         f"{field}.request_end_time", where)
            first = _first(r, "first_token_time", "info.timings.first_token_iteration")
            if first is None and r.get("time_to_first_token_ms") is not None:
                first = send + number(r["time_to_first_token_ms"], f"{field}.time_to_first_token_ms", where) / 1e3
            first = number(first, f"{field}.first_token_time", where)
            prompt = whole(_first(r, "prompt_tokens", "input_metrics.total_tokens"), f"{field}.prompt_tokens",
                           where)
            output = whole(_first(r, "output_tokens", "output_metrics.total_tokens"), f"{field}.output_tokens",
                           where)
            if not send <= first <= end + 1e-9:
                raise TwinInputError(f"{where}: {field}: times out of order (start {send:g}, first token "
                                     f"{first:g}, end {end:g}): need start <= first token <= end")
            rows.append((send, first - send, end - send, prompt, output, True))
    a = np.array(rows, dtype=float)
    t = RequestTimes(a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 4], a[:, 5].astype(bool))
    t.check(where, {"ttft": "TTFT", "e2el": "latency", "prompt": "requests.successful.prompt_tokens",
                    "output": "requests.successful.output_tokens"})
    return t, len(reqs["successful"])


def _summary(b: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    dist = get(b, f"metrics.{name}.successful", where)
    if not isinstance(dist, dict):
        raise TwinInputError(f"{where}: metrics.{name}.successful must be an object of statistics")
    return dist


def _stat(dist: dict[str, Any], stat: str, field: str, where: str) -> float:
    value = dist.get(stat, get(dist, f"percentiles.{stat}", where, required=False))
    if value is None and stat == "median":
        value = get(dist, "percentiles.p50", where, required=False)
    if value is None:
        raise TwinInputError(f"{where}: missing field {field}.{stat}")
    return number(value, f"{field}.{stat}", where)


def _quantiles(b: dict[str, Any], name: str, where: str) -> LengthSample:
    dist = _summary(b, name, where)
    field = f"metrics.{name}.successful"
    pct = dist.get("percentiles") or {}
    if not isinstance(pct, dict):
        raise TwinInputError(f"{where}: {field}.percentiles must be an object (p001 ... p999)")
    pts = [(q, number(dist[k] if k in dist else pct[k], f"{field}.{k}", where))
           for k, q in PERCENTILE_KEYS if k in dist or k in pct]
    if len(pts) < 2:
        raise TwinInputError(f"{where}: {field}: needs at least two of min, percentiles (p001..p999), max")
    if any(b2 < a2 for (_, a2), (_, b2) in zip(pts, pts[1:])):
        raise TwinInputError(f"{where}: {field}: percentiles must not decrease")
    return LengthSample(quantiles=tuple(pts))


def _summary_metrics(b: dict[str, Any], where: str) -> dict[str, float]:
    out: dict[str, float] = {}
    ttft = _summary(b, "time_to_first_token_ms", where)
    for key, stat in (("mean_ttft_ms", "mean"), ("median_ttft_ms", "median"), ("p90_ttft_ms", "p90"),
                      ("p99_ttft_ms", "p99")):
        out[key] = _stat(ttft, stat, "metrics.time_to_first_token_ms.successful", where)
    itl = _summary(b, "inter_token_latency_ms", where)
    for key, stat in (("mean_tpot_ms", "mean"), ("median_tpot_ms", "median"), ("p99_tpot_ms", "p99"),
                      ("mean_itl_ms", "mean")):
        out[key] = _stat(itl, stat, "metrics.inter_token_latency_ms.successful", where)
    lat = _summary(b, "request_latency", where)
    for key, stat in (("mean_e2el_ms", "mean"), ("median_e2el_ms", "median"), ("p99_e2el_ms", "p99")):
        out[key] = 1e3 * _stat(lat, stat, "metrics.request_latency.successful", where)
    out["request_throughput"] = _stat(_summary(b, "requests_per_second", where), "mean",
                                      "metrics.requests_per_second.successful", where)
    out["output_throughput"] = _stat(_summary(b, "output_tokens_per_second", where), "mean",
                                     "metrics.output_tokens_per_second.successful", where)
    return out


def _data_args(doc: dict[str, Any]) -> dict[str, Any]:
    """The synthetic data arguments of the report (``args.data``: objects, JSON or ``k=v,k=v`` strings)."""
    data = get(doc, "args.data", "", required=False)
    out: dict[str, Any] = {}
    for item in data if isinstance(data, list) else [data]:
        if isinstance(item, str):
            text = item.strip()
            try:
                item = parse_json(text, "args.data") if text.startswith("{") else \
                    dict(kv.split("=", 1) for kv in text.split(",") if "=" in kv)
            except ValueError:      # TwinInputError is one: a data string that is not JSON says nothing
                continue
        if isinstance(item, dict):
            out.update(item)
    return out


def _prompt_pool(doc: dict[str, Any], n: int, where: str) -> PromptPool | None:
    data = _data_args(doc)
    tokens, count = data.get("prefix_tokens"), data.get("prefix_count", 1)
    buckets = data.get("prefix_buckets")
    if isinstance(buckets, list) and len(buckets) == 1 and isinstance(buckets[0], dict):
        tokens, count = buckets[0].get("prefix_tokens"), buckets[0].get("prefix_count", 1)
    if tokens is None:
        return None
    tokens = whole(tokens, "args.data.prefix_tokens", where)
    count = whole(count, "args.data.prefix_count", where, low=1)
    return PromptPool(count, math.ceil(n / count), tokens) if tokens else None


def read_benchmark(doc: dict[str, Any], k: int, stem: str, where: str) -> MeasuredRun:
    b = doc["benchmarks"][k]
    where = f"{where}, benchmarks[{k}]"
    if not isinstance(b, dict):
        raise TwinInputError(f"{where}: must be an object")
    label, load = _load(_first(b, "config.strategy", "scheduler.strategy", "args.strategy"), where)
    totals = _first(b, "metrics.request_totals", "request_totals")
    if not isinstance(totals, dict):
        raise TwinInputError(f"{where}: missing field metrics.request_totals")
    completed = whole(get(totals, "successful", where), "request_totals.successful", where)
    errored = whole(totals.get("errored", 0), "request_totals.errored", where)
    incomplete = whole(totals.get("incomplete", 0), "request_totals.incomplete", where)
    if completed < 1:
        raise TwinInputError(f"{where}: request_totals.successful = 0: no request completed")
    times, listed = _requests(b, where)
    if times is not None and listed == completed:
        metrics = measured_metrics(times)
        ok = times.ok
        prompt = LengthSample(values=tuple(int(v) for v in times.prompt_tokens[ok]))
        output = LengthSample(values=tuple(int(v) for v in times.output_tokens[ok]))
    else:
        metrics = _summary_metrics(b, where)
        metrics.update({"completed": float(completed), "failed": float(errored)})
        if times is not None:      # a sample of the requests: their lengths still are the distribution
            ok = times.ok
            prompt = LengthSample(values=tuple(int(v) for v in times.prompt_tokens[ok]))
            output = LengthSample(values=tuple(int(v) for v in times.output_tokens[ok]))
        else:
            prompt = _quantiles(b, "prompt_token_count", where)
            output = _quantiles(b, "output_token_count", where)
    duration = b.get("duration")
    if duration is None and isinstance(b.get("run_stats"), dict):
        rs = b["run_stats"]
        duration = number(get(rs, "end_time", where), "run_stats.end_time", where) - \
            number(get(rs, "start_time", where), "run_stats.start_time", where)
    n = completed + errored + incomplete
    model = _first(doc, "args.model") or _first(b, "config.backend.model", "benchmarker.backend.model",
                                                "worker.backend_model")
    return MeasuredRun(name=f"{stem}/{k}:{label}", source="guidellm", num_requests=n, prompt_tokens=prompt,
                       output_tokens=output, metrics=metrics,
                       duration_s=None if duration is None else number(duration, "duration", where),
                       prompt_pool=_prompt_pool(doc, n, where), model=model if isinstance(model, str) else None,
                       experiment=stem, client="guidellm",
                       requests=times if times is not None and listed == completed else None, **load)


def read_guidellm(path: Path) -> list[MeasuredRun]:
    doc = load_json(path)
    where = str(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise TwinInputError(f"{where}: missing field benchmarks (a list)")
    if not doc["benchmarks"]:
        raise TwinInputError(f"{where}: benchmarks is empty: the report holds no run")
    return [read_benchmark(doc, k, path.stem, where) for k in range(len(doc["benchmarks"]))]
