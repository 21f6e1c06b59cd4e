"""One dashboard run (validated, resolved, simulated, diagnosed; picklable) and the load sweep."""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twin.analysis.causes import Diagnosis, diagnose
from twin.analysis.offered_load import offered_rate, request_arrivals
from twin.analysis.pool_causes import pd_diagnosis
from twin.analysis.run_limits import limits_from
from twin.deploy.pd_pools import resolve_pd
from twin.deploy.run import metrics_of, run_body
from twin.errors import TwinInputError
from twin.dashboard.form import BASELINE_LABEL, WHATIF_LABEL, _arrivals_mode, validate
from twin.dashboard.pd_run import pd_headline, pd_info
from twin.results import numbers
from twin.results.deployment_formats import format_parts
from twin.results.heldout_note import bands_doc
from twin.results.sim_result import SimResult
from twin.sim.deployment import resolve_deployment
from twin.workload.limits import MAX_REQUESTS
from twin.workload.limits import expected_requests as workload_requests

SWEEP_MULTIPLIERS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
SWEEP_REQUESTS = 300             # requests per sweep point (a short run; the curve's shape, not its tail)
MAX_RUN_REQUESTS = 50_000        # one dashboard run simulates at most about this many requests


def expected_requests(body: Any) -> int | None:
    """About how many requests ``body`` simulates (``None``: a trace, or no way to tell before running)."""
    return workload_requests(body.workload)


def check_size(body: Any, limit: int = MAX_RUN_REQUESTS) -> None:
    """A run too large for an interactive page is an error naming the limit, before any simulation."""
    n = expected_requests(body)
    if n is not None and n > limit:
        raise TwinInputError(f"workload: about {n:,} requests; the dashboard runs at most {limit:,} per "
                             "configuration (lower workload.num_requests, duration_s or the rate; the CLI "
                             f"`twin run` runs up to {MAX_REQUESTS:,})")


def cost_model_name(body: Any) -> str:
    """The cost model as the page names it: ``roofline``, ``constant`` or ``profile <file>``."""
    cm = body.cost_model
    if cm.kind == "profile":
        return f"calibrated profile {Path(str(cm.profile)).name}"
    return {"roofline": "roofline (datasheet FLOP/s and bandwidth)", "constant": "constant step time"}.get(
        cm.kind, cm.kind)


@dataclass
class RunOutput:
    """One run, everything the page shows; picklable (so ``st.cache_data`` can keep it)."""

    result: SimResult
    metrics: dict[str, Any]
    diagnosis: Diagnosis
    slo: dict[str, Any] | None
    info: dict[str, Any] = field(default_factory=dict)
    pool_diagnoses: dict[str, Diagnosis] | None = None   # a P/D run (``disaggregation:``): each pool's

    @property
    def limits(self) -> dict[str, Any]:
        """What limits the run, as `twin run` prints it and writes ``twin.limits`` (`twin.analysis.run_limits`)."""
        return limits_from(self.diagnosis, self.pool_diagnoses or {}, self.metrics,
                           offered_rate_per_s=self.info.get("offered_rate_per_s"))


def run_pd(body: Any, bd: Path | None, t0: float) -> RunOutput:
    """A prefill/decode body through ``twin.deploy``: the diagnosis per pool (`twin.dashboard.pd_run`)."""
    pd = resolve_pd(body, bd)
    result = run_body(body, bd, deployment=pd)
    metrics = metrics_of(result, body)
    diagnosis, per_pool = pd_diagnosis(result, pd)
    info = {**pd_info(pd), "name": body.name, "num_requests": len(result.requests), "num_steps": len(result.steps),
            "simulated_s": result.sim_end_s, "cost_model": cost_model_name(body),
            "offered_rate_per_s": offered_rate(body, request_arrivals(body, result)),
            "wall_s": time.perf_counter() - t0, "heldout_bands": bands_doc(pd, body)}
    return RunOutput(result, metrics, diagnosis, body.slo.as_dict() or None, info, per_pool)


def run_scenario(data: dict[str, Any], base_dir: str | None = None) -> RunOutput:
    """Validate, resolve and simulate one configuration mapping (its ``seed`` included)."""
    t0 = time.perf_counter()
    body = validate(data)
    check_size(body)
    bd = Path(base_dir) if base_dir else None
    if body.disaggregation is not None:        # prefill/decode pools
        return run_pd(body, bd, t0)
    dep = resolve_deployment(body, bd)
    result = run_body(body, bd, deployment=dep)
    metrics = metrics_of(result, body)
    diagnosis = diagnose(result, dep, metrics)
    sc = dep.scheduler_config
    info = {
        "name": body.name, "gpu": dep.gpu.name, "model": dep.model.name, "formats": format_parts(body.deployment),
        "tensor_parallel_size": body.deployment.tensor_parallel_size, "replicas": body.deployment.replicas,
        "scheduler": sc.scheduler, "max_num_seqs": sc.max_num_seqs,
        "max_num_batched_tokens": sc.max_num_batched_tokens, "enable_prefix_caching": sc.enable_prefix_caching,
        "enable_chunked_prefill": sc.enable_chunked_prefill, "kv_capacity_tokens": dep.kv_pool.capacity_tokens,
        "num_requests": len(result.requests), "num_steps": len(result.steps),
        "simulated_s": result.sim_end_s, "cost_model": cost_model_name(body),
        "offered_rate_per_s": offered_rate(body, request_arrivals(body, result)),
        "wall_s": time.perf_counter() - t0,
        "heldout_bands": bands_doc(dep, body),       # round 19 (issue 33): the held-out error bands
    }
    return RunOutput(result, metrics, diagnosis, body.slo.as_dict() or None, info)


def in_config_order(configs: dict[str, Any], runs: dict[str, Any]) -> dict[str, Any]:
    """``runs`` in the order of ``configs`` (baseline first), whichever finished or came from the cache first:
    the page's columns, charts and colours follow this order (the first run is drawn blue)."""
    return {name: runs[name] for name in configs if name in runs}


def headline(info: dict[str, Any]) -> str:
    if "pools" in info:
        return pd_headline(info)
    formats = "".join(f", {part}" for part in info.get("formats", ()))
    return (f"{info['model']} on {info['replicas']}×{info['tensor_parallel_size']} {info['gpu']}{formats} · "
            f"{info['scheduler']}, max_num_seqs {info['max_num_seqs']}, max_num_batched_tokens "
            f"{info['max_num_batched_tokens']}, prefix caching {'on' if info['enable_prefix_caching'] else 'off'}"
            f" · KV pool {info['kv_capacity_tokens']:,} tokens")


# --------------------------------------------------------------------------------------------------------
# load sweep
# --------------------------------------------------------------------------------------------------------
def load_of(raw: dict[str, Any]) -> tuple[str, float] | None:
    """What a sweep varies: ``("rate", req/s)``, ``("concurrency", users)`` or ``("time_scale", x)``."""
    wl = raw.get("workload") or {}
    arr = wl.get("arrivals")
    mode = _arrivals_mode(arr)
    if mode == "rate":
        return "rate", float(arr["rate_per_s"])
    if mode == "concurrency":
        return "concurrency", float(arr["concurrency"])
    trace = wl.get("trace")
    if isinstance(trace, dict) and arr is None:
        return "time_scale", float(trace.get("time_scale", 1.0))
    return None


def load_label(kind: str, value: float) -> str:
    if kind == "rate":
        return f"{numbers.given(value)} req/s"
    if kind == "concurrency":
        return f"{int(value)} users"
    return f"{numbers.given(value)}× trace speed"


def with_load(raw: dict[str, Any], kind: str, value: float, max_requests: int = SWEEP_REQUESTS) -> dict[str, Any]:
    """``raw`` at another load, cut to about ``max_requests`` requests."""
    data = copy.deepcopy(raw)
    wl = data["workload"]
    if kind == "time_scale":
        wl["trace"]["time_scale"] = float(value)
        cap = wl["trace"].get("max_requests")
        wl["trace"]["max_requests"] = min(int(cap), max_requests) if cap else max_requests
        return data
    if kind == "rate":
        wl["arrivals"]["rate_per_s"] = float(value)
    else:
        wl["arrivals"]["concurrency"] = max(1, int(round(value)))
    if wl.get("trace") is not None:
        cap = wl["trace"].get("max_requests")
        wl["trace"]["max_requests"] = min(int(cap), max_requests) if cap else max_requests
    else:
        wl["num_requests"] = min(int(wl["num_requests"]), max_requests) if wl.get("num_requests") else max_requests
        wl["duration_s"] = None
    data["warmup_s"] = 0.0
    return data


def sweep_plan(base_raw: dict[str, Any], whatif_raw: dict[str, Any],
               multipliers: tuple[float, ...] = SWEEP_MULTIPLIERS) -> dict[str, list[tuple[str, float]]]:
    """Loads to run per configuration. Both sweep the same loads (multiples of the baseline's) when they vary
    the same thing; the what-if's own load is added so its operating point is on its curve."""
    plan: dict[str, list[tuple[str, float]]] = {}
    base = load_of(base_raw)
    what = load_of(whatif_raw)
    if base is not None:
        plan[BASELINE_LABEL] = _loads(base, multipliers)
    if what is not None:
        if base is not None and base[0] == what[0]:
            loads = _loads(base, multipliers)
            if all(not math.isclose(v, what[1]) for _, v in loads):
                loads = sorted(loads + [what], key=lambda kv: kv[1])
            plan[WHATIF_LABEL] = loads
        else:
            plan[WHATIF_LABEL] = _loads(what, multipliers)
    return plan


def _loads(load: tuple[str, float], multipliers: tuple[float, ...]) -> list[tuple[str, float]]:
    kind, value = load
    out: list[tuple[str, float]] = []
    for m in multipliers:
        v = value * m
        if kind == "concurrency":
            v = float(max(1, int(round(v))))
        if all(not math.isclose(v, w) for _, w in out):
            out.append((kind, v))
    return out


SWEEP_KEYS = ("request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms",
              "p99_tpot_ms", "median_e2el_ms", "p99_e2el_ms", "completed", "failed")


def run_sweep_point(data: dict[str, Any], kind: str, value: float, base_dir: str | None = None) -> dict[str, Any]:
    """One point of a load sweep: the metrics a throughput-latency curve needs, and the load's label."""
    body = validate(with_load(data, kind, value))
    bd = Path(base_dir) if base_dir else None
    result = run_body(body, bd)
    m = result.metrics()
    point = {k: m.get(k) for k in SWEEP_KEYS}
    point.update(load=load_label(kind, value), load_kind=kind, load_value=value)
    return point

