"""Metrics exactly as `vllm bench serve` defines them, plus the twin's server-side keys.

Definitions (per finished request, seconds internally, reported in ms):

* TTFT = first_token_s - arrival_s.
* TPOT = (E2EL - TTFT) / (output tokens - 1); requests with one output token are left out of the TPOT
  statistics (for goodput their TPOT counts as 0, as in vLLM).
* ITL: every gap between consecutive output tokens. A step that emits k tokens gives one gap followed by
  k - 1 zeros (a first emission of k tokens gives k - 1 zeros), so a request contributes
  output tokens - 1 values.
* E2EL = finish_s - arrival_s.
* Each as ``mean_/median_/std_/p50_/p90_/p95_/p99_<m>_ms``: numpy mean, median, population std and
  ``np.percentile`` (linear interpolation). Undefined statistics (no values) are ``None``, never NaN.
* ``duration``: first arrival to last completion over the requests measured (a rejected request ends at its
  arrival). Throughputs are over it; ``None`` when it is zero or there is nothing to measure.
* ``max_output_tokens_per_s`` / ``max_concurrent_requests``: vLLM's per-second buckets from the first
  arrival of a completed request: the most output tokens stamped in one bucket, and the most completed
  requests active (arrival second to completion second, inclusive) in one bucket.
* ``request_goodput``: requests per second whose TTFT, TPOT and E2EL are each <= the SLO (vLLM semantics).
* Speculative decoding (vLLM bench serve keys): ``spec_decode_acceptance_rate`` is a percentage,
  100 * accepted / draft tokens, as `vllm bench serve` writes it; ``spec_decode_acceptance_length`` =
  1 + accepted / drafts; per-position rates are fractions, accepted at position i / drafts.

The twin's own keys (``TWIN_KEYS``): ``num_requests`` (in the window), ``num_rejected`` (= failed),
``num_incomplete`` (in flight when the run stopped), ``num_good_requests``, ``slo_met`` (per statistic bound,
e.g. ``{"p99_ttft_ms": True}``; ``None`` where the statistic is undefined) and ``slo_all_met``,
``prefix_cache_hit_rate`` (hit tokens / queried prompt tokens, 0..1), ``num_preemptions``,
``max_in_flight_requests`` (the exact peak of requests between arrival and completion, unlike vLLM's
bucketed ``max_concurrent_requests``), and from the step records: ``num_steps``, ``busy_fraction`` (step time
/ (duration x replicas)), ``mean_running_batch`` (running requests, weighted by step time, while busy),
``mean_queue_length`` (waiting requests summed over replicas, time-averaged over the duration, idle time
counting as empty), ``mean_batched_tokens`` (per step), ``mean_kv_usage`` (step-time weighted),
``p99_kv_usage`` and ``max_kv_usage`` (over steps), ``num_replicas``, ``window``.

Steady-state window: ``window=(t0, t1)`` keeps the requests that *arrived* in ``[t0, t1)`` (either end may be
``None``); the duration, throughputs and step-based keys then cover those requests' first arrival to last
completion. Step-based keys weight each step by its overlap with that span.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from twin.errors import TwinInputError
from twin.results.records import FINISHED, REJECTED, RequestRecord, StepRecords

LATENCY_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")
PERCENTILES: tuple[float, ...] = (50, 90, 95, 99)


def percentile_word(p: float) -> str:
    """vLLM's spelling of a percentile in a key: 99 -> '99', 99.9 -> '99.9'."""
    return str(int(p)) if int(p) == p else str(p)


def latency_keys(metric: str, percentiles: Sequence[float] = PERCENTILES) -> list[str]:
    keys = [f"mean_{metric}_ms", f"median_{metric}_ms", f"std_{metric}_ms"]
    keys += [f"p{percentile_word(p)}_{metric}_ms" for p in percentiles]
    return keys


BENCH_SERVE_SCALAR_KEYS: tuple[str, ...] = (
    "duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
    "request_goodput", "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
    "max_concurrent_requests",
    *(k for m in LATENCY_METRICS for k in latency_keys(m)),
)
SPEC_DECODE_KEYS: tuple[str, ...] = (
    "spec_decode_acceptance_rate", "spec_decode_acceptance_length", "spec_decode_num_drafts",
    "spec_decode_draft_tokens", "spec_decode_accepted_tokens", "spec_decode_per_position_acceptance_rates",
)
BENCH_SERVE_PER_REQUEST_KEYS: tuple[str, ...] = (
    "input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times",
)
TWIN_KEYS: tuple[str, ...] = (
    "num_requests", "num_rejected", "num_incomplete", "num_good_requests", "slo_met", "slo_all_met",
    "prefix_cache_hit_rate", "prefix_cache_hit_tokens", "prefix_cache_query_tokens", "num_preemptions",
    "max_in_flight_requests", "num_steps", "busy_fraction", "mean_running_batch", "mean_queue_length", "mean_batched_tokens",
    "mean_kv_usage", "p99_kv_usage", "max_kv_usage", "num_replicas", "window",
)


# --------------------------------------------------------------------------------------------------------
# statistics
# --------------------------------------------------------------------------------------------------------
def describe(values_s: np.ndarray, metric: str, percentiles: Sequence[float] = PERCENTILES) -> dict:
    """mean/median/std/percentiles of ``values_s`` (seconds) in ms under vLLM's key names.

    Computed in seconds and scaled by 1000 afterwards, as vLLM does; ``None`` for an empty sample."""
    keys = latency_keys(metric, percentiles)
    if values_s.size == 0:
        return dict.fromkeys(keys)
    out = {
        f"mean_{metric}_ms": float(np.mean(values_s)) * 1000,
        f"median_{metric}_ms": float(np.median(values_s)) * 1000,
        f"std_{metric}_ms": float(np.std(values_s)) * 1000,
    }
    if percentiles:
        pct = np.percentile(values_s, list(percentiles))
        for p, v in zip(percentiles, pct):
            out[f"p{percentile_word(p)}_{metric}_ms"] = float(v) * 1000
    return out


# --------------------------------------------------------------------------------------------------------
# SLOs
# --------------------------------------------------------------------------------------------------------
_SLO_METRICS = {"ttft": "ttft", "ttft_ms": "ttft", "tpot": "tpot", "tpot_ms": "tpot", "e2el": "e2el",
                "e2el_ms": "e2el", "itl": "itl", "itl_ms": "itl"}
_PER_REQUEST = ("ttft", "tpot", "e2el")


@dataclass(frozen=True)
class SLO:
    """Parsed SLO: per-request thresholds (ms, for goodput) and statistic bounds (ms, for ``slo_met``)."""

    per_request_ms: dict[str, float]
    bounds_ms: dict[str, dict[str, float]]  # metric -> {"p99": 1000.0, "mean": ..., "median": ...}

    @property
    def percentiles(self) -> list[float]:
        out = []
        for stats in self.bounds_ms.values():
            out += [float(s[1:]) for s in stats if s.startswith("p")]
        return out

    def __bool__(self) -> bool:
        return bool(self.per_request_ms or self.bounds_ms)


def _slo_number(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise TwinInputError(f"slo.{field}: {value!r} is not allowed; give a non-negative number of milliseconds")
    return float(value)


def parse_slo(slo: Any) -> SLO:
    """Accept ``{"ttft_ms": 500, "tpot_ms": 50, "e2el_ms": 10000}`` (per-request thresholds, vLLM goodput),
    ``{"ttft_ms": {"p99": 1000}, "tpot_ms": {"mean": 40}}`` (bounds on a statistic), a mix of both, vLLM's
    names without ``_ms``, or vLLM's CLI form ``["ttft:500", "tpot:50"]`` / ``"ttft:500 tpot:50"``.

    For goodput a request is good when each per-request value is <= its threshold; a metric given only as
    statistic bounds uses its loosest bound as the per-request threshold (for one p99 bound, that bound).
    ITL has no per-request value, so it takes statistic bounds only."""
    if slo is None:
        return SLO({}, {})
    if isinstance(slo, SLO):
        return slo
    if isinstance(slo, str):
        slo = slo.split()
    if isinstance(slo, (list, tuple)):
        parsed: dict[str, Any] = {}
        for item in slo:
            name, sep, value = str(item).partition(":")
            try:
                if not sep:
                    raise ValueError
                parsed[name.strip()] = float(value)
            except ValueError:
                raise TwinInputError(f"slo: {item!r} is not KEY:VALUE; use e.g. 'ttft:500' (milliseconds)") from None
        slo = parsed
    if not isinstance(slo, Mapping):
        raise TwinInputError(f"slo: {slo!r} is not allowed; give a mapping like {{ttft_ms: 500, tpot_ms: {{p99: 50}}}}")
    per_request: dict[str, float] = {}
    bounds: dict[str, dict[str, float]] = {}
    allowed = ", ".join(sorted(_SLO_METRICS))
    for key, value in slo.items():
        metric = _SLO_METRICS.get(str(key))
        if metric is None:
            raise TwinInputError(f"slo.{key}: unknown SLO metric; allowed: {allowed}")
        if isinstance(value, Mapping):
            stats: dict[str, float] = {}
            for stat, bound in value.items():
                stat = str(stat)
                if stat in ("mean", "median"):
                    name = stat
                elif stat in ("p50",):
                    name = "p50"
                elif stat.startswith("p"):
                    try:
                        p = float(stat[1:])
                    except ValueError:
                        p = -1.0
                    if not 0 <= p <= 100:
                        raise TwinInputError(f"slo.{key}.{stat}: unknown statistic; allowed: mean, median, "
                                             f"p<0..100> (e.g. p99, p99.9)")
                    name = "p" + percentile_word(p)
                else:
                    raise TwinInputError(f"slo.{key}.{stat}: unknown statistic; allowed: mean, median, "
                                         f"p<0..100> (e.g. p99, p99.9)")
                stats[name] = _slo_number(f"{key}.{stat}", bound)
            if not stats:
                raise TwinInputError(f"slo.{key}: empty; give e.g. {{p99: 1000}}")
            bounds.setdefault(metric, {}).update(stats)
        else:
            if metric == "itl":
                raise TwinInputError(f"slo.{key}: ITL has no per-request value; give a statistic bound such as "
                                     f"{{p99: 50}}")
            per_request[metric] = _slo_number(str(key), value)
    for metric, stats in bounds.items():
        if metric in _PER_REQUEST and metric not in per_request:
            per_request[metric] = max(stats.values())
    return SLO(per_request, bounds)


# --------------------------------------------------------------------------------------------------------
# collecting the records
# --------------------------------------------------------------------------------------------------------
def _as_array(values: Any, code: str) -> array:
    if isinstance(values, array) and values.typecode == code:
        return values
    return array(code, values)


def filter_window(records: Iterable[RequestRecord], window: tuple[float | None, float | None] | None
                  ) -> list[RequestRecord]:
    """Requests that arrived in ``[t0, t1)``; ``None`` (or a ``None`` end) leaves that side open."""
    records = list(records)
    if window is None:
        return records
    try:
        t0, t1 = window
    except (TypeError, ValueError):
        raise TwinInputError(f"window: {window!r} is not allowed; give (t0, t1) in seconds, either may be None") from None
    for name, t in (("start", t0), ("end", t1)):
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or math.isnan(t)):
            raise TwinInputError(f"window {name}: {t!r} is not a number of seconds")
    if t0 is not None and t1 is not None and not t0 < t1:
        raise TwinInputError(f"window: start {t0} must be before end {t1}")
    lo = -math.inf if t0 is None else t0
    hi = math.inf if t1 is None else t1
    return [r for r in records if lo <= r.arrival_s < hi]


class RequestSample:
    """Numpy view of a set of request records: the arrays every metric and output is computed from.

    ``fin_*`` arrays are over finished requests (in record order); ``token_times`` holds every output
    token's emission time of the finished requests, request after request, and ``itl_flat`` their gaps."""

    def __init__(self, records: Sequence[RequestRecord]) -> None:
        self.records = list(records)
        recs = self.records
        n = len(recs)
        status = [r.status for r in recs]
        self.finished_mask = np.fromiter((s == FINISHED for s in status), bool, n)
        self.rejected_mask = np.fromiter((s == REJECTED for s in status), bool, n)
        self.arrival = np.fromiter((r.arrival_s for r in recs), float, n)
        fin = [r for r, s in zip(recs, status) if s == FINISHED]
        self.finished = fin
        for r in fin:
            if r.first_token_s is None or r.finish_s is None:
                raise TwinInputError(f"request {r.request_id!r}: status 'finished' needs first_token_s and "
                                     f"finish_s, got {r.first_token_s!r} and {r.finish_s!r}")
        m = len(fin)
        self.fin_arrival = np.fromiter((r.arrival_s for r in fin), float, m)
        self.fin_first = np.fromiter((r.first_token_s for r in fin), float, m)
        self.fin_finish = np.fromiter((r.finish_s for r in fin), float, m)
        self.fin_prompt = np.fromiter((r.num_prompt_tokens for r in fin), np.int64, m)
        self.fin_output = np.fromiter((r.num_output_tokens for r in fin), np.int64, m)
        self.ttft = self.fin_first - self.fin_arrival
        self.e2el = self.fin_finish - self.fin_arrival
        multi = self.fin_output > 1
        self.tpot_all = np.zeros(m)  # 0 for one-token outputs, as vLLM's goodput does
        self.tpot_all[multi] = (self.e2el[multi] - self.ttft[multi]) / (self.fin_output[multi] - 1)
        self.tpot = self.tpot_all[multi]
        self._token_times(fin)

    def _token_times(self, fin: list[RequestRecord]) -> None:
        m = len(fin)
        emits = [_as_array(r.emit_times_s, "d") for r in fin]
        n_emit = np.fromiter((len(e) for e in emits), np.int64, m)
        times = np.frombuffer(b"".join(emits), dtype=np.float64) if m else np.empty(0)
        if all(r.emit_counts is None for r in fin):
            token_times = times
            tokens = n_emit
        else:
            one = array("i", [1])
            parts = []
            for r, e in zip(fin, emits):
                c = r.emit_counts
                if c is None:
                    parts.append(one * len(e))
                else:
                    if len(c) != len(e):
                        raise TwinInputError(f"request {r.request_id!r}: {len(c)} emit_counts for "
                                             f"{len(e)} emit_times_s")
                    parts.append(_as_array(c, "i"))
            counts = np.frombuffer(b"".join(parts), dtype=np.intc).astype(np.int64)
            if counts.size and counts.min() < 0:
                raise TwinInputError("emit_counts: negative token counts are not allowed")
            token_times = np.repeat(times, counts)
            ends = np.cumsum(n_emit)
            cs = np.concatenate(([0], np.cumsum(counts)))
            tokens = cs[ends] - cs[ends - n_emit]
        self.token_times = token_times
        self.tokens_per_request = tokens
        gaps = np.diff(token_times) if token_times.size else np.empty(0)
        if m > 1 and gaps.size:
            bound = np.cumsum(tokens)[:-1] - 1  # gap index between one request's last token and the next's first
            bound = bound[(bound >= 0) & (bound < gaps.size)]
            keep = np.ones(gaps.size, bool)
            keep[bound] = False
            gaps = gaps[keep]
        self.itl_flat = gaps
        self.itl_lens = np.maximum(tokens - 1, 0)

    def itl_lists(self) -> list[list[float]]:
        """Per finished request, its ITL values in seconds (vLLM's ``itls``)."""
        if not self.finished:
            return []
        return [a.tolist() for a in np.split(self.itl_flat, np.cumsum(self.itl_lens)[:-1])]


# --------------------------------------------------------------------------------------------------------
# peak buckets, as vLLM computes them
# --------------------------------------------------------------------------------------------------------
def peak_buckets(sample: RequestSample) -> tuple[float, int]:
    """(max_output_tokens_per_s, max_concurrent_requests) from vLLM's one-second buckets. Only occupied
    buckets are materialised, so memory follows the number of tokens and requests, not the run's length."""
    if not sample.finished:
        return 0.0, 0
    start = float(sample.fin_arrival.min())
    end_times = sample.fin_arrival + sample.e2el
    last = int(np.floor(float(end_times.max()) - start))
    tb = np.floor(sample.token_times - start).astype(np.int64)
    tb = tb[(tb >= 0) & (tb <= last)]
    max_tokens = int(np.unique(tb, return_counts=True)[1].max()) if tb.size else 0
    # a request counts in every bucket from its arrival's to its completion's: the running count of
    # (+1 at the start bucket, -1 after the end bucket) peaks at one of the start buckets
    s = np.floor(sample.fin_arrival - start).astype(np.int64)
    e = np.floor(end_times - start).astype(np.int64) + 1
    points = np.concatenate((s, e))
    delta = np.concatenate((np.ones(s.size, np.int64), -np.ones(e.size, np.int64)))
    order = np.lexsort((delta, points))  # in one bucket, ends (-1) before starts (+1)
    return float(max_tokens), int(np.cumsum(delta[order]).max())


def max_in_flight(sample: RequestSample) -> int:
    """Exact peak number of completed requests between arrival and completion (intervals [arrival, finish))."""
    if not sample.finished:
        return 0
    times = np.concatenate((sample.fin_arrival, sample.fin_finish))
    delta = np.concatenate((np.ones(len(sample.finished), np.int64), -np.ones(len(sample.finished), np.int64)))
    order = np.lexsort((delta, times))  # at equal times, completions (-1) before arrivals (+1)
    return int(np.cumsum(delta[order]).max())


# --------------------------------------------------------------------------------------------------------
# step-based keys
# --------------------------------------------------------------------------------------------------------
def step_metrics(steps: StepRecords | None, span: tuple[float, float] | None, num_replicas: int | None) -> dict:
    keys = ("num_steps", "busy_fraction", "mean_running_batch", "mean_queue_length", "mean_batched_tokens",
            "mean_kv_usage", "p99_kv_usage", "max_kv_usage")
    out: dict[str, Any] = dict.fromkeys(keys)
    out["num_steps"] = 0
    if num_replicas is None:
        num_replicas = int(steps.column("replica").max()) + 1 if steps is not None and len(steps) else 1
    out["num_replicas"] = num_replicas
    if steps is None or len(steps) == 0 or span is None:
        return out
    t0, t1 = span
    start = steps.column("start_s")
    dur = steps.column("duration_s")
    overlap = np.minimum(start + dur, t1) - np.maximum(start, t0)
    inside = (overlap > 0) | ((dur == 0) & (start >= t0) & (start <= t1))
    if not inside.any():
        return out
    w = np.clip(overlap[inside], 0.0, None)
    out["num_steps"] = int(inside.sum())
    kv = steps.column("kv_usage")[inside]
    running = steps.column("num_running")[inside]
    waiting = steps.column("num_waiting")[inside]
    tokens = steps.column("num_new_tokens")[inside]
    busy = float(w.sum())
    span_s = t1 - t0
    if span_s > 0:
        out["busy_fraction"] = busy / (span_s * num_replicas)
        out["mean_queue_length"] = float(np.dot(waiting, w)) / span_s
    if busy > 0:
        out["mean_running_batch"] = float(np.dot(running, w)) / busy
        out["mean_kv_usage"] = float(np.dot(kv, w)) / busy
    else:
        out["mean_running_batch"] = float(running.mean())
        out["mean_kv_usage"] = float(kv.mean())
    out["mean_batched_tokens"] = float(tokens.mean())
    draft = steps.column("draft_s")[inside]
    if draft.any():
        # a step's drafting time, prorated like its duration when the step straddles the window's edge
        draft_in_span = float(np.dot(draft, w / np.where(dur[inside] > 0, dur[inside], 1.0)))
        out["spec_decode_draft_time_s"] = draft_in_span
        out["spec_decode_draft_time_fraction"] = draft_in_span / busy if busy > 0 else None
    out["p99_kv_usage"] = float(np.percentile(kv, 99))
    out["max_kv_usage"] = float(kv.max())
    return out


# --------------------------------------------------------------------------------------------------------
# the metrics
# --------------------------------------------------------------------------------------------------------
def _stat_key(metric: str, stat: str) -> str:
    return f"{stat}_{metric}_ms"


def compute_metrics(
    records: Iterable[RequestRecord],
    steps: StepRecords | None = None,
    *,
    slo: Any = None,
    window: tuple[float | None, float | None] | None = None,
    num_replicas: int | None = None,
    prefix_cache_hit_tokens: int | None = None,
    prefix_cache_query_tokens: int | None = None,
    num_preemptions: int | None = None,
    percentiles: Sequence[float] = PERCENTILES,
) -> dict:
    """One flat dict: every `vllm bench serve` scalar key (``BENCH_SERVE_SCALAR_KEYS``, plus
    ``SPEC_DECODE_KEYS`` when any request drafted) and the twin's own keys (``TWIN_KEYS``).

    The counters, when given, replace the values derived from the records (pass them only for an unwindowed
    measurement). Values are plain Python numbers or ``None`` where undefined; never NaN."""
    recs = filter_window(records, window)
    slo_spec = parse_slo(slo)
    pcts = list(dict.fromkeys([*percentiles, *slo_spec.percentiles]))
    sample = RequestSample(recs)

    completed = len(sample.finished)
    failed = int(sample.rejected_mask.sum())
    counted = sample.finished_mask | sample.rejected_mask
    total_input = int(sample.fin_prompt.sum())
    total_output = int(sample.fin_output.sum())

    duration: float | None = None
    span: tuple[float, float] | None = None
    if counted.any():
        t0 = float(sample.arrival[counted].min())
        ends = [float(sample.fin_finish.max())] if completed else []
        if failed:
            ends.append(float(sample.arrival[sample.rejected_mask].max()))
        t1 = max(ends)
        span = (t0, t1)
        duration = t1 - t0

    def per_s(x: float) -> float | None:
        return x / duration if duration else None

    out: dict[str, Any] = {
        "duration": duration,
        "completed": completed,
        "failed": failed,
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": per_s(completed),
        "request_goodput": None,
        "output_throughput": per_s(total_output),
        "total_token_throughput": per_s(total_input + total_output),
    }
    max_tok, max_conc = peak_buckets(sample)
    out["max_output_tokens_per_s"] = max_tok
    out["max_concurrent_requests"] = max_conc
    values = {"ttft": sample.ttft, "tpot": sample.tpot, "itl": sample.itl_flat, "e2el": sample.e2el}
    for metric in LATENCY_METRICS:
        out.update(describe(values[metric], metric, pcts))

    # goodput (vLLM: value <= SLO, compared in seconds; one-token outputs have TPOT 0)
    num_good = None
    if slo_spec.per_request_ms:
        per_req = {"ttft": sample.ttft, "tpot": sample.tpot_all, "e2el": sample.e2el}
        good = np.ones(completed, bool)
        for metric, ms in slo_spec.per_request_ms.items():
            good &= per_req[metric] <= ms / 1000
        num_good = int(good.sum())
        out["request_goodput"] = per_s(num_good)
    slo_met: dict[str, bool | None] = {}
    for metric, stats in slo_spec.bounds_ms.items():
        for stat, bound in stats.items():
            key = _stat_key(metric, stat)
            value = out.get(key)
            slo_met[key] = None if value is None else bool(value <= bound)
    if slo_spec.per_request_ms and not slo_spec.bounds_ms:
        slo_all_met = None
    elif not slo_met:
        slo_all_met = None
    elif any(v is False for v in slo_met.values()):
        slo_all_met = False
    elif any(v is None for v in slo_met.values()):
        slo_all_met = None
    else:
        slo_all_met = True

    out.update(_spec_decode(sample.records))

    # the twin's own keys
    served = [r for r in recs if r.status != REJECTED]
    if prefix_cache_hit_tokens is None or prefix_cache_query_tokens is None:
        hits = sum(max(r.num_cached_tokens, 0) for r in served)
        queries = sum(r.num_prompt_tokens for r in served if r.num_cached_tokens >= 0)
    else:
        hits, queries = int(prefix_cache_hit_tokens), int(prefix_cache_query_tokens)
    out.update({
        "num_requests": len(recs),
        "num_rejected": failed,
        "num_incomplete": len(recs) - completed - failed,
        "num_good_requests": num_good,
        "slo_met": slo_met,
        "slo_all_met": slo_all_met,
        "prefix_cache_hit_rate": hits / queries if queries else None,
        "prefix_cache_hit_tokens": hits,
        "prefix_cache_query_tokens": queries,
        "num_preemptions": int(num_preemptions) if num_preemptions is not None
        else sum(r.num_preemptions for r in recs),
        "max_in_flight_requests": max_in_flight(sample),
    })
    out.update(step_metrics(steps, span, num_replicas))
    out["window"] = None if window is None else [window[0], window[1]]
    return out


def _spec_decode(records: Sequence[RequestRecord]) -> dict:
    drafts = draft_tokens = accepted = 0
    per_pos: list[int] = []
    for r in records:
        if r.status == REJECTED or not (r.num_spec_drafts or r.num_spec_draft_tokens):
            continue
        drafts += r.num_spec_drafts
        draft_tokens += r.num_spec_draft_tokens
        accepted += r.num_spec_accepted_tokens
        pos = r.spec_accepted_per_position
        if pos is not None:
            if len(pos) > len(per_pos):
                per_pos.extend([0] * (len(pos) - len(per_pos)))
            for i, v in enumerate(pos):
                per_pos[i] += v
    if not (drafts or draft_tokens):
        return {}
    return {
        "spec_decode_acceptance_rate": accepted / draft_tokens * 100 if draft_tokens else None,
        "spec_decode_acceptance_length": 1 + accepted / drafts if drafts else None,
        "spec_decode_num_drafts": drafts,
        "spec_decode_draft_tokens": draft_tokens,
        "spec_decode_accepted_tokens": accepted,
        "spec_decode_per_position_acceptance_rates": [v / drafts for v in per_pos] if drafts else [],
    }


def per_request_arrays(records: Iterable[RequestRecord], window: tuple[float | None, float | None] | None = None
                       ) -> dict[str, list]:
    """`vllm bench serve`'s per-request lists (seconds) over the completed and failed requests in record
    order: failed ones read as vLLM writes them (0 output tokens, TTFT and latency 0.0, no ITLs), and
    ``errors`` carries their reject reason ('' for completed ones)."""
    recs = [r for r in filter_window(records, window) if r.status in (FINISHED, REJECTED)]
    sample = RequestSample(recs)
    itls = iter(sample.itl_lists())
    ttft = iter(sample.ttft.tolist())
    e2el = iter(sample.e2el.tolist())
    out: dict[str, list] = {k: [] for k in (*BENCH_SERVE_PER_REQUEST_KEYS, "errors")}
    for r in recs:
        out["input_lens"].append(int(r.num_prompt_tokens))
        out["start_times"].append(float(r.arrival_s))
        if r.status == FINISHED:
            out["output_lens"].append(int(r.num_output_tokens))
            out["ttfts"].append(next(ttft))
            out["itls"].append(next(itls))
            out["latencies"].append(next(e2el))
            out["errors"].append("")
        else:
            out["output_lens"].append(0)
            out["ttfts"].append(0.0)
            out["itls"].append([])
            out["latencies"].append(0.0)
            out["errors"].append(r.reject_reason or "rejected")
    return out


# --------------------------------------------------------------------------------------------------------
# replications
# --------------------------------------------------------------------------------------------------------
def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def replicate_summary(runs: Sequence[Mapping[str, Any]], confidence: float = 0.95) -> dict[str, dict]:
    """Per numeric key over replications: ``mean``, ``half_width`` (Student t, ``confidence`` two-sided),
    ``low``/``high``, sample ``std`` (ddof=1) and ``n`` (replications where the key was defined). Keys whose
    values are not numbers (lists, dicts, strings) are skipped; ``None`` values are left out of ``n``;
    with fewer than two values the half-width and std are ``None``."""
    from scipy import stats

    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
        raise TwinInputError(f"confidence: {confidence!r} is not allowed; give a number in (0, 1), e.g. 0.95")
    runs = list(runs)
    keys: list[str] = []
    for run in runs:
        for k, v in run.items():
            if k not in keys and _is_number(v):
                keys.append(k)
    out: dict[str, dict] = {}
    for k in keys:
        vals = [run.get(k) for run in runs]
        if any(v is not None and not _is_number(v) for v in vals):
            continue
        xs = np.array([float(v) for v in vals if v is not None and math.isfinite(float(v))])
        n = int(xs.size)
        mean = float(xs.mean()) if n else None
        if n >= 2:
            sd = float(xs.std(ddof=1))
            half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
        else:
            sd = half = None
        out[k] = {"mean": mean, "half_width": half, "low": None if half is None else mean - half,
                  "high": None if half is None else mean + half, "std": sd, "n": n}
    return out
