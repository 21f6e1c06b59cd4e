"""Measured per-request results, read from a ``vllm bench serve`` JSON or a per-request CSV (the other clients'
per-request files through ``twin calibrate``'s readers: ``twin.analysis.measured_readers``).

A ``vllm bench serve`` result JSON saved with ``--save-result --save-detailed`` carries per-request arrays
``input_lens, output_lens, ttfts, latencies``, plus ``start_times`` and optionally ``itls``; a CSV carries one row
per request: arrival, first-token and finish times (seconds) and prompt / output token counts (the twin's
``--requests-out`` table reads as it is). Both become one ``Measured``: completed requests only, arrivals re-based
to 0, with notes on what had to be reconstructed (latencies from TTFT + ITLs, closed-loop arrivals from
``max_concurrency``, even arrivals from ``request_rate``). Bad input is a one-line ``TwinInputError``. Nothing here
knows about the twin: profiling (``measured_profile``), fitting (``cap_fit``) and cause finding (``diagnose``)
build on it.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from twin.errors import TwinInputError
from twin.results.bench_fields import json_number as _number, parse_request_rate
from twin.workload.trace_rows import MAX_TOKEN_COUNT
from twin.results.numbers import counted
from twin.json_input import load_json_path
from twin.yaml_input import not_a_file

BENCH_ARRAYS = ("input_lens", "output_lens", "ttfts", "latencies")

CSV_ALIASES: dict[str, tuple[str, ...]] = {
    "arrival": ("arrival_s", "arrival", "arrival_time", "arrival_time_s", "start_time", "start_s", "send_time"),
    "first_token": ("first_token_s", "first_token", "first_token_time", "first_token_time_s"),
    "finish": ("finish_s", "finish", "finish_time", "end_time", "end_s", "completion_time"),
    "ttft": ("ttft_s", "ttft"),
    "e2el": ("e2el_s", "latency_s", "latency", "e2el"),
    "input": ("num_prompt_tokens", "input_tokens", "input_len", "prompt_tokens", "input_lens"),
    "output": ("num_output_tokens", "output_tokens", "output_len", "output_lens", "generated_tokens"),
}


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
            summary = _summary_only(doc)
            if summary:
                raise TwinInputError(f"{source}: {summary}: no per-request times to replay; bring a vllm bench "
                                     f"serve result saved with --save-result --save-detailed (twin diagnose also "
                                     f"reads a per-request CSV); twin calibrate --from-results fits the twin to "
                                     f"this file as it is")
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
        whole = key.endswith("_lens")
        for i, v in enumerate(vals):
            f = _number(v)
            if f is None or f < 0 or (whole and (not f.is_integer() or f > MAX_TOKEN_COUNT)):
                allowed = f"a whole number of tokens in [0, {MAX_TOKEN_COUNT}]" if whole else "a number >= 0"
                raise TwinInputError(f"{source}: {key}[{i}] = {v!r}: must be {allowed}")
            arr[i] = f
        cols[key] = arr
    errors = doc.get("errors") or [""] * n
    ok = (cols["output_lens"] > 0) & np.array([not e for e in errors], bool)
    empty = np.flatnonzero(ok & (cols["input_lens"] < 1))
    if empty.size:      # vLLM refuses an empty prompt: a completed request had one or more prompt tokens
        i = int(empty[0])
        raise TwinInputError(f"{source}: input_lens[{i}] = 0 for a completed request: a prompt has at least 1 token")
    bad = np.flatnonzero(ok & (cols["ttfts"] > cols["latencies"] + 1e-9))
    if bad.size:
        i = int(bad[0])
        raise TwinInputError(f"{source}: ttfts[{i}] = {cols['ttfts'][i]:g} s exceeds latencies[{i}] = "
                             f"{cols['latencies'][i]:g} s: a first token cannot come after the last")
    notes: list[str] = ["latencies derived as TTFT + the sum of the ITLs"] if derived_latency else []
    rate = parse_request_rate(doc.get("request_rate"))
    if rate is None and doc.get("request_rate") is not None:   # given but not a rate: an error, not absent
        raise TwinInputError(f"{source}: request_rate = {doc['request_rate']!r}: must be a number > 0 or \"inf\"")
    max_c = doc.get("max_concurrency")
    if max_c is not None and (isinstance(max_c, bool) or not isinstance(max_c, (int, float))
                              or not math.isfinite(max_c) or not float(max_c).is_integer() or max_c < 1):
        raise TwinInputError(f"{source}: max_concurrency = {max_c!r}: must be a whole number >= 1 (or null)")
    max_c = int(max_c) if max_c is not None else None
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
            gaps = [_number(x) for x in row] if isinstance(row, list) else [None]
            if any(g is None or g < 0 for g in gaps):
                raise TwinInputError(f"{source}: itls[{i}] must be a list of seconds >= 0")
            if ok[i]:
                itls.append(np.asarray(gaps, float))
    hit = _number(doc.get("prefix_cache_hit_rate"))
    twin = doc.get("twin")
    if hit is None and isinstance(twin, Mapping):
        hit = _number(twin.get("prefix_cache_hit_rate"))
    failed = int(n - ok.sum())
    if failed:
        notes.append(f"{counted(failed, 'failed request')} left out")
    if not ok.any():
        raise TwinInputError(f"{source}: every request failed: nothing to diagnose")
    t0 = float(start[ok].min())
    return Measured(source, start[ok] - t0, cols["ttfts"][ok], cols["latencies"][ok],
                    cols["input_lens"][ok].astype(np.int64), cols["output_lens"][ok].astype(np.int64), itls,
                    failed, max_c, rate, hit, notes)


def _summary_only(doc: Mapping[str, Any]) -> str:
    """What a result file holding only aggregates is (an inference-perf stage summary, or a ``vllm bench serve``
    result saved without ``--save-detailed``), for the error that says what to bring instead; empty otherwise."""
    if isinstance(doc.get("load_summary"), Mapping) and "successes" in doc:
        return "an inference-perf stage summary (distributions only)"
    if isinstance(doc.get("mean_ttft_ms"), (int, float)) and not any(isinstance(doc.get(k), list)
                                                                      for k in BENCH_ARRAYS + ("itls", "e2els")):
        return "a vllm bench serve result saved without --save-detailed (means and percentiles only)"
    return ""


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
    notes = [f"{counted(failed, 'failed or unfinished row')} left out"] if failed else []
    return Measured(source, arrival[ok] - t0, first[ok] - arrival[ok], finish[ok] - arrival[ok],
                    inp[ok].astype(np.int64), out[ok].astype(np.int64), None, failed, None, None, None, notes)


def load_measured(path: str | Path, run: str | None = None) -> Measured:
    """Read RESULTS: ``.csv`` (per-request times); a file a per-request reader of ``twin calibrate
    --from-results`` claims (inference-perf per-request, AIPerf records, GuideLLM, a JSON Lines / JSON list table,
    a CSV with a concurrency column: ``twin.analysis.measured_readers``, the same readers); else a bench result
    JSON. ``run`` (``--run``) names the run to read in a file of several (``measured_readers.pick_run``)."""
    from twin.analysis.measured_readers import measured_from_reader, per_request_reader

    p = Path(path)
    if not p.is_file():
        raise TwinInputError(f"{path}: {not_a_file(p) or 'no such file'}; give the result file itself")
    if p.suffix.lower() == ".csv" or p.name.lower().endswith(".csv.gz"):
        if _has_concurrency_column(p) and (reader := per_request_reader(p)) is not None:
            return Measured(**measured_from_reader(p, reader, run))
        _check_one_run(p, run)
        return measured_from_csv(p)
    if (reader := per_request_reader(p)) is not None:
        return Measured(**measured_from_reader(p, reader, run))
    _check_one_run(p, run)
    return measured_from_bench(load_json_path(p, "bench result"), str(path))


def _has_concurrency_column(path: Path) -> bool:
    """A CSV whose header names a concurrency column holds one run per value (a concurrency sweep): the
    calibration readers split it (``twin.fitting.readers.request_table``)."""
    from twin.fitting.readers.request_table import ROLES

    try:
        with path.open(encoding="utf-8", newline="") as fh:
            header = fh.readline()
    except (OSError, UnicodeDecodeError):
        return False
    names = {c.strip().strip('"').lower() for c in header.split(",")}
    return any(n in names for n in ROLES["concurrency"])


def _check_one_run(path: Path, run: str | None) -> None:
    """``--run`` on a file of one run (a `vllm bench serve` JSON, a CSV without a concurrency column): the run's
    name as the calibration readers give it (the file's stem), or a one-line error."""
    from twin.analysis.measured_readers import run_label

    if run is not None and run != path.stem:
        raise TwinInputError(f"--run {run_label(run)}: {path} holds one run, {path.stem}; leave --run out (or give "
                             f"that name)")


__all__ = ["BENCH_ARRAYS", "CSV_ALIASES", "Measured", "load_measured", "measured_from_bench", "measured_from_csv"]
