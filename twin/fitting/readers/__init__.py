"""Result-file readers: each turns what a benchmark client wrote into ``MeasuredRun`` values.

``read_results(path)`` recognises the format by its content (and a results folder by the names of the files
in it): inference-perf per-request lifecycle metrics, inference-perf stage lifecycle metrics (a results folder or
one stage file, old ``results_stage_N_...`` and new ``stage_N_...`` names), GuideLLM reports (JSON or YAML), AIPerf artifacts
(``profile_export.jsonl`` / ``profile_export_aiperf.json`` or their folder), `vllm bench serve` results (one JSON, or the JSON Lines ``--append-result`` grows) and per-request
tables (CSV, JSON Lines or a JSON list). Readers are tried in ``READERS`` order, each as (name, recogniser,
reader); a file no recogniser claims gets the reason it is unreadable (empty, not UTF-8, broken JSON, a
``.csv`` / ``.jsonl`` table lacking a column) or the list of formats."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from twin.errors import TwinInputError
from twin.fitting.measured_run import MeasuredRun
from twin.fitting.run_checks import check_run
from twin.fitting.readers.aiperf import is_aiperf, read_aiperf
from twin.fitting.readers.fields import YAML_SUFFIXES, load_json, read_text
from twin.fitting.readers.guidellm import is_guidellm, read_guidellm
from twin.fitting.readers.inference_perf import is_inference_perf, read_inference_perf
from twin.fitting.readers.inference_perf_requests import is_inference_perf_requests, read_inference_perf_requests
from twin.fitting.readers.request_table import is_request_table, read_request_table
from twin.fitting.readers.vllm_bench import is_vllm_bench, read_vllm_bench

Reader = tuple[str, Callable[[Path], bool], Callable[[Path], list[MeasuredRun]]]
READERS: list[Reader] = [
    ("inference-perf per-request", is_inference_perf_requests, read_inference_perf_requests),
    ("inference-perf", is_inference_perf, read_inference_perf),
    ("GuideLLM benchmarks.json/.yaml", is_guidellm, read_guidellm),
    ("AIPerf profile_export", is_aiperf, read_aiperf),
    ("vllm bench serve JSON", is_vllm_bench, read_vllm_bench),
    ("per-request CSV/JSONL", is_request_table, read_request_table),
]


def read_results(path: str | Path) -> list[MeasuredRun]:
    """Every run in ``path`` (a file or a results folder); a one-line error when no reader knows it."""
    p = Path(path)
    if not p.exists():
        raise TwinInputError(f"--from-results {p}: no such file or folder")
    for name, recognise, read in READERS:
        if recognise(p):
            runs = read(p)
            for run in runs:
                check_run(run, str(p))
            return runs
    if not p.is_dir():
        text = read_text(p)                      # not a regular file, empty or not UTF-8: say so
        if p.suffix.lower() in (".csv", ".jsonl"):
            return read_request_table(p)         # a table lacking a column: say which
        if p.suffix.lower() in (".json", *YAML_SUFFIXES) or text.lstrip()[:1] in ("{", "["):
            load_json(p)                         # broken JSON or YAML, YAML too large: say where
    raise TwinInputError(f"--from-results {p}: not a result format twin reads ({', '.join(n for n, _, _ in READERS)})")
