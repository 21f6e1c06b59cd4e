"""Writing a run out: `vllm bench serve` result JSON (plus the twin's own keys) and per-request / per-step tables.

The JSON has every key `vllm bench serve --save-result` writes that the twin can know (no generated texts),
per-request lists in seconds, and a ``twin`` object with the twin's own keys, the SLO, the window and the run's
config summary (and, for a run of more than one replica, ``per_replica``: one row of metrics per replica, and
``load_imbalance``; ``twin.results.per_replica``). Writing is deterministic: keys sorted, floats as ``repr``, NaN written as ``null`` and
infinity as ``"inf"`` (as vLLM writes an unbounded request rate), so the same seed gives identical bytes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from twin.errors import TwinInputError
from twin.json_input import JsonSyntaxError, load_json_path
from twin.results.metric_keys import BENCH_SERVE_SCALAR_KEYS, SPEC_DECODE_KEYS, TWIN_KEYS
from twin.results.per_replica import load_imbalance, per_replica_metrics
from twin.results.per_request import per_request_arrays
from twin.results.server_keys import server_keys
from twin.results.sim_result import SimResult
from twin.results.slo import parse_slo
from twin.yaml_input import not_a_file

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

_EXTRA_LATENCY_KEY = re.compile(r"^(mean|median|std|p[0-9.]+)_(ttft|tpot|itl|e2el)_ms$")

# vLLM's run-description keys, filled from the result's config summary when it has them
_HEADER_KEYS = ("backend", "model_id", "tokenizer_id", "num_prompts", "request_rate", "burstiness",
                "max_concurrency", "label", "date")


def is_bench_serve_key(key: str) -> bool:
    return key in BENCH_SERVE_SCALAR_KEYS or key in SPEC_DECODE_KEYS or bool(_EXTRA_LATENCY_KEY.match(key))


def split_metrics(metrics: Mapping[str, Any]) -> tuple[dict, dict]:
    """(bench-serve keys, twin keys) of a flat metrics dict."""
    bench = {k: v for k, v in metrics.items() if is_bench_serve_key(k)}
    twin = {k: v for k, v in metrics.items() if not is_bench_serve_key(k)}
    return bench, twin


def flatten_result(data: Mapping[str, Any]) -> dict:
    """A bench-serve JSON dict (the twin's, or a real `vllm bench serve` one) as a flat metrics dict, the
    shape `twin.results.report` compares: top-level scalars plus the ``twin`` object's keys."""
    flat = {k: v for k, v in data.items()
            if k != "twin" and (not isinstance(v, list) or k in SPEC_DECODE_KEYS)}
    twin = data.get("twin")
    if isinstance(twin, Mapping):
        for k, v in twin.items():
            flat.setdefault(k, v)
    return flat


def served_model(config: Mapping[str, Any]) -> str | None:
    """The model a run served, as ``vllm bench serve`` records its ``--model`` in ``model_id``: the run's
    ``model`` (a bare config), else its deployment's (one model per run: replica groups share it), as the
    scenario names it (a catalogued name, alias or Hugging Face id: ``twin calibrate --from-results`` resolves it
    back); None when the config names none."""
    for model in (config.get("model"), (config.get("deployment") or {}).get("model")):
        if isinstance(model, str) and model:
            return model
    return None


def to_bench_serve_json(result: SimResult, slo: Any = None, *, window: tuple | None = None,
                        per_request: bool = True, metadata: Mapping[str, Any] | None = None) -> dict:
    """The run as `vllm bench serve` result JSON: its scalar keys at the top level, its per-request lists
    (``input_lens, output_lens, ttfts, itls, latencies, start_times, errors``; completed and failed requests
    in record order) unless ``per_request`` is false, and the twin's own keys under ``twin``."""
    metrics = result.metrics(slo=slo, window=window)
    bench, twin = split_metrics(metrics)
    out: dict[str, Any] = {}
    config = result.config or {}
    for key in _HEADER_KEYS:
        if key in config:
            out[key] = config[key]
    out.setdefault("backend", "llm-serving-twin")
    if "model_id" not in out and (model := served_model(config)) is not None:
        out["model_id"] = model
    out.update(server_keys(config))
    out.update(bench)
    if per_request:
        arrays = per_request_arrays(result.requests, window)
        out.update(arrays)
        if "itls" not in arrays:
            twin["note"] = "itls omitted: records.token_times: summary keeps no per-token times"
        out.setdefault("num_prompts", len(arrays["input_lens"]))
    if metadata:
        out.update(metadata)
    spec = parse_slo(slo)
    twin["slo"] = {"per_request_ms": spec.per_request_ms, "bounds_ms": spec.bounds_ms} if spec else None
    twin["config"] = dict(config)
    twin["sim_start_s"] = result.sim_start_s
    twin["sim_end_s"] = result.sim_end_s
    if (result.num_replicas or 1) > 1:
        rows = per_replica_metrics(result, slo=slo, window=window)
        twin["per_replica"] = rows
        twin["load_imbalance"] = load_imbalance(rows)
    out["twin"] = twin
    return out


_PLAIN_NUMBERS = {int, float}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        # fast path for long per-request lists of plain finite numbers
        if set(map(type, value)) <= _PLAIN_NUMBERS and math.isfinite(sum(value)):
            return value
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        if math.isnan(f):
            return None
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        return f
    if value is None or isinstance(value, str):
        return value
    if hasattr(value, "typecode"):  # array.array
        return _jsonable(list(value))
    if isinstance(value, Path):
        return str(value)
    return str(value)


def dumps(data: Mapping[str, Any], indent: int | None = None) -> str:
    """Deterministic JSON text: sorted keys, floats as repr, NaN as null, infinity as "inf"."""
    return json.dumps(_jsonable(data), sort_keys=True, indent=indent, allow_nan=False, ensure_ascii=False)


def write_json(data: SimResult | Mapping[str, Any], path: str | Path, *, slo: Any = None,
               indent: int | None = None) -> Path:
    """Write ``data`` (a result dict, or a `SimResult` turned into one with ``slo``) to ``path``."""
    if isinstance(data, SimResult):
        data = to_bench_serve_json(data, slo)
    elif slo is not None:
        raise TwinInputError("write_json: slo applies only when writing a SimResult")
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise TwinInputError(f"output path {str(path)!r}: folder {str(path.parent)!r} does not exist")
    path.write_text(dumps(data, indent=indent) + "\n", encoding="utf-8")
    return path


def read_json(path: str | Path) -> dict:
    """Read a result JSON (the twin's or `vllm bench serve`'s)."""
    path = Path(path)
    if not path.is_file():
        kind = not_a_file(path)
        raise TwinInputError(f"result file {str(path)!r}: " + (f"is {kind}; give a file" if kind else "no such file"))
    try:
        data = load_json_path(path, "result file")
    except JsonSyntaxError as exc:
        raise TwinInputError(f"result file {str(path)!r}, line {exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise TwinInputError(f"result file {str(path)!r}: expected a JSON object, got {type(data).__name__}")
    return data


TABLE_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")


def table_format(path: str | Path) -> str:
    name = Path(path).name.lower()
    if name.endswith((".csv", ".csv.gz")):
        return "csv"
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    raise TwinInputError(f"table path {str(path)!r}: unknown format; allowed suffixes: {', '.join(TABLE_SUFFIXES)}")


def write_table(df: pd.DataFrame, path: str | Path) -> Path:
    """Write a table as CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``, ``.pq``, needs pyarrow)."""
    path = Path(path)
    fmt = table_format(path)
    if path.parent and not path.parent.exists():
        raise TwinInputError(f"table path {str(path)!r}: folder {str(path.parent)!r} does not exist")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise TwinInputError(f"table path {str(path)!r}: writing Parquet needs pyarrow "
                                 f"(pip install pyarrow), or use a .csv path") from None
        df.to_parquet(path, index=False)
    else:
        df.to_csv(path, index=False, lineterminator="\n")
    return path


def write_run(result: SimResult, directory: str | Path, *, slo: Any = None, table_suffix: str = ".csv",
              prefix: str = "") -> dict[str, Path]:
    """Write ``result.json``, ``requests<suffix>`` and ``steps<suffix>`` into ``directory`` (created)."""
    directory = Path(directory)
    table_format("x" + table_suffix)
    directory.mkdir(parents=True, exist_ok=True)
    return {
        "json": write_json(result, directory / f"{prefix}result.json", slo=slo),
        "requests": write_table(result.requests_frame(), directory / f"{prefix}requests{table_suffix}"),
        "steps": write_table(result.steps_frame(), directory / f"{prefix}steps{table_suffix}"),
    }


__all__ = [
    "TWIN_KEYS", "dumps", "flatten_result", "is_bench_serve_key", "read_json", "served_model", "split_metrics",
    "table_format", "to_bench_serve_json", "write_json", "write_run", "write_table",
]
