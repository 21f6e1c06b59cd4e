"""inference-perf's per-request file, ``per_request_lifecycle_metrics.json`` (written with
``report.request_lifecycle.per_request: true``): a list with one object per request, ``start_time`` and
``end_time`` (seconds), ``info`` and ``error`` (null when the request succeeded). ``info`` carries the prompt
tokens (``input_tokens``, or ``request_metrics.text.input_tokens``) and the streamed response: ``output_tokens``
and ``output_token_times`` (one time per stream message), at its top level in older versions and under
``response_metrics`` in newer ones.

The file holds every stage of the run together and does not say which stage a request belonged to, so it is
read as one open-loop run at the rate and burstiness of its send times; for a multi-stage run give the stage
files (``results_stage_<N>_lifecycle_metrics.json``) instead. TTFT is the first message time minus the start,
E2EL the end minus the start. The message times are the ITLs only when there is one per output token (some
versions stamp several messages per token); otherwise ITL comes from the latencies and token counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from twin.errors import TwinInputError
from twin.fitting.measured_run import MeasuredRun
from twin.fitting.readers.fields import get, load_json, number, number_list, shown, try_json, whole
from twin.fitting.readers.request_times import RequestTimes, run_from_requests


def _looks_like(entry: Any) -> bool:
    return isinstance(entry, dict) and {"start_time", "end_time", "info"} <= set(entry)


def is_inference_perf_requests(path: Path) -> bool:
    doc = try_json(path)
    return isinstance(doc, list) and bool(doc) and _looks_like(doc[0])


def read_inference_perf_requests(path: Path) -> list[MeasuredRun]:
    doc = load_json(path)
    if not isinstance(doc, list) or not doc:
        raise TwinInputError(f"{path}: expected a non-empty JSON list of requests (per_request_lifecycle_metrics)")
    send, ttft, e2el, prompt, output, ok, itls = [], [], [], [], [], [], []
    for i, r in enumerate(doc):
        where = f"{path}, request [{i}]"
        if not isinstance(r, dict):
            raise TwinInputError(f"{where}: must be an object")
        start = number(get(r, "start_time", where), "start_time", where)
        info = r.get("info")
        if r.get("end_time") is not None and number(r["end_time"], "end_time", where) < start:
            raise TwinInputError(f"{where}: end_time = {r['end_time']!r} is before start_time = {start!r}")
        if not r.get("error") and info is not None and not isinstance(info, dict):
            raise TwinInputError(f"{where}: info = {shown(info)}: a request without an error needs an info object")
        done = not r.get("error") and isinstance(info, dict) and r.get("end_time") is not None
        send.append(start)
        if not done:
            for column, value in ((ttft, np.nan), (e2el, np.nan), (prompt, 0), (output, 0), (ok, False)):
                column.append(value)
            continue
        end = number(r["end_time"], "end_time", where)
        resp = info.get("response_metrics") if isinstance(info.get("response_metrics"), dict) else info
        p = info.get("input_tokens", get(info, "request_metrics.text.input_tokens", where, required=False))
        if p is None:
            raise TwinInputError(f"{where}: missing field info.input_tokens "
                                 f"(or info.request_metrics.text.input_tokens)")
        p = whole(p, "info.input_tokens", where, low=1)
        times = number_list(get(resp, "output_token_times", where), "info.output_token_times", where)
        if times.size == 0:
            raise TwinInputError(f"{where}: info.output_token_times is empty: TTFT needs a streamed run "
                                 f"(api.streaming: true)")
        o = whole(resp.get("output_tokens", times.size), "info.output_tokens", where, low=1)
        if np.any(np.diff(times) < 0) or times[0] < start or end < times[0]:
            raise TwinInputError(f"{where}: times out of order: need start_time <= output_token_times "
                                 f"(increasing) and output_token_times[0] <= end_time")
        ttft.append(times[0] - start)
        e2el.append(max(end, times[-1]) - start)
        prompt.append(p)
        output.append(o)
        ok.append(True)
        itls.append(np.diff(times) if times.size == o else None)
    t = RequestTimes(np.array(send), np.array(ttft), np.array(e2el), np.array(prompt, float),
                     np.array(output, float), np.array(ok, bool),
                     None if any(g is None for g in itls) else itls)
    t.check(str(path), {"ttft": "TTFT", "e2el": "end_time - start_time", "prompt": "info.input_tokens",
                        "output": "info.output_tokens"})
    return [run_from_requests(f"{path.parent.name}/{path.stem}", "inference-perf per-request", t,
                              experiment=path.parent.name)]
