"""The request log: what the twin's replicas and the calibration engine write into each request's
``RequestRecord`` (``request.client_data``) as the engine core reports it, written once for both.

Events: tokens emitted at a step's end (``stamp_emissions``), a request finished, rejected or aborted
(``close_record``), requests still queued or running when the run stopped (``close_unfinished``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from twin.core.request import Request
from twin.results.records import ABORTED, FINISHED, INCOMPLETE, REJECTED, RequestRecord


def copy_counters(req: Request, record: RequestRecord) -> None:
    """The request's counters as vLLM reports them: output tokens, prefix-cache hits, preemptions."""
    record.num_output_tokens = req.num_output_tokens
    record.num_cached_tokens = max(req.num_cached_tokens, 0)
    record.num_preemptions = req.num_preemptions


def stamp_emissions(requests: Sequence[Request], num_emitted: Sequence[int], end_s: float) -> None:
    """Tokens a step emitted, stamped at the step's end (``num_emitted[i]`` for ``requests[i]``)."""
    for i, k in enumerate(num_emitted):
        if k:
            requests[i].client_data.add_emission(end_s, k)


def close_record(req: Request, t_s: float | None, status: str = FINISHED) -> RequestRecord:
    """The request left the engine at ``t_s`` with ``status`` (FINISHED, ABORTED; REJECTED also takes the
    scheduler's reason and no counters): its record is final."""
    record: RequestRecord = req.client_data
    record.status = status
    record.finish_s = t_s
    if status == REJECTED:
        record.reject_reason = req.reject_reason
        return record
    copy_counters(req, record)
    if status == ABORTED and req.num_cached_tokens < 0:
        record.num_cached_tokens = -1   # never admitted: no prefix-cache query to count
    return record


def close_unfinished(requests: Iterable[Request]) -> None:
    """Requests still queued or running when the run stopped: INCOMPLETE, with their counters so far."""
    for req in requests:
        record = req.client_data
        if record.status == FINISHED and record.finish_s is None:
            record.status = INCOMPLETE
            copy_counters(req, record)
