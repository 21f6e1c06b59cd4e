"""Metrics per pool of a P/D run, and the KV link's.

* ``prefill``: the prefill legs (each request's ``max_tokens = 1`` run on a prefill engine): their TTFT is the
  prefill latency (request path, queueing and prefill), their prefix-cache hits the run's; the prefill
  engines' busy fraction, batch, queue and KV use.
* ``decode``: the client's requests as the decode engines served them (TTFT end to end, TPOT, ITL), the
  decode engines' step load.
* ``kv_transfer``: transfers, bytes, and per transfer the wait for the decode engine's blocks (from the
  prefill's end until the decode engine allocated them), the link queueing and transfer time (ms); holds the
  prefill engines released at their abort timeout before the decode engine read them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from twin.deploy.pd_pools import PdDeployment
from twin.results.metrics import compute_metrics
from twin.results.records import STEP_COLUMN_NAMES, RequestRecord, StepRecords
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
    return summary
