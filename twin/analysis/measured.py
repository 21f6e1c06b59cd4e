"""``twin diagnose``: measured per-request results in, the likely causes of their latencies out.

Input: a ``vllm bench serve`` result JSON saved with ``--save-result --save-detailed`` (per-request arrays
``input_lens, output_lens, ttfts, latencies``, plus ``start_times`` and optionally ``itls``), or a CSV with one
row per request: arrival, first-token and finish times (seconds) and prompt / output token counts (the twin's
``--requests-out`` table reads as it is).

What it looks for, from the measurements alone:

* **a concurrency cap** (``max_num_seqs``): requests queue while the number of requests *decoding* (between
  first token and finish) sits at a ceiling below the number in flight. A burst of arrivals against a cap
  gives the TTFT staircase: waits at 1, 2, 3 ... times the service time, the cap's worth of requests per step;
* **queueing against saturated service**: requests queue without such a ceiling; the fitted twin's verdict
  (``twin.analysis.causes``) says whether the steps are compute- or memory-bound, or the token budget binds;
* **KV-capacity preemption**: mid-stream stalls in the inter-token latencies (a preempted request waits and
  recomputes), confirmed when the fitted twin preempts too;
* **a prefix-cache hit rate below what the traffic allows**: the measured hit rate (from the file or
  ``--hit-rate``) against the scenario traffic's oracle (``twin.analysis.prefixes``), or, without one, whether
  unqueued TTFTs look like a full prefill or a cached one.

Then it fits the twin to the measurements: the measured requests are replayed (closed-loop at the benchmark's
``max_concurrency``, else at their measured arrival times) through the scenario's deployment at each candidate
``max_num_seqs`` (powers of two up to the offered concurrency, plus the ceiling measured); the step times are
scaled so the simulated median TPOT matches the measured one (the server may be faster or slower than the cost
model); the candidate whose TTFT distribution lies closest to the measured one (mean absolute quantile
difference, relative to the mean measured latency) wins. Confidence: the score margin to the runner-up, and a
Laplace pseudo-likelihood ratio ``n * ln(d_second / d_best)``.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from twin.errors import TwinInputError
from twin.workload.spec import RequestSpec

BENCH_ARRAYS = ("input_lens", "output_lens", "ttfts", "latencies")
QUEUED_SHARE = 0.2        # requests queue for at least this share of the measured span
PINNED_SHARE = 0.6        # ... while the decoding count sits at its ceiling this share of that time
WAVE_TOLERANCE = 0.15     # a TTFT within this many service times of a multiple of it is "on a step"
STALL_FACTOR = 10.0       # an inter-token gap this many times the median ITL is a stall
CAP_BINDS = 0.10          # a fitted cap "binds" when it held (with a queue) this share of the simulated busy time
QUANTILES = (np.arange(100) + 0.5) / 100

CSV_ALIASES: dict[str, tuple[str, ...]] = {
    "arrival": ("arrival_s", "arrival", "arrival_time", "arrival_time_s", "start_time", "start_s", "send_time"),
    "first_token": ("first_token_s", "first_token", "first_token_time", "first_token_time_s"),
    "finish": ("finish_s", "finish", "finish_time", "end_time", "end_s", "completion_time"),
    "ttft": ("ttft_s", "ttft"),
    "e2el": ("e2el_s", "latency_s", "latency", "e2el"),
    "input": ("num_prompt_tokens", "input_tokens", "input_len", "prompt_tokens", "input_lens"),
    "output": ("num_output_tokens", "output_tokens", "output_len", "output_lens", "generated_tokens"),
}


# --------------------------------------------------------------------------------------------------------
# reading measurements
# --------------------------------------------------------------------------------------------------------
@dataclass
class Measured:
    """Per-request measurements (seconds, arrivals re-based to 0), completed requests only."""

    source: str
    arrival_s: np.ndarray
    ttft_s: np.ndarray
    e2el_s: np.ndarray
    input_lens: np.ndarray
    output_lens: np.ndarray
    itls: list[np.ndarray] | None = None
    num_failed: int = 0
    max_concurrency: int | None = None
    request_rate: float | None = None
    hit_rate: float | None = None
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    @property
    def first_token_s(self) -> np.ndarray:
        return self.arrival_s + self.ttft_s

    @property
    def finish_s(self) -> np.ndarray:
        return self.arrival_s + self.e2el_s

    @property
    def tpot_s(self) -> np.ndarray:
        """Per request with more than one output token."""
        m = self.output_lens > 1
        return (self.e2el_s[m] - self.ttft_s[m]) / (self.output_lens[m] - 1)


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _rate(v: Any) -> float | None:
    if isinstance(v, str) and v.strip().lower() in ("inf", "infinity"):
        return math.inf
    f = _number(v)
    return f if f is not None and f > 0 else None


def _closed_loop_arrivals(ttft: np.ndarray, e2el: np.ndarray, concurrency: int) -> np.ndarray:
    """Arrivals of a ``--request-rate inf --max-concurrency C`` run: request i starts when a slot frees."""
    slots = [0.0] * min(concurrency, len(e2el))
    heapq.heapify(slots)
    out = np.empty(len(e2el))
    for i, lat in enumerate(e2el):
        t = heapq.heappop(slots)
        out[i] = t
        heapq.heappush(slots, t + float(lat))
    return out


def measured_from_bench(doc: Any, source: str = "bench JSON") -> Measured:
    """A ``vllm bench serve`` result (``--save-result --save-detailed``) or a twin result JSON."""
    if not isinstance(doc, Mapping):
        raise TwinInputError(f"{source}: expected a JSON object (a vllm bench serve result), got "
                             f"{type(doc).__name__}")
    if "variants" in doc and "input_lens" not in doc:
        raise TwinInputError(f"{source}: holds several variants ({', '.join(doc['variants'])}); write one run "
                             f"per file (twin run --variant NAME --json FILE)")
    doc = dict(doc)
    derived_latency = False
    if not isinstance(doc.get("latencies"), list):
        # recent vllm bench serve results carry no latencies: e2els in some versions, else TTFT + the ITLs
        if isinstance(doc.get("e2els"), list):
            doc["latencies"] = doc["e2els"]
        elif isinstance(doc.get("itls"), list) and isinstance(doc.get("ttfts"), list) \
                and len(doc["itls"]) == len(doc["ttfts"]):
            lat = []
            for i, (t, row) in enumerate(zip(doc["ttfts"], doc["itls"], strict=True)):
                gaps = [_number(x) for x in row] if isinstance(row, list) else [None]
                if _number(t) is None or any(g is None or g < 0 for g in gaps):
                    raise TwinInputError(f"{source}: itls[{i}] must be a list of seconds >= 0")
                lat.append(float(t) + sum(gaps))
            doc["latencies"] = lat
            derived_latency = True
    for key in BENCH_ARRAYS:
        if not isinstance(doc.get(key), list):
            extra = " (or 'e2els', or 'itls' to add to the TTFTs)" if key == "latencies" else ""
            raise TwinInputError(f"{source}: '{key}' is missing{extra}: diagnosis needs the per-request arrays "
                                 f"{', '.join(BENCH_ARRAYS)} (vllm bench serve --save-result --save-detailed)")
    n = len(doc["input_lens"])
    if n == 0:
        raise TwinInputError(f"{source}: 'input_lens' is empty: no requests to diagnose")
    for key in (*BENCH_ARRAYS, "start_times", "itls", "errors"):
        if doc.get(key) is not None:
            if not isinstance(doc[key], list):
                raise TwinInputError(f"{source}: '{key}' must be a list (got {type(doc[key]).__name__})")
            if len(doc[key]) != n:
                raise TwinInputError(f"{source}: '{key}' has {len(doc[key])} entries, 'input_lens' has {n}")
    cols: dict[str, np.ndarray] = {}
    for key in (*BENCH_ARRAYS, "start_times"):
        if doc.get(key) is None:
            continue
        vals = doc[key]
        arr = np.empty(n)
        for i, v in enumerate(vals):
            f = _number(v)
            if f is None or f < 0:
                raise TwinInputError(f"{source}: {key}[{i}] = {v!r}: must be a number >= 0")
            arr[i] = f
        cols[key] = arr
    errors = doc.get("errors") or [""] * n
    ok = (cols["output_lens"] > 0) & np.array([not e for e in errors], bool)
    bad = np.flatnonzero(ok & (cols["ttfts"] > cols["latencies"] + 1e-9))
    if bad.size:
        i = int(bad[0])
        raise TwinInputError(f"{source}: ttfts[{i}] = {cols['ttfts'][i]:g} s exceeds latencies[{i}] = "
                             f"{cols['latencies'][i]:g} s: a first token cannot come after the last")
    notes: list[str] = ["latencies derived as TTFT + the sum of the ITLs"] if derived_latency else []
    rate = _rate(doc.get("request_rate"))
    max_c = doc.get("max_concurrency")
    max_c = int(max_c) if isinstance(max_c, (int, float)) and not isinstance(max_c, bool) and max_c >= 1 else None
    if "start_times" in cols:
        start = cols["start_times"]
    elif max_c is not None and (rate is None or math.isinf(rate)):
        start = _closed_loop_arrivals(cols["ttfts"], cols["latencies"], max_c)
        notes.append(f"no start_times: arrivals reconstructed from max_concurrency = {max_c} (each request "
                     f"starts when a slot frees)")
    elif rate is not None and math.isfinite(rate):
        start = np.arange(n) / rate
        notes.append(f"no start_times: arrivals spread evenly at request_rate = {rate:g} req/s")
    else:
        raise TwinInputError(f"{source}: needs 'start_times' (per-request send times), or 'max_concurrency' "
                             f"with an unbounded request rate, or a finite 'request_rate'")
    itls = None
    if doc.get("itls") is not None:
        itls = []
        for i, row in enumerate(doc["itls"]):
            if not isinstance(row, list):
                raise TwinInputError(f"{source}: itls[{i}] must be a list of seconds")
            if ok[i]:
                itls.append(np.asarray([float(x) for x in row if _number(x) is not None], float))
    hit = _number(doc.get("prefix_cache_hit_rate"))
    twin = doc.get("twin")
    if hit is None and isinstance(twin, Mapping):
        hit = _number(twin.get("prefix_cache_hit_rate"))
    failed = int(n - ok.sum())
    if failed:
        notes.append(f"{failed} failed request(s) left out")
    if not ok.any():
        raise TwinInputError(f"{source}: every request failed: nothing to diagnose")
    t0 = float(start[ok].min())
    return Measured(source, start[ok] - t0, cols["ttfts"][ok], cols["latencies"][ok],
                    cols["input_lens"][ok].astype(np.int64), cols["output_lens"][ok].astype(np.int64), itls,
                    failed, max_c, rate, hit, notes)


def _column(frame: Any, role: str) -> str | None:
    lower = {c.lower(): c for c in frame.columns}
    return next((lower[a] for a in CSV_ALIASES[role] if a in lower), None)


def measured_from_csv(path: Path) -> Measured:
    import pandas as pd

    source = str(path)
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise TwinInputError(f"{source}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    cols = {role: _column(frame, role) for role in CSV_ALIASES}
    for role in ("arrival", "input", "output"):
        if cols[role] is None:
            raise TwinInputError(f"{source}: no {role} column (accepted names: {', '.join(CSV_ALIASES[role])})")
    if cols["first_token"] is None and cols["ttft"] is None:
        raise TwinInputError(f"{source}: no first-token column (accepted names: "
                             f"{', '.join(CSV_ALIASES['first_token'] + CSV_ALIASES['ttft'])})")
    if cols["finish"] is None and cols["e2el"] is None:
        raise TwinInputError(f"{source}: no finish column (accepted names: "
                             f"{', '.join(CSV_ALIASES['finish'] + CSV_ALIASES['e2el'])})")
    if len(frame) == 0:
        raise TwinInputError(f"{source}: no rows")

    def numeric(role: str) -> np.ndarray:
        values = pd.to_numeric(frame[cols[role]], errors="coerce").to_numpy(float)
        return values

    arrival = numeric("arrival")
    bad = np.flatnonzero(~np.isfinite(arrival))
    if bad.size:
        raise TwinInputError(f"{source}, row {int(bad[0]) + 2}: {cols['arrival']} = "
                             f"{frame[cols['arrival']].iloc[int(bad[0])]!r}: must be a number (seconds)")
    first = numeric("first_token") if cols["first_token"] else arrival + numeric("ttft")
    finish = numeric("finish") if cols["finish"] else arrival + numeric("e2el")
    inp, out = numeric("input"), numeric("output")
    ok = np.isfinite(first) & np.isfinite(finish) & np.isfinite(out) & (np.nan_to_num(out) > 0)
    if "status" in frame.columns:
        ok &= frame["status"].astype(str).str.lower().isin(["finished", "ok", "success", "completed"]).to_numpy()
    for i in np.flatnonzero(ok):
        if not (math.isfinite(inp[i]) and inp[i] >= 1):
            raise TwinInputError(f"{source}, row {i + 2}: {cols['input']} = {frame[cols['input']].iloc[i]!r}: "
                                 f"must be a token count >= 1")
        if first[i] < arrival[i] - 1e-9 or finish[i] < first[i] - 1e-9:
            raise TwinInputError(f"{source}, row {i + 2}: times out of order (arrival {arrival[i]:g}, first "
                                 f"token {first[i]:g}, finish {finish[i]:g}): need arrival <= first token <= finish")
    failed = int((~ok).sum())
    if not ok.any():
        raise TwinInputError(f"{source}: no completed request (every row lacks a first token or finish time)")
    t0 = float(arrival[ok].min())
    notes = [f"{failed} failed or unfinished row(s) left out"] if failed else []
    return Measured(source, arrival[ok] - t0, first[ok] - arrival[ok], finish[ok] - arrival[ok],
                    inp[ok].astype(np.int64), out[ok].astype(np.int64), None, failed, None, None, None, notes)


def load_measured(path: str | Path) -> Measured:
    """Read RESULTS: ``.json`` (a bench result) or ``.csv`` (per-request times)."""
    p = Path(path)
    if not p.is_file():
        raise TwinInputError(f"{path}: no such file")
    if p.suffix.lower() == ".csv" or p.name.lower().endswith(".csv.gz"):
        return measured_from_csv(p)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise TwinInputError(f"{path}: not a text file (give a bench JSON or a CSV)") from None
    except json.JSONDecodeError as exc:
        raise TwinInputError(f"{path}, line {exc.lineno}: not valid JSON ({exc.msg})") from None
    return measured_from_bench(doc, str(path))


# --------------------------------------------------------------------------------------------------------
# measurements alone
# --------------------------------------------------------------------------------------------------------
def _counts(starts: np.ndarray, ends: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """How many intervals [start, end) hold at each grid time (an end at t does not count at t)."""
    s = np.sort(starts)
    e = np.sort(ends)
    return np.searchsorted(s, grid, side="right") - np.searchsorted(e, grid, side="right")


@dataclass
class Profile:
    """What the measurements say on their own."""

    span_s: float
    ttft_floor_s: float            # the fastest TTFT: prefill with no queue
    service_s: float               # a request's time on the server: floor + median decode time
    max_in_flight: int
    max_decoding: int
    queued_share: float            # share of the span with at least one request queued
    pinned_share: float            # share of the queued time with max_decoding requests decoding
    mean_decoding_when_queued: float
    mean_queued: float
    waves: dict[int, int]          # TTFT level (multiples of the service time) -> requests on it
    on_step_share: float           # share of requests whose TTFT is on a level
    burst_size: int                # requests in the opening burst
    burst_fast: int                # ... of which were served at once
    stall_requests: int            # requests with a mid-stream stall
    max_stall_s: float
    median_itl_s: float | None
    median_tpot_s: float | None
    grid: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0))
    in_flight: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0))
    decoding: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0))

    @property
    def staircase(self) -> bool:
        return self.on_step_share >= 0.8 and any(k >= 1 for k in self.waves) and self.queued_share >= QUEUED_SHARE

    @property
    def cap_evidence(self) -> bool:
        return (self.queued_share >= QUEUED_SHARE and self.pinned_share >= PINNED_SHARE
                and self.max_decoding < self.max_in_flight)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in ("grid", "in_flight", "decoding")} | {
            "staircase": self.staircase, "cap_evidence": self.cap_evidence}


def profile(m: Measured) -> Profile:
    arrival, first, finish = m.arrival_s, m.first_token_s, m.finish_s
    floor = float(m.ttft_s.min())
    decode = m.e2el_s - m.ttft_s
    service = floor + float(np.median(decode))
    # queued: waiting beyond the fastest TTFT (the prefill itself is not queueing)
    waited = m.ttft_s > 2 * floor + 0.05 * service
    q_start, q_end = arrival[waited] + floor, first[waited]
    grid = np.unique(np.concatenate([arrival, first, finish, q_start]))
    in_flight = _counts(arrival, finish, grid)
    decoding = _counts(first, finish, grid)
    queued = _counts(q_start, q_end, grid) if waited.any() else np.zeros(grid.size, np.int64)
    dt = np.diff(grid)
    span = float(grid[-1] - grid[0]) if grid.size > 1 else 0.0
    qmask = queued[:-1] > 0
    q_time = float(dt[qmask].sum())
    max_dec = int(decoding.max()) if decoding.size else 0
    pinned = float(dt[qmask & (decoding[:-1] >= max_dec)].sum()) / q_time if q_time > 0 else 0.0
    mean_dec_q = float((decoding[:-1] * dt)[qmask].sum() / q_time) if q_time > 0 else 0.0
    mean_q = float((queued[:-1] * dt).sum() / span) if span > 0 else 0.0
    k = (m.ttft_s - floor) / service if service > 0 else np.zeros(len(m))
    near = np.abs(k - np.round(k)) <= WAVE_TOLERANCE
    waves = dict(sorted(Counter(int(x) for x in np.round(k[near])).items()))
    burst = arrival <= arrival.min() + 0.1 * service
    burst_fast = int(((k < 0.5) & burst).sum())
    stall_req, max_stall, med_itl = 0, 0.0, None
    if m.itls:
        flat = np.concatenate([x for x in m.itls if x.size] or [np.empty(0)])
        flat = flat[flat > 0]
        if flat.size:
            med_itl = float(np.median(flat))
            limit = max(STALL_FACTOR * med_itl, 2 * floor)
            stalls = [float(x.max()) for x in m.itls if x.size and x.max() > limit]
            stall_req = len(stalls)
            max_stall = max(stalls, default=0.0)
    tpot = m.tpot_s
    return Profile(span, floor, service, int(in_flight.max()), max_dec, q_time / span if span > 0 else 0.0, pinned,
                   mean_dec_q, mean_q, waves, float(near.mean()), int(burst.sum()), burst_fast, stall_req,
                   max_stall, med_itl, float(np.median(tpot)) if tpot.size else None, grid, in_flight, decoding)


# --------------------------------------------------------------------------------------------------------
# fitting the twin
# --------------------------------------------------------------------------------------------------------
class ScaledCostModel:
    """A cost model whose step times are ``factor`` times another's (the server's speed relative to it)."""

    def __init__(self, base: Any, factor: float) -> None:
        self.base = base
        self.factor = float(factor)
        self.name = f"{getattr(base, 'name', 'cost')} x{factor:.3g}"

    def step_time_s(self, step: Any) -> float:
        return self.factor * self.base.step_time_s(step)

    def explain(self, step: Any) -> dict[str, float]:
        explain = getattr(self.base, "explain", None)
        if explain is None:
            return {"total_s": self.step_time_s(step)}
        return {k: self.factor * v for k, v in explain(step).items()}


class _ClosedReplay:
    """The measured requests, handed out in order to ``concurrency`` closed-loop streams."""

    def __init__(self, specs: list[RequestSpec], concurrency: int) -> None:
        self.specs = specs
        self.concurrency = concurrency
        self._next = 0

    def next_request(self, user_index: int, now_s: float) -> RequestSpec | None:
        if self._next >= len(self.specs):
            return None
        s = self.specs[self._next]
        self._next += 1
        return dataclasses.replace(s, arrival_s=float(now_s))


def measured_specs(m: Measured, shared_prefix_tokens: int = 0) -> list[RequestSpec]:
    """The measured requests as specs, in arrival order. A result file carries no prompt content, so each
    prompt is unique, except for a first ``shared_prefix_tokens`` tokens common to all of them (a system
    prompt, or ``vllm bench serve --random-prefix-len``) where a prompt is longer than that."""
    order = np.argsort(m.arrival_s, kind="stable")
    out = []
    for j, i in enumerate(order):
        p = int(m.input_lens[i])
        if 0 < shared_prefix_tokens < p:
            segs = ((("shared-prefix",), shared_prefix_tokens), (("measured", j), p - shared_prefix_tokens))
        else:
            segs = ((("measured", j), p),)
        out.append(RequestSpec(j, float(m.arrival_s[i]), p, int(m.output_lens[i]), segs))
    return out


def scenario_shared_prefix(body: Any) -> tuple[int, str | None]:
    """The shared prefix the scenario's traffic gives every prompt (one class, one prefix group, no unique
    header in front), and a note when the scenario shares prefixes in a way a result file cannot replay."""
    wl = body.workload
    if not wl.classes:
        return 0, None
    shared = [c for c in wl.classes if c.prompt.shared_prefix_tokens or c.prompt.few_shot]
    if not shared:
        return 0, None
    if len(wl.classes) == 1 and wl.prefix_header != "timestamp" and wl.classes[0].prompt.num_prefix_groups == 1 \
            and wl.classes[0].prompt.few_shot is None and wl.prefix_header == "none":
        return wl.classes[0].prompt.shared_prefix_tokens, None
    return 0, ("the scenario's prompts share prefixes in a way the result file cannot say (several classes or "
               "prefix groups); the fit replays unique prompts: give --shared-prefix-tokens N if all measured "
               "prompts began with the same N tokens")


def ttft_distance(measured_s: np.ndarray, simulated_s: np.ndarray, scale_s: float) -> float:
    """Mean absolute difference of the two TTFT distributions' percentiles, relative to ``scale_s``."""
    if simulated_s.size == 0:
        return math.inf
    a = np.quantile(measured_s, QUANTILES)
    b = np.quantile(simulated_s, QUANTILES)
    return float(np.abs(a - b).mean()) / scale_s if scale_s > 0 else math.inf


@dataclass
class Candidate:
    max_num_seqs: int
    label: str
    uncapped: bool
    speed_factor: float
    score: float
    sim_ttft_s: np.ndarray = field(repr=False)
    sim_median_tpot_s: float | None = None
    num_preemptions: int = 0
    cap_share: float = 0.0        # share of the simulated busy time the cap held with a queue
    prefix_caching: bool = True
    sim_hit_rate: float | None = None
    result: Any = field(default=None, repr=False)
    deployment: Any = field(default=None, repr=False)

    @property
    def binds(self) -> bool:
        """The cap holds in its own simulation (else it is as good as no cap)."""
        return not self.uncapped and self.cap_share >= CAP_BINDS

    def as_dict(self) -> dict[str, Any]:
        return {"max_num_seqs": self.max_num_seqs, "label": self.label, "uncapped": self.uncapped,
                "binds": self.binds, "cap_share": self.cap_share, "prefix_caching": self.prefix_caching,
                "sim_hit_rate": self.sim_hit_rate, "speed_factor": self.speed_factor, "score": self.score,
                "sim_median_tpot_ms": None if self.sim_median_tpot_s is None else self.sim_median_tpot_s * 1e3,
                "num_preemptions": self.num_preemptions}


@dataclass
class Fit:
    candidates: list[Candidate]
    best: Candidate
    runner_up: Candidate | None   # the best candidate with another cap conclusion
    margin: float                 # 1 - d_best / d_runner_up
    log_likelihood_ratio: float   # n ln(d_runner_up / d_best), distances floored
    confidence: str               # high | medium | low
    closed_loop: bool
    concurrency: int | None
    prefix_alternative: Candidate | None = None   # the best candidate with the other prefix-caching setting
    prefix_margin: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"candidates": [c.as_dict() for c in self.candidates], "best": self.best.as_dict(),
                "runner_up": self.runner_up.as_dict() if self.runner_up else None, "margin": self.margin,
                "log_likelihood_ratio": self.log_likelihood_ratio, "confidence": self.confidence,
                "closed_loop": self.closed_loop, "concurrency": self.concurrency,
                "prefix_alternative": self.prefix_alternative.as_dict() if self.prefix_alternative else None,
                "prefix_margin": self.prefix_margin}


def _simulate(specs: list[RequestSpec], body: Any, dep: Any, closed: int | None, factor: float, base_dir: Any):
    from twin.sim.deployment import make_router
    from twin.core.schedulers import make_scheduler
    from twin.sim.simulate import simulate
    from twin.spec_decode import speculator_factory

    traffic = _ClosedReplay(specs, closed) if closed else specs
    make_spec = None
    if body.speculative_decoding is not None and dep.drafter is not None:
        make_spec = speculator_factory(body.speculative_decoding, dep.drafter, body.seed)
    return simulate(traffic, lambda i: make_scheduler(dep.scheduler_config, dep.num_gpu_blocks),
                    lambda i: ScaledCostModel(dep.cost_model_factory(), factor),
                    num_replicas=body.deployment.replicas, router=make_router(body.deployment.router),
                    make_speculator=make_spec, max_time_s=body.max_sim_time_s)


def _sim_arrays(result: Any) -> tuple[np.ndarray, float | None]:
    from twin.results.records import FINISHED

    fin = [r for r in result.requests if r.status == FINISHED]
    ttft = np.array([r.ttft_s for r in fin], float)
    tpot = [r.tpot_s for r in fin if r.tpot_s is not None]
    return ttft, float(np.median(tpot)) if tpot else None


def candidate_caps(offered: int, measured_ceiling: int | None, extra: Sequence[int] = ()) -> list[int]:
    caps = {1}
    c = 1
    while c < offered:
        c *= 2
        caps.add(c)
    if measured_ceiling:
        caps.add(int(measured_ceiling))
    caps.update(int(x) for x in extra if x >= 1)
    return sorted(caps)


def _confidence(margin: float, score: float) -> str:
    if margin >= 0.5 and score <= 0.15:
        return "high"
    if margin >= 0.2 and score <= 0.3:
        return "medium"
    return "low"


def fit_max_num_seqs(m: Measured, prof: Profile, body: Any, base_dir: Path | None = None,
                     candidates: Sequence[int] | None = None, fit_speed: bool = True,
                     shared_prefix_tokens: int = 0) -> Fit:
    """Simulate the measured requests at each candidate ``max_num_seqs`` (and, when the replayed prompts share
    a prefix, with prefix caching on and off); the best TTFT match wins."""
    from twin.sim.deployment import resolve_deployment
    from twin.analysis.causes import CONCURRENCY_CAP as CAP_KEY
    from twin.analysis.causes import limit_shares

    closed = m.max_concurrency
    offered = closed or prof.max_in_flight
    caps = list(candidates) if candidates else candidate_caps(offered, prof.max_decoding if prof.cap_evidence
                                                             else None)
    specs = measured_specs(m, shared_prefix_tokens)
    scale = float(m.e2el_s.mean())
    measured_tpot = prof.median_tpot_s
    caching_options = [body.server.enable_prefix_caching]
    if shared_prefix_tokens > 0:
        caching_options = [True, False]
    results: list[Candidate] = []
    for caching in caching_options:
        seen_uncapped = False
        for cap in sorted(set(caps)):
            uncapped = cap >= offered
            if uncapped and seen_uncapped:
                continue  # every cap at or above the offered concurrency behaves the same
            seen_uncapped = seen_uncapped or uncapped
            updates: dict[str, Any] = {"max_num_seqs": cap, "enable_prefix_caching": caching}
            if body.server.max_num_batched_tokens is not None and body.server.max_num_batched_tokens < cap:
                updates["max_num_batched_tokens"] = cap
            cbody = body.model_copy(update={"server": body.server.model_copy(update=updates)})
            try:
                dep = resolve_deployment(cbody, base_dir)
            except TwinInputError as exc:
                raise TwinInputError(f"fitting max_num_seqs = {cap}: {exc}") from None
            factor = 1.0
            result = _simulate(specs, cbody, dep, closed, factor, base_dir)
            ttft, tpot = _sim_arrays(result)
            if fit_speed and measured_tpot and tpot and abs(measured_tpot / tpot - 1.0) > 0.01:
                factor = measured_tpot / tpot
                result = _simulate(specs, cbody, dep, closed, factor, base_dir)
                ttft, tpot = _sim_arrays(result)
            label = f">= {offered} (no cap below the load)" if uncapped else str(cap)
            if len(caching_options) > 1:
                label += f", prefix caching {'on' if caching else 'off'}"
            share = float(limit_shares(result, dep.scheduler_config).get(CAP_KEY, 0.0))
            hits = None
            if caching and result.prefix_cache_query_tokens:
                hits = result.prefix_cache_hit_tokens / result.prefix_cache_query_tokens
            results.append(Candidate(cap, label, uncapped, factor, ttft_distance(m.ttft_s, ttft, scale), ttft,
                                     tpot, int(result.num_preemptions or 0), share, caching, hits, result, dep))
    ranked = sorted(results, key=lambda c: (c.score, c.max_num_seqs, not c.prefix_caching))
    best = ranked[0]
    same = [c for c in ranked[1:] if c.prefix_caching == best.prefix_caching]
    # the runner-up leads to another conclusion: another binding cap, or (when the best cap binds) no cap
    if best.binds:
        others = [c for c in same if c.max_num_seqs != best.max_num_seqs]
    else:
        others = [c for c in same if c.binds]
    runner = others[0] if others else None
    floor = 0.005
    if runner is None:
        margin, llr = 1.0, math.inf
    else:
        margin = max(0.0, 1.0 - best.score / runner.score) if runner.score > 0 else 0.0
        llr = len(m) * math.log(max(runner.score, floor) / max(best.score, floor))
    alt = next((c for c in ranked if c.prefix_caching != best.prefix_caching), None)
    alt_margin = (max(0.0, 1.0 - best.score / alt.score) if alt is not None and alt.score > 0 else None)
    return Fit(results, best, runner, margin, llr, _confidence(margin, best.score), bool(closed), closed, alt,
               alt_margin)


# --------------------------------------------------------------------------------------------------------
# causes
# --------------------------------------------------------------------------------------------------------
CONCURRENCY_CAP = "concurrency_cap"
SATURATED = "saturated_service"
KV_PREEMPTION = "kv_preemption"
PREFIX_CACHE = "prefix_cache_miss"
NONE = "none"


@dataclass
class Cause:
    kind: str
    title: str
    likelihood: str          # likely | possible
    evidence: list[str]
    fix: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class DiagnoseReport:
    source: str
    num_requests: int
    profile: Profile
    fit: Fit | None
    causes: list[Cause]
    cap: int | None
    offered_concurrency: int
    queued_streams: int | None
    measured: Measured = field(repr=False)
    notes: list[str] = field(default_factory=list)
    prefix: dict[str, Any] | None = None
    scenario: str | None = None

    @property
    def summary(self) -> str:
        if not self.causes or self.causes[0].kind == NONE:
            return self.causes[0].title if self.causes else "No cause found."
        return self.causes[0].title

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "scenario": self.scenario, "num_requests": self.num_requests,
                "cap": self.cap, "offered_concurrency": self.offered_concurrency,
                "queued_streams": self.queued_streams, "summary": self.summary,
                "causes": [c.as_dict() for c in self.causes], "profile": self.profile.as_dict(),
                "fit": self.fit.as_dict() if self.fit else None, "prefix": self.prefix, "notes": self.notes}


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:,.0f} ms" if s >= 0.01 else f"{s * 1e3:.2f} ms"


def _waves_text(prof: Profile) -> str:
    parts = [f"{k} x ({v} request{'s' if v != 1 else ''})" for k, v in prof.waves.items() if k >= 1]
    return ", ".join(parts)


class _Shape:
    def __init__(self, new: int, before: int) -> None:
        self.num_new_tokens, self.num_computed_before, self.num_spec_tokens = [new], [before], [0]


def _prefix_check(m: Measured, body: Any, base_dir: Path | None, prof: Profile, fit: Fit | None,
                  hit_rate: float | None) -> tuple[Cause | None, dict[str, Any] | None]:
    """Is the prefix-cache hit rate below what the scenario's traffic allows?"""
    from twin.sim.deployment import resolve_deployment
    from twin.analysis.prefixes import analyze_prefixes, workload_specs

    dep = fit.best.deployment if fit else resolve_deployment(body, base_dir)
    bs = dep.scheduler_config.block_size
    pa = analyze_prefixes(workload_specs(body.workload, body.seed, base_dir), bs)
    info: dict[str, Any] = pa.as_dict()
    attain = pa.attainable_hit_rate
    measured = hit_rate if hit_rate is not None else m.hit_rate
    info["measured_hit_rate"] = measured
    if attain < 0.05 and not pa.defeated:
        return None, info
    evidence: list[str] = []
    likely = "possible"
    if measured is not None:
        if measured < attain - 0.10:
            evidence.append(f"measured hit rate {measured:.0%} against the {attain:.0%} the scenario's traffic "
                            f"allows (unbounded-cache oracle)")
            likely = "likely"
    elif fit is not None and fit.prefix_alternative is not None:
        on = fit.best if fit.best.prefix_caching else fit.prefix_alternative
        off = fit.prefix_alternative if fit.best.prefix_caching else fit.best
        info.update(fit_score_caching_on=on.score, fit_score_caching_off=off.score)
        if not fit.best.prefix_caching:
            evidence.append(f"the measured TTFTs fit a server whose prefix cache does not hit (distance "
                            f"{off.score:.1%} of the mean latency) better than one that hits "
                            f"{on.sim_hit_rate or 0:.0%} of prompt tokens ({on.score:.1%}); no hit rate was "
                            f"measured: pass --hit-rate (vLLM's prefix_cache_hits / prefix_cache_queries) to be sure")
            likely = "likely" if (fit.prefix_margin or 0) >= 0.3 else "possible"
    else:
        # neither a hit rate nor a prefix replay: do unqueued TTFTs look like a full prefill or a cached one?
        factor = fit.best.speed_factor if fit else 1.0
        cost = dep.cost_model_factory()
        p = int(np.median(m.input_lens))
        h = min(p - 1, int(attain * p) // bs * bs)
        full = factor * cost.step_time_s(_Shape(p, 0))
        cached = factor * cost.step_time_s(_Shape(p - h, h))
        fast = m.ttft_s[m.ttft_s <= 2 * prof.ttft_floor_s + 0.05 * prof.service_s]
        seen = float(np.median(fast)) if fast.size else prof.ttft_floor_s
        info.update(full_prefill_s=full, cached_prefill_s=cached, unqueued_ttft_s=seen)
        if full >= 1.5 * cached and abs(seen - full) < abs(seen - cached):
            evidence.append(f"unqueued TTFTs (median {_ms(seen)}) look like a full prefill of the median "
                            f"{p}-token prompt ({_ms(full)}) rather than one served {h} tokens from the cache "
                            f"({_ms(cached)}); no hit rate was measured: pass --hit-rate to be sure")
    if pa.defeated:
        evidence.append(f"{pa.unique_head_share:.0%} of the scenario's prompts start with {pa.head_kind} in front "
                        f"of shared content: as sent they allow {attain:.0%}, with it moved behind the shared part "
                        f"{pa.attainable_without_head_rate:.0%}")
    if not evidence:
        return None, info
    fix = ("--enable-prefix-caching; keep per-request content (timestamps, ids) out of the prompt's first block; "
           "with several replicas, route by prefix")
    allowed = pa.attainable_without_head_rate if pa.defeated else attain
    return Cause(PREFIX_CACHE, f"Prefix-cache hit rate below what the traffic allows ({allowed:.0%} attainable)",
                 likely, evidence, fix), info


def diagnose_measured(m: Measured, body: Any = None, base_dir: Path | None = None, *,
                      candidates: Sequence[int] | None = None, fit_speed: bool = True,
                      hit_rate: float | None = None, scenario: str | None = None,
                      shared_prefix_tokens: int | None = None) -> DiagnoseReport:
    """The causes behind ``m`` (with the twin fitted on ``body``'s deployment when one is given)."""
    from twin.analysis.causes import KV_CAPACITY, LIMIT_NAMES
    from twin.analysis.causes import diagnose as twin_verdict

    prof = profile(m)
    notes = list(m.notes)
    fit = None
    if body is not None:
        if shared_prefix_tokens is None:
            shared_prefix_tokens, note = scenario_shared_prefix(body)
            if note:
                notes.append(note)
        fit = fit_max_num_seqs(m, prof, body, base_dir, candidates, fit_speed, shared_prefix_tokens or 0)
    offered = m.max_concurrency or prof.max_in_flight
    unit = "streams" if m.max_concurrency else "in-flight requests"
    causes: list[Cause] = []
    cap = None
    queued = None
    verdict = twin_verdict(fit.best.result, fit.best.deployment) if fit is not None else None
    fit_capped = fit is not None and fit.best.binds
    kv_ceiling = (prof.cap_evidence and fit is not None and not fit_capped and verdict is not None
                  and verdict.limit == KV_CAPACITY)
    if (prof.cap_evidence and not kv_ceiling) or fit_capped:
        cap = fit.best.max_num_seqs if fit_capped else prof.max_decoding
        if prof.cap_evidence and fit_capped and fit.best.max_num_seqs != prof.max_decoding:
            notes.append(f"the measured ceiling ({prof.max_decoding} decoding at once) and the fitted max_num_seqs "
                         f"({fit.best.max_num_seqs}) differ; replicas, or a KV limit, can blur the ceiling")
        replicas = body.deployment.replicas if body is not None else 1
        queued = max(0, offered - cap * replicas)
        ev: list[str] = []
        if prof.staircase:
            levels = [k for k in prof.waves if k >= 1]
            counts = [str(prof.waves[k]) for k in levels]
            ev.append(f"TTFT staircase: waits cluster at {', '.join(f'{k}x' for k in levels)} the "
                      f"{prof.service_s:.3g} s service time ({', '.join(counts)} requests; {prof.on_step_share:.0%} "
                      f"of all requests sit on a step)")
        if prof.burst_size > prof.burst_fast > 0:
            ev.append(f"of the {prof.burst_size} requests sent at the start, {prof.burst_fast} got a first token "
                      f"at once; the others waited for them to finish")
        if prof.cap_evidence:
            ev.append(f"at most {prof.max_decoding} requests decode at once while up to {prof.max_in_flight} are "
                      f"in flight; whenever requests queue ({prof.queued_share:.0%} of the time) "
                      f"{prof.max_decoding} decode for {prof.pinned_share:.0%} of it")
        per = f" on each of {replicas} replicas" if replicas > 1 else ""
        ev.append(f"{offered} {unit} against a cap of {cap}{per}: {queued} queue")
        if fit is not None:
            ev.append(_fit_words(fit))
            if not fit_capped:
                ev.append("the fitted twin reproduces the measurements as well without a cap: read the ceiling "
                          "with care")
        likely = "likely" if (fit is None or (fit_capped and fit.confidence != "low")) else "possible"
        causes.append(Cause(CONCURRENCY_CAP, f"Concurrency cap of {cap} sequences (max_num_seqs = {cap}): "
                            f"{queued} of {offered} {unit} queue behind it", likely, ev,
                            f"raise max_num_seqs (vllm serve ... --max-num-seqs N with N >= {offered}; vLLM's "
                            f"default is 1024 on H100-class GPUs, 256 on others) and check KV capacity, or run "
                            f"twin protocol on the scenario"))
    elif kv_ceiling:
        ev = [f"at most {prof.max_decoding} requests decode at once while up to {prof.max_in_flight} are in "
              f"flight, and requests queue {prof.queued_share:.0%} of the time",
              f"the fitted twin: {verdict.verdict}", _fit_words(fit)]
        causes.append(Cause(KV_PREEMPTION, f"KV-cache capacity holds concurrency near {prof.max_decoding}", "likely",
                            ev, "more KV memory: --gpu-memory-utilization, --kv-cache-dtype fp8, tensor "
                                "parallelism, or prefix caching where prompts share prefixes"))
    if not causes and prof.queued_share >= QUEUED_SHARE:
        ev = [f"requests queue {prof.queued_share:.0%} of the time (about {prof.mean_queued:.1f} on average) "
              f"with no fixed ceiling on the requests decoding (up to {prof.max_decoding})"]
        kind_words = "the GPU"
        if verdict is not None:
            ev.append(f"the fitted twin: {verdict.verdict}")
            kind_words = LIMIT_NAMES.get(verdict.limit, verdict.limit)
        if fit is not None:
            ev.append(_fit_words(fit))
        causes.append(Cause(SATURATED, f"Queueing against saturated service ({kind_words})", "likely", ev,
                            "more or faster GPUs, a smaller model or quantization; scheduler knobs help only "
                            "where the fitted twin names one"))
    # KV preemption: mid-stream stalls, confirmed by the fitted twin
    twin_pre = fit.best.num_preemptions if fit is not None else 0
    if not any(c.kind == KV_PREEMPTION for c in causes) and ((prof.stall_requests and twin_pre)
                                                            or twin_pre >= max(1, 0.01 * len(m))):
        ev = []
        if prof.stall_requests:
            ev.append(f"{prof.stall_requests} request(s) stall mid-stream (an inter-token gap above "
                      f"{STALL_FACTOR:g}x the median ITL of {_ms(prof.median_itl_s)}; the longest "
                      f"{_ms(prof.max_stall_s)}): a preempted request waits and recomputes its context")
        if twin_pre:
            ev.append(f"the fitted twin, with this deployment's KV pool, preempts {twin_pre} time(s)")
        likely = "likely" if prof.stall_requests and twin_pre else "possible"
        causes.append(Cause(KV_PREEMPTION, "KV-cache capacity: preemptions", likely, ev,
                            "more KV memory: --gpu-memory-utilization, --kv-cache-dtype fp8, tensor parallelism, "
                            "or a lower max_num_seqs so admitted requests keep their blocks"))
    elif prof.stall_requests:
        notes.append(f"{prof.stall_requests} request(s) show a mid-stream gap above {STALL_FACTOR:g}x the median "
                     f"ITL (longest {_ms(prof.max_stall_s)}): long prefills sharing a step, or a preemption"
                     f"{'' if fit is None else '; the fitted twin does not preempt'}")
    prefix = None
    if body is not None:
        cause, prefix = _prefix_check(m, body, base_dir, prof, fit, hit_rate)
        if cause is not None:
            causes.append(cause)
    elif hit_rate is not None or m.hit_rate is not None:
        notes.append("a measured hit rate needs --scenario to say what the traffic allows")
    if not causes:
        ev = [f"no request queued beyond its prefill for long: queued {prof.queued_share:.0%} of the time, "
              f"up to {prof.max_in_flight} in flight and {prof.max_decoding} decoding"]
        if verdict is not None:
            ev.append(f"the fitted twin: {verdict.verdict}")
        if fit is not None:
            ev.append(_fit_words(fit))
        causes.append(Cause(NONE, "No cap and no queueing: the server keeps up with this load; latency is the "
                            "step time", "likely", ev, "faster steps: a faster GPU, quantization, or speculative "
                            "decoding at low concurrency"))
    if fit is not None and abs(math.log(fit.best.speed_factor)) > math.log(1.25):
        notes.append(f"the server's steps take {fit.best.speed_factor:.2f}x the cost model's time (fitted from the "
                     f"median TPOT); calibrate the twin (twin calibrate) for closer predictions")
    return DiagnoseReport(m.source, len(m), prof, fit, causes, cap, offered, queued, m, notes, prefix, scenario)


def _fit_words(fit: Fit) -> str:
    best = fit.best
    name = best.label if best.binds or best.uncapped else f"{best.label} (it never binds: no cap)"
    text = (f"fit: max_num_seqs = {name} reproduces the measured TTFT distribution best (distance "
            f"{best.score:.1%} of the mean latency")
    if fit.runner_up is not None:
        text += (f"; next best {fit.runner_up.label} at {fit.runner_up.score:.1%}, margin {fit.margin:.0%}, "
                 f"log-likelihood ratio {fit.log_likelihood_ratio:.1f}")
    text += f"; confidence {fit.confidence}"
    if abs(best.speed_factor - 1.0) > 0.02:
        text += f"; steps scaled x{best.speed_factor:.2f} to the measured TPOT"
    return text + ")"


__all__ = ["Cause", "DiagnoseReport", "Fit", "Measured", "Profile", "ScaledCostModel", "candidate_caps",
           "diagnose_measured", "fit_max_num_seqs", "load_measured", "measured_from_bench", "measured_from_csv",
           "measured_specs", "profile", "ttft_distance"]
