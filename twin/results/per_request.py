"""`vllm bench serve`'s per-request lists (``input_lens``, ``ttfts``, ``itls``, ...) of a set of request records."""

from __future__ import annotations

from collections.abc import Iterable

from twin.results.metric_keys import BENCH_SERVE_PER_REQUEST_KEYS
from twin.results.records import FAILED_STATUSES, FINISHED, RequestRecord
from twin.results.request_sample import RequestSample, filter_window


def per_request_arrays(records: Iterable[RequestRecord], window: tuple[float | None, float | None] | None = None
                       ) -> dict[str, list]:
    """`vllm bench serve`'s per-request lists (seconds) over the completed and failed requests in record
    order: failed ones read as vLLM writes them (0 output tokens, TTFT and latency 0.0, no ITLs), and
    ``errors`` carries their reject reason ('' for completed ones). Without ``itls`` when the records are summary
    records (``records: {token_times: summary}``)."""
    recs = [r for r in filter_window(records, window) if r.status == FINISHED or r.status in FAILED_STATUSES]
    sample = RequestSample(recs)
    keeps_itls = sample.keeps_token_times     # summary records keep no per-token times: no ``itls`` list
    itls = iter(sample.itl_lists() if keeps_itls else ())
    ttft = iter(sample.ttft.tolist())
    e2el = iter(sample.e2el.tolist())
    out: dict[str, list] = {k: [] for k in (*BENCH_SERVE_PER_REQUEST_KEYS, "errors")}
    for r in recs:
        out["input_lens"].append(int(r.num_prompt_tokens))
        out["start_times"].append(float(r.arrival_s))
        if r.status == FINISHED:
            out["output_lens"].append(int(r.num_output_tokens))
            out["ttfts"].append(next(ttft))
            out["itls"].append(next(itls) if keeps_itls else None)
            out["latencies"].append(next(e2el))
            out["errors"].append("")
        else:
            out["output_lens"].append(0)
            out["ttfts"].append(0.0)
            out["itls"].append([])
            out["latencies"].append(0.0)
            out["errors"].append(r.reject_reason or r.status)
    if not keeps_itls:
        del out["itls"]
    return out
