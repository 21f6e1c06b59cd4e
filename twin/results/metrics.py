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
* ``max_output_tokens_per_s``: vLLM's per-second buckets from the first arrival of a completed request: the
  most output tokens stamped in one bucket.
* Records kept with ``records: {token_times: summary}`` (``twin.results.token_summary``) take the ITL keys
  and ``max_output_tokens_per_s`` from the run's summary (percentiles within 0.05 %), or ``None`` where it
  cannot answer (a window, requests cut mid-stream, a subset of the run's records).
* ``max_concurrent_requests``: the exact peak number of completed requests in flight at once, each from its
  arrival to its finish. (vLLM's bench counts every request active at any moment of a one-second bucket, which
  over-counts whenever requests turn over within a second: 600 for 440 closed-loop users; the twin reports
  the true peak, which a closed loop never takes above its users.)
* ``request_goodput``: requests per second whose TTFT, TPOT and E2EL are each <= the SLO (vLLM semantics).
* Speculative decoding (vLLM bench serve keys): ``spec_decode_acceptance_rate`` is a percentage,
  100 * accepted / draft tokens, as `vllm bench serve` writes it; ``spec_decode_acceptance_length`` =
  1 + accepted / drafts; per-position rates are fractions, accepted at position i / drafts.

The twin's own keys (``TWIN_KEYS``): ``num_requests`` (in the window), ``num_rejected`` and ``num_aborted``
(client timeouts; together = failed),
``num_incomplete`` (in flight when the run stopped), ``num_good_requests``, ``slo_met`` (per statistic bound,
e.g. ``{"p99_ttft_ms": True}``; ``None`` where the statistic is undefined) and ``slo_all_met``,
``prefix_cache_hit_rate`` (hit tokens / queried prompt tokens, 0..1), ``num_preemptions``,
``max_in_flight_requests`` (= ``max_concurrent_requests``, kept for existing readers), and from the step records: ``num_steps``, ``busy_fraction`` (step time
/ (duration x replicas)), ``mean_running_batch`` (running requests, weighted by step time, while busy),
``mean_queue_length`` (waiting requests summed over replicas, time-averaged over the duration, idle time
counting as empty), ``mean_batched_tokens`` (per step), ``mean_kv_usage`` (step-time weighted),
``p99_kv_usage`` and ``max_kv_usage`` (over steps), ``num_replicas``, ``window``.

Steady-state window: ``window=(t0, t1)`` keeps the requests that *arrived* in ``[t0, t1)`` (either end may be
``None``); the duration, throughputs and step-based keys then cover those requests' first arrival to last
completion. Step-based keys weight each step by its overlap with that span.

This module computes the flat dict (``compute_metrics``); the key names are in ``twin.results.metric_keys``,
SLO parsing in ``twin.results.slo``, the record arrays in ``twin.results.request_sample``, the step-based keys in
``twin.results.step_metrics``, the per-request lists in ``twin.results.per_request`` and summaries over
replications in ``twin.results.replications``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from twin.results.metric_keys import LATENCY_METRICS, PERCENTILES, latency_keys, percentile_word
from twin.results.records import ABORTED, FINISHED, REJECTED, RequestRecord, StepRecords
from twin.results.request_sample import RequestSample, filter_window
from twin.results.slo import parse_slo
from twin.results.step_metrics import step_metrics
from twin.results.token_summary import summary_covers


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
# peaks
# --------------------------------------------------------------------------------------------------------
def max_output_tokens_per_s(sample: RequestSample) -> float:
    """The most output tokens stamped in one of vLLM's one-second buckets (from the first arrival of a
    completed request). Only occupied buckets are materialised, so memory follows the number of tokens."""
    if not sample.finished:
        return 0.0
    start = float(sample.fin_arrival.min())
    last = int(np.floor(float((sample.fin_arrival + sample.e2el).max()) - start))
    tb = np.floor(sample.token_times - start).astype(np.int64)
    tb = tb[(tb >= 0) & (tb <= last)]
    return float(np.unique(tb, return_counts=True)[1].max()) if tb.size else 0.0


def max_in_flight(sample: RequestSample) -> int:
    """Exact peak number of completed requests between arrival and completion (intervals [arrival, finish))."""
    if not sample.finished:
        return 0
    # the count peaks just after an arrival: the i-th arrival (from 0, in time order) finds i + 1 arrived and
    # every request finished at or before its time gone (at equal times completions come first)
    arrivals = np.sort(sample.fin_arrival)
    num_gone = np.searchsorted(np.sort(sample.fin_finish), arrivals, side="right")
    return int((np.arange(1, arrivals.size + 1) - num_gone).max())


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
    failed = int(sample.failed_mask.sum())
    num_aborted = int(sample.aborted_mask.sum())
    counted = sample.finished_mask | sample.failed_mask
    total_input = int(sample.fin_prompt.sum())
    total_output = int(sample.fin_output.sum())

    duration: float | None = None
    span: tuple[float, float] | None = None
    if counted.any():
        t0 = float(sample.arrival[counted].min())
        ends = [float(sample.fin_finish.max())] if completed else []
        if failed - num_aborted:
            ends.append(float(sample.arrival[sample.rejected_mask].max()))
        if num_aborted:  # the client waited until it gave up
            ends.append(max(r.finish_s for r in recs if r.status == ABORTED))
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
    peak_in_flight = max_in_flight(sample)
    out["max_concurrent_requests"] = peak_in_flight
    values = {"ttft": sample.ttft, "tpot": sample.tpot, "itl": sample.itl_flat, "e2el": sample.e2el}
    for metric in LATENCY_METRICS:
        if metric != "itl" or sample.keeps_token_times:
            out.update(describe(values[metric], metric, pcts))
    if sample.keeps_token_times:
        out["max_output_tokens_per_s"] = max_output_tokens_per_s(sample)
    else:
        out.update(_from_token_summary(recs, pcts))

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
        "num_rejected": failed - num_aborted,
        "num_aborted": num_aborted,
        "num_incomplete": len(recs) - completed - failed,
        "num_good_requests": num_good,
        "slo_met": slo_met,
        "slo_all_met": slo_all_met,
        "prefix_cache_hit_rate": hits / queries if queries else None,
        "prefix_cache_hit_tokens": hits,
        "prefix_cache_query_tokens": queries,
        "num_preemptions": int(num_preemptions) if num_preemptions is not None
        else sum(r.num_preemptions for r in recs),
        "max_in_flight_requests": peak_in_flight,
    })
    out.update(step_metrics(steps, span, num_replicas))
    out["window"] = None if window is None else [window[0], window[1]]
    return out


def _from_token_summary(recs: list, pcts: Sequence[float]) -> dict:
    """ITL statistics and ``max_output_tokens_per_s`` of summary records (``twin.results.token_summary``):
    ``None`` unless the run's summary covers exactly these records (see ``summary_covers``)."""
    itl = getattr(recs[0], "itl", None) if recs else None
    if itl is None or not summary_covers(recs, itl):
        return {**dict.fromkeys(latency_keys("itl", pcts)), "max_output_tokens_per_s": None}
    first = min(recs, key=lambda r: r.arrival_s)
    peak = itl.max_output_tokens_per_s() if first.status == FINISHED else None
    return {**itl.describe_itl(pcts), "max_output_tokens_per_s": peak}


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
