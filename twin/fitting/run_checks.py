"""The limits every measured run meets, whichever reader made it: the scenario's own (at most
``MAX_REQUESTS`` requests, ``MAX_TOKEN_COUNT`` tokens in one prompt or output) and physical sense (finite,
non-negative metrics and times, a rate > 0, lengths >= 1 token). ``check_run`` raises one ``TwinInputError`` line
naming the file, the run and the field; ``twin.fitting.readers.read_results`` calls it on every run it returns."""

from __future__ import annotations

import math

import numpy as np

from twin.errors import TwinInputError
from twin.fitting.measured_run import LengthSample, MeasuredRun
from twin.scenario import MAX_SIM_TIME_S
from twin.workload.limits import MAX_REQUESTS
from twin.workload.trace_rows import MAX_TOKEN_COUNT


MAX_METRIC = MAX_REQUESTS * MAX_TOKEN_COUNT * 1e3


def _lengths(sample: LengthSample, field: str, where: str) -> None:
    if sample.values is not None:
        if not sample.values:
            raise TwinInputError(f"{where}: {field}: no lengths (no completed request)")
        arr = np.asarray(sample.values, dtype=float)
        bad = np.flatnonzero(~((arr >= 1) & (arr <= MAX_TOKEN_COUNT)))
        if bad.size:
            i = int(bad[0])
            raise TwinInputError(f"{where}: {field}[{i}] = {sample.values[i]!r}: must be 1 to {MAX_TOKEN_COUNT:,} "
                                 f"tokens")
        return
    qs = [q for q, _ in sample.quantiles]
    vs = [v for _, v in sample.quantiles]
    if any(not (isinstance(q, (int, float)) and 0.0 <= q <= 1.0) for q in qs) or qs != sorted(qs):
        raise TwinInputError(f"{where}: {field}: quantile levels must rise within [0, 1]")
    for q, v in sample.quantiles:
        if not (isinstance(v, (int, float)) and math.isfinite(v) and 0 <= v <= MAX_TOKEN_COUNT):
            raise TwinInputError(f"{where}: {field} at quantile {q:g} = {v!r}: must be 0 to {MAX_TOKEN_COUNT:,} tokens")
    if vs != sorted(vs):
        raise TwinInputError(f"{where}: {field}: quantiles must not decrease")
    if vs[-1] < 1:
        raise TwinInputError(f"{where}: {field}: every request has fewer than 1 token")


def _finite(value: float | None, field: str, where: str, *, low: float = 0.0, open_low: bool = False,
            allow_inf: bool = False, high: float = math.inf) -> None:
    if value is None:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value) \
        and (allow_inf or math.isfinite(value)) and (value > low if open_low else value >= low) \
        and (value <= high or (allow_inf and math.isinf(value)))
    if not ok:
        bound = f" and at most {high:g}" if math.isfinite(high) else ""
        raise TwinInputError(f"{where}: {field} = {value!r}: must be a finite number {'>' if open_low else '>='} "
                             f"{low:g}{bound}")


def check_run(run: MeasuredRun, where: str) -> None:
    """Refuse a run a real benchmark cannot have produced, or one beyond what the twin simulates."""
    where = f"{where} ({run.name})" if run.name and run.name not in where else where
    if not 1 <= run.num_requests <= MAX_REQUESTS:
        raise TwinInputError(f"{where}: {run.num_requests:,} requests; a run replays 1 to {MAX_REQUESTS:,}")
    _lengths(run.prompt_tokens, "prompt lengths", where)
    _lengths(run.output_tokens, "output lengths", where)
    _finite(run.rate_per_s, "request rate", where, open_low=True, allow_inf=True)
    if run.max_concurrency is not None and not 1 <= run.max_concurrency <= MAX_REQUESTS:
        raise TwinInputError(f"{where}: max_concurrency = {run.max_concurrency!r}: must be 1 to {MAX_REQUESTS:,}")
    _finite(run.burstiness, "burstiness", where, open_low=True)
    _finite(run.duration_s, "duration", where, high=MAX_SIM_TIME_S)
    _finite(run.timeout_s, "timeout", where, open_low=True)
    if run.tensor_parallel_size is not None and not 1 <= run.tensor_parallel_size <= 64:
        raise TwinInputError(f"{where}: tensor_parallel_size = {str(run.tensor_parallel_size)[:20]}"
                             f"{'...' if len(str(run.tensor_parallel_size)) > 20 else ''}: must be 1 to 64")
    for key, value in run.metrics.items():
        # a latency past the longest run the twin simulates is not a measurement, nor a count or throughput
        # past what MAX_REQUESTS requests of MAX_TOKEN_COUNT tokens give over a millisecond
        _finite(value, key, where, high=1e3 * MAX_SIM_TIME_S if key.endswith("_ms") else MAX_METRIC)
    completed = run.metrics.get("completed")
    if completed is not None and completed > run.num_requests:
        raise TwinInputError(f"{where}: completed = {completed:g} but the run sent {run.num_requests:,} requests")
    pool = run.prompt_pool
    if pool is not None:
        if not (1 <= pool.num_groups and 1 <= pool.prompts_per_group and pool.size <= MAX_REQUESTS):
            raise TwinInputError(f"{where}: a prompt pool of {pool.num_groups} x {pool.prompts_per_group} prompts; "
                                 f"1 to {MAX_REQUESTS:,} prompts")
        if not 0 <= pool.system_prompt_tokens <= MAX_TOKEN_COUNT:
            raise TwinInputError(f"{where}: system prompt of {pool.system_prompt_tokens!r} tokens: must be 0 to "
                                 f"{MAX_TOKEN_COUNT:,}")
