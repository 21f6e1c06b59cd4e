"""Compact token times for long runs (``records: {token_times: summary}``).

A request record in summary mode (``SummaryRequestRecord``) keeps its first and last token times and its
token count, so TTFT, TPOT and E2EL stay exact, and hands every inter-token gap to one run-wide
``ItlSummary``; memory no longer grows with the tokens (a full record keeps 8 bytes per emission).

What the summary gives, against the full per-token arrays of the same run:

* ITL count and max: exact. Mean and std: exact sums (std shifted by the first gap so it does not cancel);
  they differ from numpy's over the full array only by summation order (< 1e-9 relative).
* ITL median and percentiles: ``np.percentile``'s linear interpolation over order statistics read from a
  histogram with logarithmic bins of relative width ``REL_BIN_WIDTH`` (1e-3), each value at its bin's
  geometric centre clamped to the observed min and max (the extreme ranks are the exact min and max): within ``REL_BIN_WIDTH / 2`` (0.05 %) of the exact
  value for gaps in [``MIN_GAP_S``, ``MAX_GAP_S``]. Zero gaps (the extra tokens of a multi-token step) count
  exactly.
* ``max_output_tokens_per_s``: exact, one-second buckets from the run's first arrival.

The summary covers every emitted token of the run, so it answers only for an unwindowed measurement of all
the run's records in which every request that emitted a token finished (no time cut, no client aborts
mid-stream); otherwise those keys are ``None``. Per-request ITL lists (vLLM's ``itls``) are not kept.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Hashable

import numpy as np

from twin.core.request import Request
from twin.errors import TwinInputError
from twin.results.records import FINISHED, RequestRecord
from twin.results.weighted_sum import weighted_sum

REL_BIN_WIDTH = 1e-3
MIN_GAP_S = 1e-9
MAX_GAP_S = 1e6
_LOG_STEP = math.log1p(REL_BIN_WIDTH)
_NUM_BINS = int(math.ceil(math.log(MAX_GAP_S / MIN_GAP_S) / _LOG_STEP)) + 1
_FLUSH_AT = 1 << 16


class ItlSummary:
    """Run-wide inter-token gaps and per-second output tokens (see the module docstring).

    Gaps are buffered and folded into the histogram with numpy every ``_FLUSH_AT`` entries; so are engine
    steps in which several requests each emitted one token (a replica's decode cohort,
    ``twin.sim.decode_cohort``): one entry per step, its end, the previous step's and how many requests
    emitted in it, instead of one per request and token."""

    def __init__(self) -> None:
        self.origin_s: float | None = None      # the run's first arrival: the per-second buckets start there
        self.num_records = 0
        self.num_gaps = 0
        self.num_zero_gaps = 0
        self.max_gap_s = 0.0
        self.min_gap_s = math.inf
        self._hist = np.zeros(_NUM_BINS, np.int64)
        self._shift: float | None = None
        self._sum = 0.0                          # of (gap - shift), nonzero gaps
        self._sum_sq = 0.0                       # of (gap - shift)^2, nonzero gaps
        self._gaps = array("d")
        self._weights = array("d")
        self._tokens = array("q")                # output tokens per second since origin_s
        self._step_ends = array("d")             # pending steps: their ends ...
        self._step_prevs = array("d")            # ... the previous step's end (NaN: no gap counted) ...
        self._step_counts = array("q")           # ... and how many requests emitted one token in each

    # ---- recording ------------------------------------------------------------------------------------
    def add_record(self, arrival_s: float) -> None:
        self.num_records += 1
        if self.origin_s is None or arrival_s < self.origin_s:
            self.origin_s = arrival_s

    def add_gap(self, gap_s: float) -> None:
        self._gaps.append(gap_s)
        self._weights.append(1.0)
        if len(self._gaps) >= _FLUSH_AT:
            self._flush_gaps()

    def add_tokens(self, time_s: float, num_tokens: int) -> None:
        sec = math.floor(time_s - self.origin_s)
        self._tokens_through(sec)[sec] += num_tokens

    def _tokens_through(self, sec: int) -> array:
        """The per-second token counts, grown (doubling) to hold second ``sec``."""
        tokens = self._tokens
        if sec >= len(tokens):
            tokens.extend(array("q", [0]) * (max(sec + 1, 2 * len(tokens)) - len(tokens)))
        return tokens

    def add_steps(self, prevs_s, ends_s, counts) -> None:
        """Engine steps ending at ``ends_s``, in step ``i`` of which ``counts[i]`` requests emitted one token
        after their previous one at ``prevs_s[i]`` (the end of the step before; NaN: the gaps are not counted
        here): ``counts[i]`` tokens at ``ends_s[i]`` and as many gaps of ``ends_s[i] - prevs_s[i]``."""
        self._step_prevs.extend(prevs_s)
        self._step_ends.extend(ends_s)
        self._step_counts.extend(counts)
        if len(self._step_ends) >= _FLUSH_AT:
            self._flush_steps()

    def _flush_steps(self) -> None:
        if not self._step_ends:
            return
        ends = np.frombuffer(self._step_ends, np.float64)
        counts = np.frombuffer(self._step_counts, np.int64)
        secs = np.floor(ends - self.origin_s).astype(np.int64)   # as add_tokens buckets them, in bulk
        first, last = int(secs.min()), int(secs.max())
        per_sec = np.frombuffer(self._tokens_through(last), np.int64)
        per_sec[first:last + 1] += np.bincount(secs - first, weights=counts,
                                               minlength=last + 1 - first).astype(np.int64)
        del per_sec                    # release the buffer so the array can grow again
        gaps = ends - np.frombuffer(self._step_prevs, np.float64)
        counted = ~np.isnan(gaps)
        self._fold(gaps[counted], counts[counted].astype(np.float64))
        self._step_ends = array("d")
        self._step_prevs = array("d")
        self._step_counts = array("q")

    def _flush_gaps(self) -> None:
        if not self._gaps:
            return
        self._fold(np.frombuffer(self._gaps, np.float64), np.frombuffer(self._weights, np.float64))
        self._gaps = array("d")
        self._weights = array("d")

    def _fold(self, g: np.ndarray, w: np.ndarray) -> None:
        """Gaps ``g`` (seconds), each counted ``w`` times, into the counts, sums and histogram."""
        zero = g <= 0.0
        if zero.any():
            self.num_zero_gaps += int(w[zero].sum())
            g, w = g[~zero], w[~zero]
        if g.size:
            if self._shift is None:
                self._shift = float(g[0])
            d = g - self._shift
            self._sum += weighted_sum(d, w)
            self._sum_sq += weighted_sum(d * d, w)
            self.num_gaps += int(w.sum())
            self.max_gap_s = max(self.max_gap_s, float(g.max()))
            self.min_gap_s = min(self.min_gap_s, float(g.min()))
            bins = np.clip(np.floor(np.log(g / MIN_GAP_S) / _LOG_STEP), 0, _NUM_BINS - 1).astype(np.int64)
            self._hist += np.bincount(bins, weights=w, minlength=_NUM_BINS).astype(np.int64)

    def flush(self) -> None:
        self._flush_steps()
        self._flush_gaps()

    # ---- reading --------------------------------------------------------------------------------------
    def max_output_tokens_per_s(self) -> float:
        self.flush()
        return float(max(self._tokens, default=0))

    def describe_itl(self, percentiles) -> dict:
        """``mean/median/std/pNN_itl_ms`` as ``twin.results.metrics.describe`` gives them."""
        from twin.results.metric_keys import latency_keys, percentile_word

        self.flush()
        n = self.num_gaps + self.num_zero_gaps
        if not n:
            return dict.fromkeys(latency_keys("itl", percentiles))
        shift = self._shift or 0.0
        # zero gaps are (0 - shift) from the shift
        total = self._sum - shift * self.num_zero_gaps
        total_sq = self._sum_sq + shift * shift * self.num_zero_gaps
        mean_d = total / n
        var = max(total_sq / n - mean_d * mean_d, 0.0)
        cum = np.cumsum(self._hist)

        def at_rank(rank: int) -> float:
            if rank < self.num_zero_gaps:
                return 0.0
            if rank == n - 1:
                return self.max_gap_s
            if rank == self.num_zero_gaps:
                return self.min_gap_s
            b = int(np.searchsorted(cum, rank - self.num_zero_gaps, side="right"))
            centre = MIN_GAP_S * math.exp((b + 0.5) * _LOG_STEP)
            return min(max(centre, self.min_gap_s), self.max_gap_s)

        def pct(q: float) -> float:
            h = (n - 1) * q / 100.0
            lo = math.floor(h)
            v_lo, v_hi = at_rank(lo), at_rank(min(lo + 1, n - 1))
            return v_lo + (h - lo) * (v_hi - v_lo)

        out = {"mean_itl_ms": (shift + mean_d) * 1000, "median_itl_ms": pct(50.0) * 1000,
               "std_itl_ms": math.sqrt(var) * 1000}
        for p in percentiles:
            out[f"p{percentile_word(p)}_itl_ms"] = pct(float(p)) * 1000
        return out


def summary_covers(records: list, itl: ItlSummary) -> bool:
    """Whether ``itl`` describes exactly these records: all of its run's records, and every one that emitted
    a token finished."""
    return (len(records) == itl.num_records and all(getattr(r, "itl", None) is itl for r in records)
            and all(r.status == FINISHED or r.first_token_s is None for r in records))


class SummaryRequestRecord:
    """A ``RequestRecord`` without per-token times: the same fields and counters, plus ``last_token_s`` and
    ``num_emissions``; gaps go to the run's ``ItlSummary`` (``itl``)."""

    __slots__ = ("request_id", "task_class", "arrival_s", "first_token_s", "last_token_s", "finish_s",
                 "num_prompt_tokens", "num_output_tokens", "num_cached_tokens", "num_preemptions",
                 "num_emissions", "status", "reject_reason", "replica", "num_spec_drafts",
                 "num_spec_draft_tokens", "num_spec_accepted_tokens", "spec_accepted_per_position", "itl")
    keeps_token_times = False
    emit_counts = None

    def __init__(self, request_id: Hashable, task_class: str, arrival_s: float, itl: ItlSummary,
                 num_prompt_tokens: int = 0) -> None:
        self.request_id, self.task_class, self.arrival_s, self.itl = request_id, task_class, arrival_s, itl
        self.first_token_s = self.last_token_s = self.finish_s = None
        self.num_prompt_tokens = num_prompt_tokens
        self.num_output_tokens = self.num_cached_tokens = self.num_preemptions = self.num_emissions = 0
        self.status, self.reject_reason, self.replica = FINISHED, None, 0
        self.num_spec_drafts = self.num_spec_draft_tokens = self.num_spec_accepted_tokens = 0
        self.spec_accepted_per_position = None
        itl.add_record(arrival_s)

    def add_emission(self, time_s: float, num_tokens: int = 1) -> None:
        itl = self.itl
        last = self.last_token_s
        if last is None:
            self.first_token_s = time_s
        else:
            itl.add_gap(time_s - last)
        for _ in range(num_tokens - 1):
            itl.add_gap(0.0)
        itl.add_tokens(time_s, num_tokens)
        self.last_token_s = time_s
        self.num_emissions += 1

    def add_counted_emissions(self, first_s: float, last_s: float, num_emissions: int,
                              first_gap_counted: bool) -> None:
        """``num_emissions`` one-token emissions from ``first_s`` to ``last_s`` in consecutive steps whose gaps
        and tokens ``itl.add_steps`` counted, the gap before the first too if ``first_gap_counted``."""
        if self.last_token_s is None:
            self.first_token_s = first_s
        elif not first_gap_counted:
            self.itl.add_gap(first_s - self.last_token_s)
        self.last_token_s = last_s
        self.num_emissions += num_emissions

    # the same definitions as a full record's (they read only fields both kinds have)
    is_finished = RequestRecord.is_finished
    ttft_s = RequestRecord.ttft_s
    e2el_s = RequestRecord.e2el_s
    tpot_s = RequestRecord.tpot_s


TOKEN_TIMES_MODES = ("full", "summary")


def record_factory(token_times: str) -> Callable[[Request], RequestRecord | SummaryRequestRecord]:
    """``new_record(request)`` for a run: a record of the ``token_times`` mode, set as the request's
    ``client_data``; summary records of one factory share one ``ItlSummary``."""
    if token_times not in TOKEN_TIMES_MODES:
        raise TwinInputError(f"records.token_times = {token_times!r}: must be one of {', '.join(TOKEN_TIMES_MODES)}")
    itl = ItlSummary() if token_times == "summary" else None

    def new_record(request: Request) -> RequestRecord | SummaryRequestRecord:
        if itl is None:
            record = RequestRecord(request.request_id, request.task_class, request.arrival_time_s,
                                   num_prompt_tokens=request.num_prompt_tokens)
        else:
            record = SummaryRequestRecord(request.request_id, request.task_class, request.arrival_time_s, itl,
                                          num_prompt_tokens=request.num_prompt_tokens)
        request.client_data = record
        return record

    return new_record
