"""What ``twin run`` and ``twin compare`` write besides the terminal tables: the ``vllm bench serve`` JSON and the
per-request and per-step tables, for every variant and replication of the command.

- ``--json`` of one variant is one ``vllm bench serve`` file (its first replication's per-request arrays; with
  replications, the mean and confidence interval of each metric over all of them under ``twin.replications``).
  ``twin run`` of several variants writes one such file per variant beside the path given, the variant's name
  before the suffix (``out.json`` -> ``out.baseline.json``, ``out.wide.json``); ``twin compare`` writes them all
  in one file, ``{"variants": {name: <vllm bench serve result>}}``.
- ``--replicas-out`` holds each run's per-replica metrics (``twin.results.per_replica``), one row per replica.
- ``--requests-out`` / ``--steps-out`` / ``--replicas-out`` hold every run: with more than one (variants x replications) each row
  starts with ``variant`` and ``replication`` (0-based; a replication's seed is the scenario's seed plus it).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from twin.errors import TwinInputError

RUN_COLUMNS = ("variant", "replication")


def variant_docs(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One ``vllm bench serve`` document per variant (its first replication, plus the replications' summary)."""
    from twin.results.export import to_bench_serve_json
    from twin.cli.pd_output import limits_of
    from twin.results.heldout_note import bands_doc

    docs = {}
    for name, run in runs.items():
        body = run["body"]
        result = run["replications"][0][0]
        window = (body.warmup_s, None) if body.warmup_s > 0 else None
        doc = to_bench_serve_json(result, body.slo.as_dict() or None, window=window)
        if run["ci"]:
            doc["twin"]["replications"] = run["ci"]
        doc["twin"]["heldout_bands"] = bands_doc(run["deployment"], body)     # round 19 (issue 33)
        doc["twin"]["limits"] = limits_of(run)          # what limits the run (twin.analysis.run_limits)
        docs[name] = doc
    return docs


def variant_json_path(path: str | Path, variant: str) -> Path:
    """``out.json`` -> ``out.<variant>.json`` (characters other than letters, digits, ``.``, ``_`` and ``-`` in
    the variant's name become ``_``)."""
    path = Path(path)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", variant)
    suffix = path.suffix or ".json"
    stem = path.name[: -len(path.suffix)] if path.suffix else path.name
    return path.with_name(f"{stem}.{safe}{suffix}")


def write_json_outputs(runs: dict[str, dict[str, Any]], json_path: str, *, one_file: bool,
                       whatif: dict[str, Any] | None = None) -> list[Path]:
    """Write ``--json``: one file for one variant; several variants: one file per variant, or (``one_file``)
    one ``{"variants": ...}`` file, with ``whatif`` (``twin.results.whatif_view.whatif_doc``) beside them where
    given. Returns the paths written."""
    from twin.results.export import dumps

    path = Path(json_path)
    if not path.parent.exists():
        raise TwinInputError(f"--json {json_path}: folder {path.parent} does not exist")
    docs = variant_docs(runs)
    if len(docs) == 1:
        targets = {path: next(iter(docs.values()))}
    elif one_file:
        targets = {path: {"variants": docs, **({"whatif": whatif} if whatif is not None else {})}}
    else:
        targets = {variant_json_path(path, name): doc for name, doc in docs.items()}
        if len(targets) < len(docs):
            raise TwinInputError(f"--json {json_path}: two variants map to the same file name; rename one")
    for target, doc in targets.items():
        target.write_text(dumps(doc) + "\n", encoding="utf-8")
    return list(targets)


def runs_frame(runs: dict[str, dict[str, Any]], frame_of: Callable[[Any, dict[str, Any]], Any]):
    """``frame_of(result, run)`` of every run, stacked; with more than one run, led by ``variant`` and
    ``replication`` columns."""
    import pandas as pd

    pairs = [(name, r, result, run) for name, run in runs.items()
             for r, (result, _) in enumerate(run["replications"])]
    if len(pairs) == 1:
        return frame_of(pairs[0][2], pairs[0][3])
    frames = []
    for name, r, result, run in pairs:
        frame = frame_of(result, run)
        frame.insert(0, RUN_COLUMNS[0], name)
        frame.insert(1, RUN_COLUMNS[1], r)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def replicas_frame(result: Any, run: dict[str, Any]):
    """The per-replica metrics of one run as a table (its SLO and warm-up window as the metrics have them)."""
    from twin.results.per_replica import per_replica_frame, per_replica_metrics

    body = run["body"]
    window = (body.warmup_s, None) if body.warmup_s > 0 else None
    return per_replica_frame(per_replica_metrics(result, slo=body.slo.as_dict() or None, window=window))


def write_table_outputs(runs: dict[str, dict[str, Any]], requests_out: str | None,
                        steps_out: str | None, replicas_out: str | None = None) -> list[str]:
    """Write ``--requests-out``, ``--steps-out`` and ``--replicas-out`` with every run. Returns the paths
    written."""
    from twin.results.export import table_format, write_table

    written = []
    for path, frame_of in ((requests_out, lambda res, run: res.requests_frame()),
                           (steps_out, lambda res, run: res.steps_frame()),
                           (replicas_out, replicas_frame)):
        if path:
            table_format(path)          # a bad suffix fails before any table is built
            write_table(runs_frame(runs, frame_of), path)
            written.append(path)
    return written


__all__ = ["RUN_COLUMNS", "replicas_frame", "runs_frame", "variant_docs", "variant_json_path", "write_json_outputs",
           "write_table_outputs"]
