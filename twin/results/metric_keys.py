"""The names of the metric keys: `vllm bench serve`'s scalar, speculative-decoding and per-request keys, the
twin's own keys, and how a latency statistic is spelled (``mean_ttft_ms``, ``p99.9_itl_ms``)."""

from __future__ import annotations

from collections.abc import Sequence

from twin.slo_statistics import percentile_word  # noqa: F401 (re-exported: how a percentile is spelt)

LATENCY_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")
PERCENTILES: tuple[float, ...] = (50, 90, 95, 99)


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
    "num_requests", "num_rejected", "num_aborted", "num_incomplete", "num_good_requests", "slo_met", "slo_all_met",
    "prefix_cache_hit_rate", "prefix_cache_hit_tokens", "prefix_cache_query_tokens", "num_preemptions",
    "max_in_flight_requests", "num_steps", "busy_fraction", "mean_running_batch", "mean_queue_length", "mean_batched_tokens",
    "mean_kv_usage", "p99_kv_usage", "max_kv_usage", "num_replicas", "window",
)
