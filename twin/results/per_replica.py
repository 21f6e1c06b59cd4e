"""Per-replica metrics of a multi-replica run, computed from the records after the run (nothing on the hot path).

One row per replica (``per_replica_metrics``): the replica's own requests measured as ``compute_metrics``
measures a run (throughput over that replica's first arrival to last completion, TTFT, TPOT and E2EL under
`vllm bench serve` definitions, goodput against the SLO), its prefix-cache hit rate (cached / prompt tokens of
its requests, the requests' own counts), its preemptions (its requests' counts) and its step-based load from
its own step records, plus its group, GPU and tensor parallelism. ``load_imbalance``: max over mean of the
requests each replica served. ``PER_REPLICA_FIELDS`` orders the rows' keys for tables and files.

``twin run`` prints the table for a run of more than one replica, writes the rows into ``--json`` (under
``twin.per_replica``, with ``twin.load_imbalance``) and into ``--replicas-out`` (.csv or .parquet).
"""

from __future__ import annotations

from typing import Any

from twin.results.metrics import compute_metrics
from twin.results.records import STEP_COLUMN_NAMES, StepRecords
from twin.results.sim_result import SimResult


def replica_owner(result: SimResult) -> dict[int, dict[str, Any]]:
    """Replica index -> its group, GPU and TP (from the recorded groups, or the run's one deployment)."""
    out: dict[int, dict[str, Any]] = {}
    dep = result.config.get("deployment")
    if not result.config.get("replica_groups") and isinstance(dep, dict) and result.num_replicas:
        return {i: {"group": 0, "gpu": dep.get("gpu"), "tensor_parallel_size": dep.get("tensor_parallel_size")}
                for i in range(result.num_replicas)}
    for gi, g in enumerate(result.config.get("replica_groups") or []):
        for i in g["replicas"]:
            out[i] = {"group": g.get("name") or gi, "gpu": g["gpu"], "tensor_parallel_size": g["tensor_parallel_size"]}
    return out


def steps_of(steps: StepRecords, replica: int) -> StepRecords:
    """The step records of one replica (full records filtered by their ``replica`` column; aggregate ones
    from the replica's own buckets)."""
    if getattr(steps, "aggregated", False):
        return steps.for_replica(replica)
    if not len(steps):
        return StepRecords()
    mask = steps.column("replica") == replica
    return StepRecords.from_columns({name: steps.column(name)[mask] for name in STEP_COLUMN_NAMES})


PER_REPLICA_KEYS = (
    "num_requests", "completed", "failed", "request_throughput", "output_throughput", "mean_ttft_ms",
    "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "p99_e2el_ms",
    "num_good_requests", "prefix_cache_hit_rate", "num_preemptions", "busy_fraction", "mean_running_batch",
    "mean_queue_length", "mean_kv_usage", "max_kv_usage",
)


def per_replica_metrics(result: SimResult, slo: Any = None,
                        window: tuple[float | None, float | None] | None = None) -> list[dict[str, Any]]:
    """One row per replica: its requests' latency and throughput, its prefix-cache hit rate (cached /
    prompt tokens of its requests) and its step-based load, plus its group, GPU and TP."""
    n = result.num_replicas or (max((r.replica for r in result.requests), default=0) + 1)
    owner = replica_owner(result)
    by_replica: list[list] = [[] for _ in range(n)]
    for r in result.requests:
        by_replica[r.replica].append(r)
    rows = []
    for i in range(n):
        m = compute_metrics(by_replica[i], steps_of(result.steps, i), slo=slo, window=window, num_replicas=1)
        row: dict[str, Any] = {"replica": i, **owner.get(i, {})}
        row.update({k: m.get(k) for k in PER_REPLICA_KEYS})
        row["share_of_requests"] = len(by_replica[i]) / len(result.requests) if result.requests else None
        rows.append(row)
    return rows


def load_imbalance(rows: list[dict[str, Any]]) -> float | None:
    """Max over mean of the requests each replica served (1 = perfectly even)."""
    counts = [r["num_requests"] for r in rows]
    mean = sum(counts) / len(counts) if counts else 0
    return max(counts) / mean if mean else None


PER_REPLICA_FIELDS = ("replica", "group", "gpu", "tensor_parallel_size", *PER_REPLICA_KEYS, "share_of_requests")


def per_replica_frame(rows: list[dict[str, Any]]):
    """The rows as a table, columns in ``PER_REPLICA_FIELDS`` order (a column no row has is left empty)."""
    import pandas as pd

    return pd.DataFrame(rows, columns=list(PER_REPLICA_FIELDS))
