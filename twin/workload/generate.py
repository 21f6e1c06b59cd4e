"""Turn a ``WorkloadConfig`` and a seed into requests: an open-loop list or a closed-loop source.

Random streams (``twin.workload.rng.stream``): ``arrivals`` (open-loop times), ``classes`` (each new
request's or session's class), ``think`` (closed-loop think time) and, per class, ``suffix``, ``output``,
``group``, ``template``, ``sections``, ``turns``, ``gap`` and ``message``. Changing one knob therefore
leaves the others' draws alone: a new arrival rate keeps request k's class and lengths, a new output
distribution keeps every arrival and prompt.

Open loop: request ids are 0..N-1 in arrival order (ties: earlier session start, then earlier turn).
A session's turns arrive ``gap_s`` after the previous turn's arrival; turns at or after ``duration_s`` are cut.
Closed loop: ids are given in call order.
"""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path

import numpy as np

from twin.errors import TwinInputError
from twin.workload.limits import check_request_count
from twin.workload.arrivals import iter_arrival_chunks
from twin.workload.capped_open_loop import CappedOpenLoop
from twin.workload.config import WorkloadConfig, load_workload_config
from twin.workload.lengths import Buffered, TimeSampler
from twin.workload.paths import expand_path, missing_path_hint
from twin.workload.prefixes import ClassSource
from twin.workload.rng import stream
from twin.workload.spec import RequestSpec
from twin.workload.trace_data import Trace
from twin.workload.traces import read_trace
from twin.yaml_input import not_a_file

@contextlib.contextmanager
def _no_gc():
    """Bulk construction of many small acyclic tuples: the cyclic GC only costs time here."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _num_tokens(segs) -> int:
    return sum(n for _, n in segs)


def _class_sources(cfg: WorkloadConfig, seed: int, base_dir) -> tuple[list[ClassSource], Buffered]:
    sources = [ClassSource(c, seed, prefix_header=cfg.prefix_header, header_tokens=cfg.header_tokens,
                           index=i, base_dir=base_dir) for i, c in enumerate(cfg.classes)]
    shares = np.array([c.share for c in cfg.classes], dtype=float)
    probs = shares / shares.sum()
    k = len(sources)
    if k == 1:
        choose = Buffered(lambda r, n: np.zeros(n, dtype=np.int64), stream(seed, "classes"))
    else:
        choose = Buffered(lambda r, n: r.choice(k, size=n, p=probs), stream(seed, "classes"))
    return sources, choose


# ---- open loop, synthetic ------------------------------------------------------------------------------------
def open_loop_requests(cfg: WorkloadConfig, seed: int = 0, *, base_dir: str | Path | None = None
                       ) -> list[RequestSpec]:
    """Synthetic open-loop requests sorted by arrival (ties by id)."""
    with _no_gc():
        return _open_loop(cfg, seed, base_dir)


def _open_loop(cfg: WorkloadConfig, seed: int, base_dir) -> list[RequestSpec]:
    sources, choose = _class_sources(cfg, seed, base_dir)
    limit_n, limit_t = cfg.num_requests, cfg.duration_s
    any_multi = any(s.multi_turn for s in sources)
    all_at_zero = getattr(cfg.arrivals, "rate_per_s", None) == float("inf")

    arrival: list[float] = []
    start: list[int] = []
    turn: list[int] = []
    cls: list[int] = []
    n_start = 0
    last_start_t = 0.0
    for chunk in iter_arrival_chunks(cfg.arrivals, stream(seed, "arrivals"), num_requests=limit_n,
                                     duration_s=limit_t):
        done = False
        if limit_t is not None:
            inside = chunk < limit_t
            if not inside.all():
                chunk, done = chunk[inside], True
        if limit_n is not None and not any_multi:
            # single-turn requests are kept in the order drawn (the chunks do not decrease): none past the
            # limit is needed, and drawing its class would cost a chunk's worth of draws for a short workload
            chunk = chunk[:limit_n - len(arrival)]
        for t in chunk.tolist():
            c = int(choose.take())
            src = sources[c]
            arrival.append(t)
            start.append(n_start)
            turn.append(0)
            cls.append(c)
            if src.multi_turn:
                ta = t
                for j in range(1, src.draw_turns()):
                    ta += src.draw_gap()  # drawn even past duration_s: the gap stream must not depend on it
                    if limit_t is None or ta < limit_t:
                        arrival.append(ta)
                        start.append(n_start)
                        turn.append(j)
                        cls.append(c)
            n_start += 1
            last_start_t = t
        if limit_n is None:
            check_request_count(len(arrival))
        if done:
            break
        if limit_n is not None:
            if not any_multi or all_at_zero:
                if len(arrival) >= limit_n:
                    break
            # later sessions start at >= last_start_t, so requests before it are final
            elif np.count_nonzero(np.asarray(arrival) < last_start_t) >= limit_n:
                break

    order = np.lexsort((np.asarray(turn), np.asarray(start), np.asarray(arrival)))
    if limit_n is not None:
        order = order[:limit_n]

    specs: list[RequestSpec] = []
    sessions: dict[int, tuple] = {}
    next_session = 0
    for rid, d in enumerate(order.tolist()):
        src = sources[cls[d]]
        k = turn[d]
        if k == 0:
            segs, n = src.first_turn(rid)
            sid = None
            if src.multi_turn:
                sid, next_session = next_session, next_session + 1
        else:
            prev_segs, prev_n, prev_id, prev_out, sid = sessions[start[d]]
            segs, n = src.next_turn(rid, prev_segs, prev_n, prev_id, prev_out)
        out, cap = src.draw_lengths()
        generated = out if cap is None or out < cap else cap
        src.after_request(rid, segs, n, generated)
        if src.multi_turn:
            sessions[start[d]] = (segs, n, rid, generated, sid)
        specs.append(RequestSpec(rid, arrival[d], n, out, segs, src.name, src.cfg.priority, sid, k, cap,
                                 _timeout_s(cfg, src)))
    return specs


def _timeout_s(cfg: WorkloadConfig, src: ClassSource | None = None) -> float | None:
    if src is not None and src.cfg.timeout_s is not None:
        return src.cfg.timeout_s
    return cfg.timeout_s


# ---- traces ---------------------------------------------------------------------------------------------------
def load_trace(cfg: WorkloadConfig, base_dir: str | Path | None = None) -> Trace:
    t = cfg.trace
    path = expand_path(t.path, base_dir)
    kind = not_a_file(path)
    if kind is not None:
        raise TwinInputError(f"workload.trace.path: {path} is {kind}; the trace must be a file")
    if not path.is_file():
        raise TwinInputError(f"workload.trace.path: file not found: {path}{missing_path_hint(t.path, path)}")
    trace = read_trace(path, t.format, zero_output=t.zero_output, block_size=t.block_size,
                       prompt_column=t.prompt_column, output_column=t.output_column)
    if cfg.arrivals is None and not trace.has_timestamps:
        raise TwinInputError(f"workload.arrivals: is required: {path} has no timestamps")
    return trace


def select_rows(cfg: WorkloadConfig, trace: Trace) -> tuple[np.ndarray, np.ndarray | None]:
    """The trace rows the config keeps (``start_s``, ``window_s``, ``max_requests``) and, when the trace's own
    times are replayed, their arrivals (re-based to ``start_s``, divided by ``time_scale``)."""
    t = cfg.trace
    retimed = cfg.arrivals is not None
    idx = np.arange(len(trace))
    if not trace.has_timestamps and (t.start_s > 0 or t.window_s is not None):
        field = "start_s" if t.start_s > 0 else "window_s"
        raise TwinInputError(f"workload.trace.{field}: needs a trace with timestamps ({trace.path} has none)")
    if retimed and t.time_scale != 1.0:
        raise TwinInputError(f"workload.trace.time_scale: has no effect when workload.arrivals sets the times "
                             f"(got {t.time_scale:g}); change the arrival rate instead")
    arrival = None
    if trace.has_timestamps:
        ts = trace.arrival_s
        mask = ts >= t.start_s
        if t.window_s is not None:
            mask &= ts < t.start_s + t.window_s
        idx = idx[mask]
        if not retimed:
            arrival = (ts[idx] - t.start_s) / t.time_scale
    if t.max_requests is not None:
        idx = idx[: t.max_requests]
        if arrival is not None:
            arrival = arrival[: t.max_requests]
    if len(idx) == 0:
        raise TwinInputError(f"workload.trace: no rows of {trace.path} fall in start_s={t.start_s:g}, "
                             f"window_s={t.window_s}")
    return idx, arrival


class _TraceSource:
    def __init__(self, cfg: WorkloadConfig, trace: Trace, rows: np.ndarray) -> None:
        self.trace = trace
        self.rows = rows.tolist()
        self.header = cfg.header_tokens if cfg.prefix_header == "timestamp" else 0
        self.task_class = cfg.trace.task_class
        self.priority = cfg.trace.priority
        self.timeout_s = cfg.timeout_s
        self._turns: dict[int, int] = {}

    def spec(self, k: int, request_id: int, arrival_s: float) -> RequestSpec:
        i = self.rows[k]
        segs = self.trace.prompt_segments(i, request_id)
        if self.header:
            segs = ((("ts", request_id), self.header),) + segs
        sid = self.trace.session_ids[i] if self.trace.session_ids is not None else None
        turn = 0
        if sid is not None:
            turn = self._turns.get(sid, 0)
            self._turns[sid] = turn + 1
        return RequestSpec(request_id, float(arrival_s), _num_tokens(segs), int(self.trace.output_tokens[i]),
                           segs, self.task_class, self.priority, sid, turn, timeout_s=self.timeout_s)


def trace_requests(cfg: WorkloadConfig, trace: Trace, seed: int = 0) -> list[RequestSpec]:
    """Open-loop requests from a trace: its own (scaled) times, or the config's arrival process."""
    rows, arrival = select_rows(cfg, trace)
    if arrival is None:  # retimed: the k-th kept row arrives at the process's k-th time
        need = len(rows) if cfg.num_requests is None else min(len(rows), cfg.num_requests)
        parts, count = [], 0
        for chunk in iter_arrival_chunks(cfg.arrivals, stream(seed, "arrivals"), num_requests=need,
                                         duration_s=cfg.duration_s):
            parts.append(chunk)
            count += len(chunk)
            if count >= need or (cfg.duration_s is not None and len(chunk) and chunk[-1] >= cfg.duration_s):
                break
        arrival = np.concatenate(parts)[:need] if parts else np.zeros(0)
        rows = rows[: len(arrival)]
    if cfg.duration_s is not None:
        keep = int(np.searchsorted(arrival, cfg.duration_s, side="left"))
        rows, arrival = rows[:keep], arrival[:keep]
    if cfg.num_requests is not None:
        rows, arrival = rows[: cfg.num_requests], arrival[: cfg.num_requests]
    check_request_count(len(arrival))
    src = _TraceSource(cfg, trace, rows)
    with _no_gc():
        return [src.spec(k, k, t) for k, t in enumerate(arrival.tolist())]


# ---- closed loop -----------------------------------------------------------------------------------------------
class _User:
    __slots__ = ("source", "turns_left", "segments", "num_tokens", "last_id", "last_output", "session_id", "turn")

    def __init__(self) -> None:
        self.source = None
        self.turns_left = 0
        self.segments = ()
        self.num_tokens = 0
        self.last_id = -1
        self.last_output = 0
        self.session_id = None
        self.turn = 0


class ClosedLoopWorkload:
    """``concurrency`` users, each with one request in flight.

    The engine calls ``next_request(u, now_s)`` for every user ``u`` at the start and again when ``u``'s
    previous request finishes. A user's first request arrives at ``now_s``; a later one after a think time
    (``think_time_s``; inside a multi-turn session the class's ``gap_s``). Returns None once the stop rule
    is met: ``num_requests`` issued, an arrival at or after ``duration_s``, or the trace's rows used up.
    Draws are deterministic given the seed and the order of calls."""

    def __init__(self, cfg: WorkloadConfig | dict, seed: int = 0, *, base_dir: str | Path | None = None,
                 trace: Trace | None = None) -> None:
        cfg = load_workload_config(cfg)
        if not cfg.closed_loop:
            raise TwinInputError(f"workload.arrivals.process: must be closed_loop for a closed-loop workload "
                                 f"(got {getattr(cfg.arrivals, 'process', None)!r})")
        self.config = cfg
        self.seed = int(seed)
        self.concurrency: int = cfg.arrivals.concurrency
        self.duration_s: float | None = cfg.duration_s
        self.num_requests: int | None = cfg.num_requests
        # users past num_requests never send one (twin.sim.simulate starts only the first max_users)
        self.max_users: int | None = cfg.num_requests
        self._base_dir = base_dir
        self._trace = trace
        if cfg.trace is not None and trace is None:
            self._trace = load_trace(cfg, base_dir)
        self.reset()

    def reset(self) -> None:
        """Back to the start: the same seed gives the same requests again for the same calls."""
        cfg = self.config
        self.issued = 0
        self._sessions = 0
        self._users: dict[int, _User] = {}
        self._think = Buffered(TimeSampler(cfg.arrivals.think_time_s).sample, stream(self.seed, "think"))
        if self._trace is not None:
            rows, _ = select_rows(cfg, self._trace)
            self._rows = _TraceSource(cfg, self._trace, rows)
            self._sources = None
        else:
            self._rows = None
            self._sources, self._choose = _class_sources(cfg, self.seed, self._base_dir)

    @property
    def is_closed_loop(self) -> bool:
        return True

    def next_request(self, user_index: int, now_s: float) -> RequestSpec | None:
        if not 0 <= user_index < self.concurrency:
            raise ValueError(f"user_index must be in [0, {self.concurrency}) (got {user_index})")
        if self.num_requests is not None and self.issued >= self.num_requests:
            return None
        if self._rows is not None and self.issued >= len(self._rows.rows):
            return None
        user = self._users.get(user_index)
        first = user is None
        if first:
            user = self._users[user_index] = _User()
        continuing = user.turns_left > 0
        if first:
            delay = 0.0
        elif continuing:
            delay = user.source.draw_gap()
        else:
            delay = float(self._think.take())
        arrival = float(now_s) + delay
        if self.duration_s is not None and arrival >= self.duration_s:
            return None
        check_request_count(self.issued + 1)
        rid = self.issued
        self.issued += 1
        if self._rows is not None:
            return self._rows.spec(rid, rid, arrival)
        if continuing:
            src = user.source
            segs, n = src.next_turn(rid, user.segments, user.num_tokens, user.last_id, user.last_output)
            user.turn += 1
        else:
            src = self._sources[int(self._choose.take())]
            user.source = src
            user.turns_left = src.draw_turns()
            user.turn = 0
            user.session_id = None
            if src.multi_turn:
                user.session_id = self._next_session_id()
            segs, n = src.first_turn(rid)
        user.turns_left -= 1
        out, cap = src.draw_lengths()
        generated = out if cap is None or out < cap else cap
        src.after_request(rid, segs, n, generated)
        user.segments, user.num_tokens, user.last_id, user.last_output = segs, n, rid, generated
        return RequestSpec(rid, arrival, n, out, segs, src.name, src.cfg.priority, user.session_id, user.turn,
                           cap, _timeout_s(self.config, src))

    def _next_session_id(self) -> int:
        n = self._sessions
        self._sessions = n + 1
        return n


Workload = "list[RequestSpec] | ClosedLoopWorkload"  # what build_workload returns


# ---- entry point ------------------------------------------------------------------------------------------------
def build_workload(cfg: WorkloadConfig | dict, seed: int = 0, *, base_dir: str | Path | None = None
                   ) -> list[RequestSpec] | ClosedLoopWorkload | CappedOpenLoop:
    """The workload a config describes: open loop -> a list of ``RequestSpec`` sorted by arrival, or with
    ``arrivals.max_concurrency`` a ``CappedOpenLoop`` over that list; ``arrivals.process: closed_loop`` ->
    a ``ClosedLoopWorkload``. Same config and seed, same requests. ``base_dir`` resolves relative file paths
    (e.g. the scenario file's folder)."""
    cfg = load_workload_config(cfg)
    if cfg.closed_loop:
        return ClosedLoopWorkload(cfg, seed, base_dir=base_dir)
    specs = open_loop_specs(cfg, seed, base_dir=base_dir)
    return CappedOpenLoop(specs, cfg.max_concurrency) if cfg.max_concurrency else specs


def open_loop_specs(cfg: WorkloadConfig | dict, seed: int = 0, *, base_dir: str | Path | None = None
                    ) -> list[RequestSpec]:
    """An open-loop workload's requests at their due times (any ``max_concurrency`` cap not applied)."""
    cfg = load_workload_config(cfg)
    if cfg.trace is not None:
        return trace_requests(cfg, load_trace(cfg, base_dir), seed)
    return open_loop_requests(cfg, seed, base_dir=base_dir)
