"""The request records a measurement covers (``filter_window``: those that arrived in a window) and
``RequestSample``, their numpy arrays (TTFT, TPOT, E2EL, token emission times, ITL gaps) every metric and
output is computed from."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from twin.errors import TwinInputError
from twin.results.records import ABORTED, FINISHED, REJECTED, RequestRecord


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
    token's emission time of the finished requests, request after request, and ``itl_flat`` their gaps
    (``None`` when any record is a summary record, ``keeps_token_times`` false)."""

    def __init__(self, records: Sequence[RequestRecord]) -> None:
        self.records = list(records)
        recs = self.records
        n = len(recs)
        status = [r.status for r in recs]
        self.finished_mask = np.fromiter((s == FINISHED for s in status), bool, n)
        self.rejected_mask = np.fromiter((s == REJECTED for s in status), bool, n)
        self.aborted_mask = np.fromiter((s == ABORTED for s in status), bool, n)
        self.failed_mask = self.rejected_mask | self.aborted_mask
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
        self.keeps_token_times = all(r.keeps_token_times for r in fin)
        if not self.keeps_token_times:   # summary records (twin.results.token_summary): no per-token times
            self.token_times = self.itl_flat = None
            self.tokens_per_request = self.itl_lens = None
            return
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
        if not self.keeps_token_times:
            raise TwinInputError("per-request ITLs: the run kept summary token times (records.token_times: "
                                 "summary); run with records.token_times: full for them")
        if not self.finished:
            return []
        return [a.tolist() for a in np.split(self.itl_flat, np.cumsum(self.itl_lens)[:-1])]
