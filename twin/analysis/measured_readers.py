"""``twin diagnose`` on the other clients' per-request files, read by the readers ``twin calibrate
--from-results`` uses (``twin.fitting.readers``): inference-perf's ``per_request_lifecycle_metrics.json``,
AIPerf's ``profile_export.jsonl``, a GuideLLM report listing every request, and a per-request table as JSON
Lines or a JSON list. There is no second reader: the file goes through ``read_results`` (format recognition,
hostile-input checks, ``check_run``), and the one run it holds gives the fields of a
``twin.analysis.measured.Measured`` from the requests the reader kept (``MeasuredRun.requests``).

A file that holds several runs (a table with a concurrency column, a GuideLLM sweep) or none with per-request
times (an AIPerf aggregate alone, a GuideLLM report without its request list) is a one-line error saying what to
bring. `vllm bench serve` JSON, inference-perf stage summaries and CSV tables keep diagnose's own reading
(``twin.analysis.measured``), which knows their ``start_times`` / ``itls`` arrays, hit rate and summary-only
forms."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from twin.errors import TwinInputError, counted
from twin.fitting.measured_run import MeasuredRun
from twin.fitting.readers import READERS, read_results

# the READERS entries whose files may list every request; the others stay with twin.analysis.measured
PER_REQUEST_READERS = ("inference-perf per-request", "GuideLLM benchmarks.json/.yaml", "AIPerf profile_export",
                       "per-request CSV/JSONL")


def per_request_reader(path: Path) -> str | None:
    """The name of the calibration reader that claims ``path`` when it is one of ``PER_REQUEST_READERS`` (the
    first reader to recognise a file reads it, as in ``read_results``), else None."""
    for name, recognise, _ in READERS:
        if recognise(path):
            return name if name in PER_REQUEST_READERS else None
    return None


def measured_fields(run: MeasuredRun, source: str) -> dict[str, Any]:
    """The fields of a ``twin.analysis.measured.Measured`` (completed requests, arrivals re-based to 0, send
    order) from a run that kept its requests; ``max_concurrency`` as the file states it (closed-loop users, or the
    cap on an open loop)."""
    t = run.requests
    order = np.argsort(t.send_s, kind="stable")
    ok = t.ok[order]
    send = t.send_s[order][ok]
    failed = run.num_requests - int(ok.sum())     # a GuideLLM report may count errored requests it does not list
    notes = [f"{counted(failed, 'failed request')} left out"] if failed else []
    rate = run.rate_per_s if run.rate_per_s is not None and math.isfinite(run.rate_per_s) else None
    return {"source": source, "arrival_s": send - float(send.min()), "ttft_s": t.ttft_s[order][ok],
            "e2el_s": t.e2el_s[order][ok], "input_lens": t.prompt_tokens[order][ok].astype(np.int64),
            "output_lens": t.output_tokens[order][ok].astype(np.int64),
            "itls": list(t.itl_s) if t.itl_s else None, "num_failed": failed,
            "max_concurrency": run.max_concurrency, "request_rate": rate, "hit_rate": None, "notes": notes}


def measured_from_reader(path: Path, reader: str) -> dict[str, Any]:
    """The one run in ``path`` (claimed by the calibration reader ``reader``) as ``Measured`` fields."""
    runs = read_results(path)
    if len(runs) != 1:
        names = ", ".join(r.name for r in runs[:4]) + (" ..." if len(runs) > 4 else "")
        raise TwinInputError(f"{path}: holds {counted(len(runs), 'run')} ({names}); twin diagnose reads one run "
                             f"per file: give one run's requests (twin calibrate --from-results reads them all)")
    if runs[0].requests is None:
        raise TwinInputError(f"{path} ({reader}): lists no per-request times for every request (a summary, or "
                             f"a sample of the requests): nothing to replay; bring the client's per-request file; "
                             f"twin calibrate --from-results fits the twin to this file as it is")
    return measured_fields(runs[0], str(path))


__all__ = ["PER_REQUEST_READERS", "measured_fields", "measured_from_reader", "per_request_reader"]
