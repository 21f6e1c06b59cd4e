"""A prefill/decode (``disaggregation:``) run on the dashboard: what the page says about its pools (their diagnosis
per pool is `twin.analysis.pool_causes`, shared with `twin run`)."""

from __future__ import annotations

from typing import Any

from twin.deploy.pd_pools import POOLS, PdDeployment
from twin.results import numbers

__all__ = ["link_line", "pd_headline", "pd_info", "pool_rows"]


def pd_info(pd: PdDeployment) -> dict[str, Any]:
    """The deployment facts the page shows for a P/D run (``gpu``: both pools' GPU names when they differ)."""
    s = pd.summary()
    pools = []
    for pool in POOLS:
        sc = pd.deployments[pool].scheduler_config
        pools.append({"pool": pool, "gpu": pd.deployments[pool].gpu.name, "engines": len(s[pool]["engines"]),
                      "gpus": s[pool]["gpus"], "tensor_parallel_size": s[pool]["tensor_parallel_size"],
                      "max_num_seqs": sc.max_num_seqs, "max_num_batched_tokens": sc.max_num_batched_tokens,
                      "enable_prefix_caching": sc.enable_prefix_caching,
                      "kv_capacity_tokens": pd.deployments[pool].kv_pool.capacity_tokens})
    gpus = list(dict.fromkeys(p["gpu"] for p in pools))
    p = pools[0]
    return {"pools": pools, "link": s["link"], "gpu": " / ".join(gpus), "model": pd.deployments["prefill"].model.name,
            "scheduler": "continuous", "max_num_seqs": p["max_num_seqs"],
            "max_num_batched_tokens": p["max_num_batched_tokens"], "enable_prefix_caching": p["enable_prefix_caching"],
            "enable_chunked_prefill": pd.deployments["prefill"].scheduler_config.enable_chunked_prefill,
            "kv_capacity_tokens": p["kv_capacity_tokens"], "tensor_parallel_size": p["tensor_parallel_size"],
            "replicas": p["engines"], "num_gpus": sum(q["gpus"] for q in pools)}


def pd_headline(info: dict[str, Any]) -> str:
    """``llama-3.1-8b, prefill 2×TP1 A100 (max_num_seqs 256, ...) → decode 1×TP1 A100 (...) over infiniband``."""
    parts = [f"{p['pool']} {p['engines']}×TP{p['tensor_parallel_size']} {p['gpu']} (max_num_seqs "
             f"{p['max_num_seqs']}, max_num_batched_tokens {p['max_num_batched_tokens']}, KV pool "
             f"{p['kv_capacity_tokens']:,} tokens)" for p in info["pools"]]
    return f"{info['model']} disaggregated: {' → '.join(parts)} · KV link {info['link'].get('kind', '?')}"


# --------------------------------------------------------------------------------------------------------
# the page's Pools section, as text (twin.dashboard.pd_page draws it)
# --------------------------------------------------------------------------------------------------------
TTFT_PART_LABELS = {"prefill_ms": "prefill (request path, queueing, prefill)", "link_wait_ms": "link queueing",
                    "transfer_ms": "KV transfer", "decode_first_step_ms": "decode blocks + queueing + first step"}


def _pair(a: Any, b: Any, fmt: Any = numbers.duration_ms) -> str:
    return f"{fmt(a)} / {fmt(b)}"


def pool_rows(dis: dict[str, Any]) -> list[dict[str, str]]:
    """One row per figure, a column per pool (``result.config["disaggregation"]``), numbers as everywhere."""
    pools = dis.get("pools") or {}
    p, d = pools.get("prefill") or {}, pools.get("decode") or {}

    def in_flight(m: dict[str, Any]) -> Any:
        n, done, failed = m.get("num_requests"), m.get("completed"), m.get("failed")
        return None if None in (n, done, failed) else n - done - failed

    rows = [
        ("engines (GPUs)", *(f"{m.get('engines')} ({numbers.counted(m.get('gpus'), 'GPU')})"
                             for m in (p, d))),
        ("requests: completed / failed / in flight",
         *(f"{numbers.count(m.get('completed'))} / {numbers.count(m.get('failed'))} / "
           f"{numbers.count(in_flight(m))}" for m in (p, d))),
        ("busy fraction", *(numbers.percent(m.get("busy_fraction")) for m in (p, d))),
        ("mean queue (waiting requests)", *(numbers.number(m.get("mean_queue_length")) for m in (p, d))),
        ("mean running batch", *(numbers.number(m.get("mean_running_batch")) for m in (p, d))),
        ("KV usage mean / max", *(_pair(m.get("mean_kv_usage"), m.get("max_kv_usage"), numbers.percent)
                                  for m in (p, d))),
        ("prefill latency p50 / p99 (prefill) · TTFT p50 / p99 (decode)",
         *(_pair(m.get("median_ttft_ms"), m.get("p99_ttft_ms")) for m in (p, d))),
        ("TPOT mean / p99", "-", _pair(d.get("mean_tpot_ms"), d.get("p99_tpot_ms"))),
        ("ITL p99", "-", numbers.duration_ms(d.get("p99_itl_ms"))),
        ("prefix-cache hit rate", numbers.percent(p.get("prefix_cache_hit_rate")), "-"),
        ("preemptions", *(numbers.count(m.get("num_preemptions")) for m in (p, d))),
    ]
    return [{"": label, "prefill": a, "decode": b} for label, a, b in rows]


def link_line(dis: dict[str, Any]) -> str:
    """The KV link in one line: kind and bandwidth, transfers, bytes each, transfer time and link queueing."""
    link, kv = dis.get("link") or {}, dis.get("kv_transfer") or {}
    mean_b = kv.get("mean_bytes")
    each = "-" if mean_b is None else numbers.with_unit(mean_b / 1e6, "MB")
    return (f"KV link ({link.get('kind')}, {numbers.with_unit(link.get('bandwidth_gb_s'), 'GB/s')} × "
            f"{link.get('lanes')}, {numbers.with_unit(link.get('latency_us'), 'µs')}): "
            f"{numbers.count(kv.get('num_transfers'))} transfers, {each} each; transfer time mean / p99 "
            f"{_pair(kv.get('mean_transfer_ms'), kv.get('p99_transfer_ms'))}; link queueing mean / p99 "
            f"{_pair(kv.get('mean_link_wait_ms'), kv.get('p99_link_wait_ms'))}")
