"""What a run leaves behind: one record per request and one row per engine step.

The simulation engine (and the real calibration engine) write these; `twin.results.metrics` turns them into
`vllm bench serve` numbers and `twin.results.export` writes them out.

Times are seconds on the run's clock. Per-step columns are `array.array`s appended on the hot path
(hundreds of thousands of steps per run) and turned into numpy / pandas only when read.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

FINISHED = "finished"
REJECTED = "rejected"
INCOMPLETE = "incomplete"  # still queued or running when the run stopped
ABORTED = "aborted"        # the client gave up (workload timeout_s): the server freed it; counted as failed
FAILED_STATUSES = (REJECTED, ABORTED)


@dataclass(slots=True)
class RequestRecord:
    """One request's life, as `vllm bench serve` would observe it plus the server-side counters.

    ``emit_times_s`` holds one entry per engine step that emitted tokens for the request;
    ``emit_counts`` the tokens emitted at each entry (``None``: one token each; speculative decoding
    emits several per step). ``status`` is ``"finished"``, ``"rejected"`` (never fits: counted as failed),
    ``"aborted"`` (the client's timeout ran out first: counted as failed; ``finish_s`` is the abort time)
    or ``"incomplete"`` (still in flight when the run stopped: neither completed nor failed).
    ``num_cached_tokens`` is -1 for a request aborted before it was ever admitted (no prefix-cache query).
    """

    request_id: Hashable
    task_class: str
    arrival_s: float
    first_token_s: float | None = None
    finish_s: float | None = None
    num_prompt_tokens: int = 0
    num_output_tokens: int = 0
    num_cached_tokens: int = 0
    num_preemptions: int = 0
    emit_times_s: array = field(default_factory=lambda: array("d"))
    emit_counts: array | None = None
    status: str = FINISHED
    reject_reason: str | None = None
    replica: int = 0
    num_spec_drafts: int = 0
    num_spec_draft_tokens: int = 0
    num_spec_accepted_tokens: int = 0
    spec_accepted_per_position: array | None = None

    keeps_token_times = True   # twin.results.token_summary.SummaryRequestRecord keeps none

    @property
    def num_emissions(self) -> int:
        return len(self.emit_times_s)

    def add_emission(self, time_s: float, num_tokens: int = 1) -> None:
        """Record a step that emitted ``num_tokens`` tokens at ``time_s`` (sets ``first_token_s`` on the
        first one). ``num_output_tokens`` is the caller's to keep."""
        if self.first_token_s is None:
            self.first_token_s = time_s
        self.emit_times_s.append(time_s)
        counts = self.emit_counts
        if counts is None:
            if num_tokens == 1:
                return
            counts = self.emit_counts = array("i", [1]) * (len(self.emit_times_s) - 1)
        counts.append(num_tokens)

    def add_emissions(self, times_s: array) -> None:
        """Record consecutive steps that emitted one token each at ``times_s`` (an ``array('d')``): the same
        as ``add_emission(t)`` for each, in one call."""
        if not times_s:
            return
        if self.first_token_s is None:
            self.first_token_s = times_s[0]
        self.emit_times_s.extend(times_s)
        if self.emit_counts is not None:
            self.emit_counts.extend(array("i", [1]) * len(times_s))

    @property
    def is_finished(self) -> bool:
        return self.status == FINISHED

    @property
    def ttft_s(self) -> float | None:
        if self.status != FINISHED or self.first_token_s is None:
            return None
        return self.first_token_s - self.arrival_s

    @property
    def e2el_s(self) -> float | None:
        if self.status != FINISHED or self.finish_s is None:
            return None
        return self.finish_s - self.arrival_s

    @property
    def tpot_s(self) -> float | None:
        """(E2EL - TTFT) / (output tokens - 1); None for one-token outputs, as vLLM excludes them."""
        ttft, e2el = self.ttft_s, self.e2el_s
        if ttft is None or e2el is None or self.num_output_tokens < 2:
            return None
        return (e2el - ttft) / (self.num_output_tokens - 1)


# (name, array typecode) in the order StepRecords.append takes them
STEP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("start_s", "d"),
    ("duration_s", "d"),
    ("num_seqs", "i"),
    ("num_prefill_seqs", "i"),
    ("num_decode_seqs", "i"),
    ("num_new_tokens", "i"),
    ("num_prefill_tokens", "i"),
    ("num_decode_tokens", "i"),
    ("num_spec_tokens", "i"),
    ("num_preempted", "i"),
    ("num_waiting", "i"),
    ("num_running", "i"),
    ("kv_usage", "d"),
    ("replica", "i"),
    ("draft_s", "d"),
)
STEP_COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _ in STEP_COLUMNS)
_PER_STEP_COLUMNS = frozenset(("start_s", "duration_s"))
# in a run of pure decode steps of n sequences these are n; the other columns but the replica are 0
_DECODE_RUN_SEQS_COLUMNS = frozenset(("num_seqs", "num_decode_seqs", "num_new_tokens", "num_decode_tokens",
                                      "num_running"))


class StepRecords:
    """Columnar per-step log: one ``array.array`` per column, appended once per engine step; read it with
    ``column``.

    ``num_waiting``/``num_running`` and ``kv_usage`` (0..1) are the queue sizes and KV-pool usage after the
    step was scheduled; ``num_seqs`` the sequences the step ran (``num_prefill_seqs + num_decode_seqs``).

    A run of pure decode steps (``append_decode_run``) stores its start and duration columns, the blocks it has
    taken by each step, and, once, where it starts, how long it is, its sequences, replica and free blocks: its
    other columns follow from these, and are written into their arrays, among the rows appended one by one,
    when a column is read.
    """

    __slots__ = tuple("_" + name for name in STEP_COLUMN_NAMES) + (
        "_run_rows", "_run_lengths", "_run_seqs", "_run_replicas", "_run_free_blocks", "_run_usable_blocks",
        "_run_blocks_taken")

    def __init__(self) -> None:
        for name, code in STEP_COLUMNS:
            setattr(self, "_" + name, array(code))
        self._clear_runs()

    def _clear_runs(self) -> None:
        self._run_rows = array("q")       # row of each pending run's first step
        self._run_lengths = array("q")
        self._run_seqs = array("q")
        self._run_replicas = array("q")
        self._run_free_blocks = array("q")
        self._run_usable_blocks = array("q")
        self._run_blocks_taken = array("q")   # per step

    def append(self, start_s: float, duration_s: float, num_seqs: int, num_prefill_seqs: int,
               num_decode_seqs: int, num_new_tokens: int, num_prefill_tokens: int, num_decode_tokens: int,
               num_spec_tokens: int, num_preempted: int, num_waiting: int, num_running: int,
               kv_usage: float, replica: int = 0, draft_s: float = 0.0) -> None:
        self._start_s.append(start_s)
        self._duration_s.append(duration_s)
        self._num_seqs.append(num_seqs)
        self._num_prefill_seqs.append(num_prefill_seqs)
        self._num_decode_seqs.append(num_decode_seqs)
        self._num_new_tokens.append(num_new_tokens)
        self._num_prefill_tokens.append(num_prefill_tokens)
        self._num_decode_tokens.append(num_decode_tokens)
        self._num_spec_tokens.append(num_spec_tokens)
        self._num_preempted.append(num_preempted)
        self._num_waiting.append(num_waiting)
        self._num_running.append(num_running)
        self._kv_usage.append(kv_usage)
        self._replica.append(replica)
        self._draft_s.append(draft_s)

    def append_decode_run(self, start_s: list[float], duration_s: list[float], num_seqs: int, replica: int,
                          num_free_blocks: int, num_usable_blocks: int, blocks_taken: list[int]) -> None:
        """Rows for a run of pure decode steps of ``num_seqs`` sequences, nobody waiting (lists for the per-step
        values): the rows ``append`` would add one by one. The KV usage after a step was scheduled is
        ``1 - (num_free_blocks - taken) / num_usable_blocks``, with ``num_free_blocks`` the free blocks before
        the run and ``taken`` the step's entry of ``blocks_taken``, the blocks the run had taken by then."""
        if not start_s:
            return
        self._run_rows.append(len(self._start_s))
        self._run_lengths.append(len(start_s))
        self._run_seqs.append(num_seqs)
        self._run_replicas.append(replica)
        self._run_free_blocks.append(num_free_blocks)
        self._run_usable_blocks.append(num_usable_blocks)
        self._run_blocks_taken.extend(blocks_taken)
        self._start_s.extend(start_s)
        self._duration_s.extend(duration_s)

    def _write_runs(self) -> None:
        """Write the pending decode runs' constant columns into their rows."""
        if not self._run_rows:
            return
        for name, col in self._merged_columns().items():
            setattr(self, "_" + name, array(col.dtype.char, col.tobytes()))
        self._clear_runs()

    def _merged_columns(self) -> dict[str, np.ndarray]:
        """Every column but the per-step ones (start, duration) as a numpy array, with the pending decode runs'
        values written into their rows."""
        num_rows = len(self._start_s)
        lengths = np.frombuffer(self._run_lengths, dtype=np.int64)
        firsts = np.frombuffer(self._run_rows, dtype=np.int64)
        # the runs' rows, run after run: a run's first row, then the ones after it
        in_runs = np.arange(int(lengths.sum())) + np.repeat(firsts - (np.cumsum(lengths) - lengths), lengths)
        one_by_one = np.ones(num_rows, dtype=bool)
        one_by_one[in_runs] = False
        seqs = np.repeat(np.frombuffer(self._run_seqs, dtype=np.int64), lengths)
        replicas = np.repeat(np.frombuffer(self._run_replicas, dtype=np.int64), lengths)
        # the same operations as 1.0 - (free - taken) / usable on Python ints (exact in float64), so the same bits
        free_blocks = np.repeat(np.frombuffer(self._run_free_blocks, dtype=np.int64), lengths)
        usable_blocks = np.repeat(np.frombuffer(self._run_usable_blocks, dtype=np.int64), lengths)
        kv_usage = 1.0 - (free_blocks - np.frombuffer(self._run_blocks_taken, dtype=np.int64)) / usable_blocks
        merged = {}
        for name, code in STEP_COLUMNS:
            if name in _PER_STEP_COLUMNS:
                continue
            col = np.empty(num_rows, dtype=code)
            col[one_by_one] = np.frombuffer(getattr(self, "_" + name), dtype=code)
            col[in_runs] = (seqs if name in _DECODE_RUN_SEQS_COLUMNS else replicas if name == "replica"
                            else kv_usage if name == "kv_usage" else 0)
            merged[name] = col
        return merged

    def column_views(self) -> dict[str, np.ndarray]:
        """Every column as a numpy array, without copying what need not be copied (views of this log's arrays:
        for a reader that drops the log before anything is appended to it again, as ``StepSummary`` does)."""
        views = {name: np.frombuffer(getattr(self, "_" + name), dtype=code) for name, code in STEP_COLUMNS}
        if self._run_rows:
            views.update(self._merged_columns())
        return views

    def append_step(self, start_s: float, duration_s: float, out: Any, replica: int = 0,
                    draft_s: float = 0.0) -> None:
        """One row from a ``twin.core.scheduler_output.SchedulerOutput`` (padding rows of a static batch count as
        sequences and tokens: they cost compute). ``draft_s`` is the part of ``duration_s`` spent drafting."""
        prefill_seqs, prefill_tokens, decode_tokens = out.composition()
        num_seqs = len(out.requests)
        self.append(start_s, duration_s, num_seqs, prefill_seqs, num_seqs - prefill_seqs,
                    out.total_num_scheduled_tokens + out.num_padding, prefill_tokens, decode_tokens,
                    sum(out.num_spec_tokens), len(out.preempted), out.num_waiting_after, out.num_running_after,
                    out.kv_usage, replica, draft_s)

    def __len__(self) -> int:
        return len(self._start_s)

    def column(self, name: str) -> np.ndarray:
        """A numpy copy of one column (a copy, so the engine can keep appending)."""
        if name not in STEP_COLUMN_NAMES:
            raise KeyError(f"no step column {name!r}; columns are {', '.join(STEP_COLUMN_NAMES)}")
        self._write_runs()
        col = getattr(self, "_" + name)
        return np.frombuffer(col, dtype=col.typecode).copy() if len(col) else np.empty(0, col.typecode)

    __getitem__ = column

    @classmethod
    def from_columns(cls, columns: dict[str, np.ndarray]) -> StepRecords:
        """Step records holding ``columns`` (every column of ``STEP_COLUMNS``, of one length)."""
        out = cls()
        for name, code in STEP_COLUMNS:
            getattr(out, "_" + name).frombytes(np.asarray(columns[name]).astype(np.dtype(code)).tobytes())
        return out

    def extend(self, other: StepRecords) -> None:
        """Append all of ``other``'s rows (e.g. to merge per-replica logs)."""
        self._write_runs()
        other._write_runs()
        for name in STEP_COLUMN_NAMES:
            getattr(self, "_" + name).extend(getattr(other, "_" + name))

    @classmethod
    def concat(cls, parts: Iterable[StepRecords]) -> StepRecords:
        out = cls()
        for part in parts:
            out.extend(part)
        return out

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({name: self.column(name) for name in STEP_COLUMN_NAMES})

    def __repr__(self) -> str:
        return f"StepRecords({len(self)} steps)"


def _column_attribute(name: str) -> property:
    def read(self: StepRecords) -> array:
        self._write_runs()
        return getattr(self, "_" + name)

    return property(read, doc=f"The {name} column, complete (an ``array.array``; ``column`` gives a numpy copy).")


for _name in STEP_COLUMN_NAMES:
    setattr(StepRecords, _name, _column_attribute(_name))


REQUEST_FRAME_COLUMNS: tuple[str, ...] = (
    "request_id", "task_class", "replica", "status", "reject_reason", "arrival_s", "first_token_s", "finish_s",
    "ttft_s", "tpot_s", "e2el_s", "num_prompt_tokens", "num_output_tokens", "num_cached_tokens",
    "num_preemptions", "num_emissions", "num_spec_drafts", "num_spec_draft_tokens", "num_spec_accepted_tokens",
)


def requests_to_frame(records: Sequence[RequestRecord]) -> pd.DataFrame:
    """One row per request with its derived TTFT/TPOT/E2EL (seconds; empty where undefined)."""
    import pandas as pd

    def _id(value: Any) -> Any:
        return value if isinstance(value, (int, str)) and not isinstance(value, bool) else str(value)

    rows = {name: [] for name in REQUEST_FRAME_COLUMNS}
    for r in records:
        rows["request_id"].append(_id(r.request_id))
        rows["task_class"].append(r.task_class)
        rows["replica"].append(r.replica)
        rows["status"].append(r.status)
        rows["reject_reason"].append(r.reject_reason)
        rows["arrival_s"].append(r.arrival_s)
        rows["first_token_s"].append(r.first_token_s)
        rows["finish_s"].append(r.finish_s)
        rows["ttft_s"].append(r.ttft_s)
        rows["tpot_s"].append(r.tpot_s)
        rows["e2el_s"].append(r.e2el_s)
        rows["num_prompt_tokens"].append(r.num_prompt_tokens)
        rows["num_output_tokens"].append(r.num_output_tokens)
        rows["num_cached_tokens"].append(max(r.num_cached_tokens, 0))
        rows["num_preemptions"].append(r.num_preemptions)
        rows["num_emissions"].append(r.num_emissions)
        rows["num_spec_drafts"].append(r.num_spec_drafts)
        rows["num_spec_draft_tokens"].append(r.num_spec_draft_tokens)
        rows["num_spec_accepted_tokens"].append(r.num_spec_accepted_tokens)
    frame = pd.DataFrame(rows, columns=list(REQUEST_FRAME_COLUMNS))
    for name in ("arrival_s", "first_token_s", "finish_s", "ttft_s", "tpot_s", "e2el_s"):
        frame[name] = frame[name].astype("float64")
    return frame
