"""Aggregated step records for long runs (``records: {steps: aggregate}``): per replica and per second of the
run's clock (the second a step starts in), sums of what ``StepRecords`` keeps per step, so memory grows with
the simulated seconds, not with the steps.

Rows are appended to a small ``StepRecords`` buffer (the same ``append``/``append_step`` calls, so the engine
does not know which log it writes to) and folded into the buckets with numpy every ``_FOLD_AT`` rows. Totals
(steps, tokens, durations) equal the full log's (durations up to summation order); the step-based metrics
(``twin.results.step_metrics``) answer for a span that holds every step of the log (the whole run), and
per-step columns are unavailable (a clear error).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from twin.errors import TwinInputError
from twin.results.records import StepRecords

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# per (replica, second): sums over the steps that start in it; "*_s" products are value x duration
BUCKET_COLUMNS: tuple[str, ...] = (
    "num_steps", "duration_s", "num_seqs", "num_new_tokens", "num_prefill_tokens", "num_decode_tokens",
    "num_spec_tokens", "num_preempted", "running_s", "waiting_s", "kv_usage_s", "draft_s", "max_kv_usage",
    "max_num_waiting",
)
_COUNT_COLUMNS = frozenset({"num_steps", "num_seqs", "num_new_tokens", "num_prefill_tokens",
                            "num_decode_tokens", "num_spec_tokens", "num_preempted", "max_num_waiting"})
_MAX_COLUMNS = frozenset({"max_kv_usage", "max_num_waiting"})
_FOLD_AT = 1 << 15
STEPS_MODES = ("full", "aggregate")


class StepSummary:
    """Per-replica, per-second sums of the step log (see the module docstring); fed like ``StepRecords``."""

    aggregated = True

    def __init__(self) -> None:
        self._buffer = StepRecords()
        self._room = _FOLD_AT                         # rows the buffer takes before it is folded
        self._buckets: dict[int, np.ndarray] = {}     # replica -> (len(BUCKET_COLUMNS), seconds)
        self.kv_usage_counts: Counter = Counter()     # KV usage value -> steps (for its percentiles)
        self._num_steps = 0
        self._span: dict[int, tuple[float, float]] = {}   # replica -> (first step start, last step end)

    def append(self, *args: Any, **kwargs: Any) -> None:
        self._buffer.append(*args, **kwargs)
        self._room -= 1
        if not self._room:
            self._fold()

    def append_decode_run(self, start_s, duration_s, num_seqs: int, replica: int, num_free_blocks: int,
                          num_usable_blocks: int, blocks_taken) -> None:
        # folded at the same rows as appending them one by one would fold (the sums keep their rounding)
        while len(start_s) >= self._room:
            room = self._room
            self._buffer.append_decode_run(start_s[:room], duration_s[:room], num_seqs, replica, num_free_blocks,
                                           num_usable_blocks, blocks_taken[:room])
            self._fold()
            start_s, duration_s, blocks_taken = start_s[room:], duration_s[room:], blocks_taken[room:]
        if start_s:
            self._buffer.append_decode_run(start_s, duration_s, num_seqs, replica, num_free_blocks,
                                           num_usable_blocks, blocks_taken)
            self._room -= len(start_s)

    def append_step(self, *args: Any, **kwargs: Any) -> None:
        self._buffer.append_step(*args, **kwargs)
        self._room -= 1
        if not self._room:
            self._fold()

    def _fold(self) -> None:
        buf = self._buffer
        n = len(buf)
        if not n:
            return
        cols = buf.column_views()
        start, dur, replica, kv = cols["start_s"], cols["duration_s"], cols["replica"], cols["kv_usage"]
        waiting = cols["num_waiting"].astype(float)
        values = {"num_steps": np.ones(n), "duration_s": dur, "running_s": cols["num_running"] * dur,
                  "waiting_s": waiting * dur, "kv_usage_s": kv * dur, "draft_s": cols["draft_s"],
                  "max_kv_usage": kv, "max_num_waiting": waiting}
        for name in ("num_seqs", "num_new_tokens", "num_prefill_tokens", "num_decode_tokens", "num_spec_tokens",
                     "num_preempted"):
            values[name] = cols[name].astype(float)
        sec = np.floor(start).astype(np.int64)
        end = start + dur
        one_replica = replica.min() == replica.max()
        for r in [int(replica[0])] if one_replica else np.unique(replica).tolist():
            mine = slice(None) if one_replica else replica == r
            s = sec[mine]
            first, last = int(s.min()), int(s.max())
            table = self._table(r, last)[:, first:last + 1]    # the seconds these rows touch, not the whole run
            s = s - first
            for i, name in enumerate(BUCKET_COLUMNS):
                v = values[name][mine]
                if name in _MAX_COLUMNS:
                    np.maximum.at(table[i], s, v)
                else:
                    table[i] += np.bincount(s, weights=v, minlength=last + 1 - first)
            lo, hi = self._span.get(r, (np.inf, -np.inf))
            self._span[r] = (min(lo, float(start[mine].min())), max(hi, float(end[mine].max())))
        usage_values, usage_counts = np.unique(kv, return_counts=True)
        self.kv_usage_counts.update(dict(zip(usage_values.tolist(), usage_counts.tolist())))
        self._num_steps += n
        self._buffer = StepRecords()
        self._room = _FOLD_AT

    def _table(self, replica: int, top: int) -> np.ndarray:
        table = self._buckets.get(replica)
        if table is None or table.shape[1] <= top:
            size = max(top + 1, 64 if table is None else 2 * table.shape[1])
            grown = np.zeros((len(BUCKET_COLUMNS), size))
            if table is not None:
                grown[:, :table.shape[1]] = table
            table = self._buckets[replica] = grown
        return table

    def __len__(self) -> int:
        return self._num_steps + len(self._buffer)

    @property
    def replicas(self) -> list[int]:
        self._fold()
        return sorted(self._buckets)

    def totals(self) -> dict[str, float]:
        """Each bucket column summed (``max_*``: maxed) over every replica and second."""
        self._fold()
        out = dict.fromkeys(BUCKET_COLUMNS, 0.0)
        for table in self._buckets.values():
            for i, name in enumerate(BUCKET_COLUMNS):
                out[name] = max(out[name], float(table[i].max())) if name in _MAX_COLUMNS else \
                    out[name] + float(table[i].sum())
        return out

    def span_s(self) -> tuple[float, float]:
        """(first step's start, last step's end) over every replica."""
        self._fold()
        spans = self._span.values()
        return min(lo for lo, _ in spans), max(hi for _, hi in spans)

    def for_replica(self, replica: int) -> StepSummary:
        """One replica's buckets (without KV-usage counts: ``p99_kv_usage`` is the run's only)."""
        self._fold()
        out = StepSummary()
        if replica in self._buckets:
            out._buckets[replica] = self._buckets[replica]
            out._span[replica] = self._span[replica]
            out._num_steps = int(self._buckets[replica][0].sum())
        return out

    def kv_usage_percentile(self, q: float) -> float | None:
        """``np.percentile`` (linear) of the KV usage over every step, from the value counts."""
        self._fold()
        if not self.kv_usage_counts:
            return None
        values = np.array(sorted(self.kv_usage_counts))
        cum = np.cumsum([self.kv_usage_counts[v] for v in values])
        h = (cum[-1] - 1) * q / 100.0
        lo = int(np.floor(h))
        v_lo = values[np.searchsorted(cum, lo, side="right")]
        v_hi = values[np.searchsorted(cum, min(lo + 1, cum[-1] - 1), side="right")]
        return float(v_lo + (h - lo) * (v_hi - v_lo))

    def column(self, name: str) -> np.ndarray:
        raise TwinInputError(f"step column {name!r}: the run kept aggregated step records (records.steps: "
                             f"aggregate); run with records.steps: full for per-step columns")

    __getitem__ = column

    def to_frame(self) -> pd.DataFrame:
        """One row per replica and second that had steps: ``replica``, ``second`` and the bucket sums."""
        import pandas as pd

        parts = []
        for r in self.replicas:
            table = self._buckets[r]
            used = np.flatnonzero(table[0])
            frame = {"replica": np.full(used.size, r), "second": used}
            frame.update({name: table[i][used].astype(np.int64) if name in _COUNT_COLUMNS else table[i][used]
                          for i, name in enumerate(BUCKET_COLUMNS)})
            parts.append(pd.DataFrame(frame))
        if not parts:
            return pd.DataFrame(columns=["replica", "second", *BUCKET_COLUMNS])
        return pd.concat(parts, ignore_index=True)

    def __repr__(self) -> str:
        return f"StepSummary({len(self)} steps)"


def new_step_log(steps: str) -> StepRecords | StepSummary:
    """The step log of a run for ``records.steps``."""
    if steps not in STEPS_MODES:
        raise TwinInputError(f"records.steps = {steps!r}: must be one of {', '.join(STEPS_MODES)}")
    return StepSummary() if steps == "aggregate" else StepRecords()
