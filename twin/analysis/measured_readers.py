"""``twin diagnose`` on the other clients' per-request files, read by the readers ``twin calibrate
--from-results`` uses (``twin.fitting.readers``): inference-perf's ``per_request_lifecycle_metrics.json``,
AIPerf's ``profile_export.jsonl``, a GuideLLM report listing every request, and a per-request table as JSON
Lines or a JSON list. There is no second reader: the file goes through ``read_results`` (format recognition,
hostile-input checks, ``check_run``), and the one run it holds gives the fields of a
``twin.analysis.measured.Measured`` from the requests the reader kept (``MeasuredRun.requests``).

A file that holds several runs (a table with a concurrency column, a GuideLLM sweep) is read one run at a time:
``run`` (``twin diagnose --run NAME``) names it, among the run names the reader gives; without it, or with a name
the file does not hold, a one-line error lists them. A file with none with per-request times (an AIPerf aggregate
alone, a GuideLLM report without its request list) is a one-line error saying what to bring. `vllm bench serve` JSON, inference-perf stage summaries and CSV tables keep diagnose's own reading
(``twin.analysis.measured``), which knows their ``start_times`` / ``itls`` arrays, hit rate and summary-only
forms."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from twin.errors import TwinInputError, counted, did_you_mean
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


MAX_LISTED_RUNS = 8      # a refusal names this many of a file's runs, then counts the rest


def run_label(run: str) -> str:
    """``--run``'s value as a refusal echoes it: as given when it reads as a name (printable, no space at either
    end, at most 80 characters), else quoted and cut (an empty, blank, multi-line or 100 kB name stays one
    readable line)."""
    if run and run.isprintable() and run == run.strip() and len(run) <= 80:
        return run
    text = repr(run)
    return text if len(text) <= 60 else text[:57] + "..."


def listed(names: list[str]) -> str:
    """The first ``MAX_LISTED_RUNS`` of ``names``, then how many more."""
    more = len(names) - MAX_LISTED_RUNS
    return ", ".join(names[:MAX_LISTED_RUNS]) + (f" and {more:,} more" if more > 0 else "")


def pick_run(runs: list[MeasuredRun], run: str | None, path: Path) -> MeasuredRun:
    """The run named ``run`` (``--run``) among ``runs``, the file's; the only one when ``run`` is None. A file of
    several runs without ``--run``, a name it does not hold, or ``--run`` naming another run than a one-run file's
    is a one-line error listing the names (the first ``MAX_LISTED_RUNS``)."""
    names = [r.name for r in runs]
    if run is None:
        if len(runs) == 1:
            return runs[0]
        raise TwinInputError(f"{path}: holds {counted(len(runs), 'run')} ({listed(names)}); twin diagnose reads "
                             f"one run: pick one with --run NAME (twin calibrate --from-results reads them all)")
    if run in names:
        return runs[names.index(run)]
    label = run_label(run)
    if len(runs) == 1:
        raise TwinInputError(f"--run {label}: {path} holds one run, {names[0]}; leave --run out (or give that "
                             f"name)")
    hint = did_you_mean(run, names) if len(run) <= 200 else ""
    raise TwinInputError(f"--run {label}: not a run in {path} (it holds {listed(names)}){hint}")


def measured_from_reader(path: Path, reader: str, run: str | None = None) -> dict[str, Any]:
    """The run in ``path`` (claimed by the calibration reader ``reader``) named ``run`` (the only one when None)
    as ``Measured`` fields."""
    chosen = pick_run(read_results(path), run, path)
    if chosen.requests is None:
        raise TwinInputError(f"{path} ({reader}): lists no per-request times for every request (a summary, or "
                             f"a sample of the requests): nothing to replay; bring the client's per-request file; "
                             f"twin calibrate --from-results fits the twin to this file as it is")
    return measured_fields(chosen, str(path))


__all__ = ["MAX_LISTED_RUNS", "PER_REQUEST_READERS", "listed", "measured_fields", "measured_from_reader",
           "per_request_reader", "pick_run", "run_label"]
