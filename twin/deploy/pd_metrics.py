"""Metrics per pool of a P/D run, and the KV link's.

* ``prefill``: the prefill legs (each request's ``max_tokens = 1`` run on a prefill engine): their TTFT is the
  prefill latency (request path, queueing and prefill), their prefix-cache hits the run's; the prefill
  engines' busy fraction, batch, queue and KV use.
* ``decode``: the client's requests as the decode engines served them (TTFT end to end, TPOT, ITL), the
  decode engines' step load.
* ``kv_transfer``: transfers, bytes, and per transfer the wait for the decode engine's blocks (from the
  prefill's end until the decode engine allocated them), the link queueing and transfer time (ms); holds the
  prefill engines released at their abort timeout before the decode engine read them.
* ``ttft_parts``: where the mean TTFT goes, over the completed requests (in the window) whose KV crossed the
  link: the prefill leg (request path, prefill queueing and prefill: the leg's own TTFT), link queueing, the
  transfer, and the rest (the wait for the decode engine's blocks, decode queueing and the first decode step). Per request the four add up to its TTFT
  exactly, so their means add up to the mean TTFT of those requests (``mean_ttft_ms``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from twin.deploy.pd_pools import PdDeployment
from twin.results.metrics import compute_metrics
from twin.results.records import FINISHED, STEP_COLUMN_NAMES, RequestRecord, StepRecords
from twin.results.request_sample import filter_window
from twin.results.sim_result import SimResult

POOL_KEYS = (
    "num_requests", "completed", "failed", "request_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "p99_tpot_ms", "p99_itl_ms", "prefix_cache_hit_rate", "num_preemptions", "busy_fraction",
    "mean_running_batch", "mean_queue_length", "mean_kv_usage", "max_kv_usage",
)


def steps_of_engines(steps: Any, engines: list[int]) -> StepRecords | None:
    """The step rows of ``engines`` (None for a per-second step summary: no per-pool step metrics then)."""
    if getattr(steps, "aggregated", False):
        return None
    if not len(steps):
        return StepRecords()
    mask = np.isin(steps.column("replica"), engines)
    return StepRecords.from_columns({name: steps.column(name)[mask] for name in STEP_COLUMN_NAMES})


def _ms(values: list[float], q: float | None = None) -> float | None:
    if not values:
        return None
    arr = np.asarray(values) * 1e3
    return float(arr.mean()) if q is None else float(np.percentile(arr, q))


def pd_metrics(result: SimResult, leg_records: list[RequestRecord], transfers: Any, pd: PdDeployment, *,
               slo: Any = None, window: tuple[float | None, float | None] | None = None) -> dict[str, Any]:
    """``{"pools": {"prefill": ..., "decode": ...}, "kv_transfer": ...}`` plus the deployment's summary."""
    summary = pd.summary()
    pools: dict[str, Any] = {}
    for name, recs in (("prefill", leg_records), ("decode", result.requests)):
        engines = summary[name]["engines"]
        m = compute_metrics(recs, steps_of_engines(result.steps, engines), slo=slo if name == "decode" else None,
                            window=window, num_replicas=len(engines))
        pools[name] = {"engines": len(engines), "gpus": summary[name]["gpus"], **{k: m.get(k) for k in POOL_KEYS}}
    n = len(transfers.bytes)
    summary.update(pools=pools, kv_transfer={
        "num_transfers": n, "total_bytes": int(sum(transfers.bytes)),
        "mean_bytes": float(np.mean(transfers.bytes)) if n else None,
        "mean_transfer_ms": _ms(transfers.transfer_s), "p99_transfer_ms": _ms(transfers.transfer_s, 99),
        "mean_link_wait_ms": _ms(transfers.wait_s), "p99_link_wait_ms": _ms(transfers.wait_s, 99),
        "mean_decode_alloc_wait_ms": _ms(transfers.alloc_wait_s),
        "p99_decode_alloc_wait_ms": _ms(transfers.alloc_wait_s, 99),
        "num_expired_holds": transfers.num_expired,
    })
    summary["ttft_parts"] = ttft_parts(result.requests, leg_records, transfers, window)
    return summary


TTFT_PARTS = ("prefill_ms", "link_wait_ms", "transfer_ms", "decode_first_step_ms")


def ttft_parts(records: list[RequestRecord], leg_records: list[RequestRecord], transfers: Any,
               window: tuple[float | None, float | None] | None = None) -> dict[str, Any]:
    """Mean TTFT split per request into prefill leg, link queueing, transfer and decode queueing + first step
    (ms), over the finished requests in ``window`` whose prefill leg and transfer are on record."""
    legs = {r.request_id: r for r in leg_records if r.first_token_s is not None}
    moved = {rid: (w, t) for rid, w, t in zip(transfers.request_id, transfers.wait_s, transfers.transfer_s)}
    rows = []
    for rec in filter_window(records, window):
        leg, kv = legs.get(rec.request_id), moved.get(rec.request_id)
        if rec.status != FINISHED or rec.first_token_s is None or leg is None or kv is None:
            continue
        ttft = rec.first_token_s - rec.arrival_s
        prefill = leg.first_token_s - leg.arrival_s
        rows.append((prefill, kv[0], kv[1], ttft - prefill - kv[0] - kv[1], ttft))
    if not rows:
        return {"num_requests": 0, **dict.fromkeys(TTFT_PARTS), "mean_ttft_ms": None}
    means = np.asarray(rows).mean(axis=0) * 1e3
    return {"num_requests": len(rows), **dict(zip(TTFT_PARTS, map(float, means[:4]))),
            "mean_ttft_ms": float(means[4])}
