"""One simulation as a self-contained, picklable job, and what counts as passing.

Sweeps and the planner describe every simulation they need as a ``SimJob`` (a raw scenario mapping, a
replication, an arrival-rate scale, optionally a cluster of replica groups and a router) and run them with
``evaluate`` on any backend (``twin.plan.executor``). A job's result depends on nothing but the job, so a sweep
gives the same numbers serially, on a process pool or on Ray, with any number of workers.

Arrival-rate scaling (``scale_arrivals``): a synthetic workload's rates (``rate_per_s``, a ramp's start and
end, each piece of a ``piecewise`` schedule) are multiplied by the scale; a trace replayed on its own timestamps is replayed
faster (``trace.time_scale`` multiplied). Arrival times of the same seed then shrink by exactly that factor
(every process is a unit-rate process divided by the rate), so runs at different scales see the same
requests, only closer together: "fails at rate r, so fails above r" holds run by run, up to batching effects.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from twin.errors import TwinInputError
from twin.results.report import format_value
from twin.results.numbers import counted

# the metrics a job hands back (scalars; the full set stays in the worker)
RESULT_KEYS = (
    "duration", "completed", "failed", "num_requests", "num_incomplete", "num_good_requests",
    "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput", "output_throughput",
    "total_token_throughput",
    "mean_ttft_ms", "median_ttft_ms", "p50_ttft_ms", "p90_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "p90_tpot_ms", "p99_tpot_ms",
    "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms",
    "prefix_cache_hit_rate", "num_preemptions", "busy_fraction", "mean_running_batch", "mean_queue_length",
    "mean_kv_usage", "max_kv_usage", "max_in_flight_requests", "num_replicas",
    "spec_decode_acceptance_rate", "spec_decode_acceptance_length",
)


def check_metric(value: Any, field: str) -> None:
    """A metric named by the user (a plan's latency axis, an Optuna objective) must be one a run reports."""
    if not isinstance(value, str) or value not in RESULT_KEYS:
        raise TwinInputError(f"{field}: {value!r}: not a metric of a run; allowed: {', '.join(RESULT_KEYS)}")


# ---------------------------------------------------------------------------------------------------------
# arrival-rate scaling
# ---------------------------------------------------------------------------------------------------------
def scale_arrivals(data: Mapping[str, Any], scale: float) -> dict[str, Any]:
    """A copy of a raw scenario mapping with its arrival rate multiplied by ``scale``."""
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise TwinInputError(f"rate scale: {scale!r}: must be a finite number > 0")
    out = copy.deepcopy(dict(data))
    if scale == 1:
        return out
    wl = out.get("workload")
    if not isinstance(wl, dict):
        raise TwinInputError("workload: a mapping is required to scale the arrival rate")
    arr = wl.get("arrivals")
    if arr is None:
        trace = wl.get("trace")
        if not isinstance(trace, dict):
            raise TwinInputError("workload: neither arrivals nor a trace to scale the arrival rate of")
        trace["time_scale"] = float(trace.get("time_scale", 1.0)) * scale
        return out
    process = arr.get("process")
    if process == "closed_loop":
        raise TwinInputError("workload.arrivals.process: closed_loop has no arrival rate to scale; capacity "
                             "planning and rate sweeps need open-loop arrivals (poisson, gamma, constant, "
                             "piecewise or a trace)")
    if process == "piecewise":
        for piece in arr.get("schedule") or []:
            piece["rate_per_s"] = float(piece.get("rate_per_s", 0.0)) * scale
        return out
    if process == "ramp_up":
        for key in ("start_rps", "end_rps"):
            arr[key] = float(arr.get(key, 0.0)) * scale
        return out
    rate = arr.get("rate_per_s")
    if rate is None:
        raise TwinInputError("workload.arrivals.rate_per_s: is required to scale the arrival rate")
    if isinstance(rate, (int, float)) and math.isinf(rate):
        raise TwinInputError("workload.arrivals.rate_per_s: .inf (everything at t=0) has no rate to scale")
    arr["rate_per_s"] = float(rate) * scale
    return out


def offered_rate(data: Mapping[str, Any], base_dir: str | Path | None = None, seed: int | None = None) -> float:
    """Requests per second the scenario offers at scale 1, as `twin run` and the dashboard count it
    (``twin.analysis.offered_load.offered_rate``, over the requests the scenario draws): the nominal rate for
    single requests (synthetic or a trace's rows) under one arrival rate, otherwise requests over the span they arrive in
    (``duration_s``, a trace's ``window_s / time_scale``, or first to last arrival). A closed loop, fewer than
    2 requests or all at once: a ``TwinInputError`` (the planner scales a rate)."""
    from twin.analysis.offered_load import offered_rate as rate_of
    from twin.workload.generate import open_loop_specs

    body = validate_body(data)
    wl = body.workload
    if wl.closed_loop:
        raise TwinInputError("workload.arrivals.process: closed_loop has no offered rate; use open-loop arrivals")
    nominal = rate_of(body)
    if nominal is not None:
        return nominal
    specs = open_loop_specs(wl, body.seed if seed is None else seed, base_dir=base_dir)
    if len(specs) < 2:
        raise TwinInputError(f"workload: {counted(len(specs), 'request')}; cannot tell an arrival rate from "
                             "fewer than 2")
    rate = rate_of(body, [s.arrival_s for s in specs])
    if rate is None:
        raise TwinInputError("workload: all requests arrive at once; no arrival rate to speak of")
    return rate


def validate_body(data: Mapping[str, Any], where: str = "scenario"):
    from pydantic import ValidationError

    from twin.scenario import ScenarioBody
    from twin.workload.validation_errors import format_validation_error

    try:
        return ScenarioBody.model_validate(dict(data))
    except ValidationError as exc:
        raise TwinInputError(f"{where}: {format_validation_error(exc)}") from None


def check_axis_values(data: Mapping[str, Any], axes, what: str = "grid",
                      base_dir: str | Path | None = None) -> None:
    """Each value of each knob axis, set alone over the scenario, must make a valid scenario, and a GPU or
    model must name one the twin knows (a catalog name or a spec file), so a typo or an impossible value is an
    error before anything runs (combinations, and whether a model fits a GPU, are still checked point by
    point)."""
    from twin.hardware.catalog import resolve_gpu, resolve_model
    from twin.plan.grid import GROUPS_KEY, RATE_KEYS
    from twin.plan.overrides import apply_overrides, label
    from twin.sim.deployment import relative_to

    validate_body(data)
    base = Path(base_dir) if base_dir is not None else None
    for key, values in axes:
        if key in RATE_KEYS or key == GROUPS_KEY:
            continue
        for value in values:
            where = f"{what} {key}={label(value)}"
            body = validate_body(apply_overrides(data, {key: value}), where)
            try:
                if key == "deployment.gpu":
                    resolve_gpu(relative_to(body.deployment.gpu, base))
                elif key == "deployment.model":
                    resolve_model(relative_to(body.deployment.model, base))
            except TwinInputError as exc:
                raise TwinInputError(f"{where}: {exc}") from None


# ---------------------------------------------------------------------------------------------------------
# pass / fail
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Criteria:
    """What "meets the SLOs" means for one run.

    ``slo`` is a scenario ``slo:`` mapping (``{ttft_ms: {p99: 1000}, tpot_ms: {p99: 50}, e2el_ms: 20000}``) in
    any spelling ``twin.slo_section`` reads (``as_dict`` echoes its normalised form): a mapping is a statistic
    bound that must hold; a plain number is a per-request threshold for goodput.
    ``goodput``: the fraction of measured requests (rejected ones included) that must meet every per-request
    threshold (thresholds come from plain numbers and, for TTFT/TPOT/E2EL bounds, from the bound itself, as
    ``twin.results.slo.parse_slo`` derives them). With only plain-number thresholds and no ``goodput``, 0.99 is
    required. Rejected requests beyond ``max_rejected_fraction`` and requests still in flight when the run
    stopped fail the run."""

    slo: Mapping[str, Any] | str | list[str] | None = None
    goodput: float | None = None
    max_rejected_fraction: float = 0.0

    def __post_init__(self) -> None:
        g = self.goodput
        if g is not None and (isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 < g <= 1):
            raise TwinInputError(f"goodput: {g!r}: must be a fraction in (0, 1], e.g. 0.99")
        if self.slo is not None:
            from twin.slo_section import slo_section

            slo_section(self.slo)  # fail early on a bad SLO (one reader, one wording)

    @property
    def section(self) -> dict[str, Any]:
        """``slo`` in the scenario's form, as every other path prints it (``ttft`` -> ``ttft_ms``, vLLM's
        ``"ttft:500 tpot:50"`` -> a mapping; ``twin.slo_section.slo_section``); ``{}`` for none."""
        from twin.slo_section import slo_section

        return slo_section(self.slo)

    @property
    def effective_goodput(self) -> float | None:
        section = self.section
        if self.goodput is not None or not section:
            return self.goodput
        if all(not isinstance(v, Mapping) for v in section.values()):
            return 0.99
        return None

    def as_dict(self) -> dict[str, Any]:
        return {"slo": self.section or None, "goodput": self.goodput,
                "max_rejected_fraction": self.max_rejected_fraction}


def judge(metrics: Mapping[str, Any], criteria: Criteria | None) -> tuple[bool | None, list[str]]:
    """(passed, reasons it failed). ``None`` when nothing is asked of the run."""
    if criteria is None or (not criteria.slo and criteria.goodput is None):
        return None, []
    reasons: list[str] = []
    n = metrics.get("num_requests") or 0
    if metrics.get("num_incomplete"):
        reasons.append(f"{metrics['num_incomplete']} requests still in flight when the run stopped")
    rejected = metrics.get("num_rejected") or 0
    if n and rejected / n > criteria.max_rejected_fraction:
        reasons.append(f"{rejected} of {n} requests rejected (never fit)")
    if not metrics.get("completed"):
        reasons.append("no request completed")
    for key, met in (metrics.get("slo_met") or {}).items():
        if met is None:
            reasons.append(f"{key} undefined")
        elif not met:
            value = metrics.get(key)
            reasons.append(f"{key} = {format_value(key, value)}" if isinstance(value, (int, float))
                           else f"{key} missed")
    g = criteria.effective_goodput
    if g is not None:
        good = metrics.get("num_good_requests")
        if good is None:
            raise TwinInputError("goodput: needs a per-request threshold in the SLO (e.g. ttft_ms: 500)")
        frac = good / n if n else 0.0
        if frac + 1e-12 < g:
            reasons.append(f"goodput fraction {frac:.4f} < {g:g}")
    return not reasons, reasons


# ---------------------------------------------------------------------------------------------------------
# jobs
# ---------------------------------------------------------------------------------------------------------
@dataclass
class SimJob:
    """One simulation. ``data`` is the complete raw scenario mapping (variant and overrides merged in);
    ``rate_scale`` multiplies its arrival rate; ``groups`` (replica-group mappings) and ``router`` make it a
    cluster run; ``criteria`` decides ``passed``; ``per_replica`` also returns per-replica rows; ``tag`` is
    carried back untouched (not part of the job's identity)."""

    data: dict[str, Any]
    base_dir: str | None = None
    replication: int = 0
    rate_scale: float = 1.0
    groups: list[dict[str, Any]] | None = None
    router: str | None = None
    criteria: Criteria | None = None
    per_replica: bool = False
    tag: Any = field(default=None, compare=False)

    def key(self) -> str:
        """A canonical identity: equal keys, equal results."""
        return json.dumps({
            "data": self.data, "base_dir": self.base_dir, "replication": self.replication,
            "rate_scale": repr(float(self.rate_scale)), "groups": self.groups, "router": self.router,
            "criteria": self.criteria.as_dict() if self.criteria else None, "per_replica": self.per_replica,
        }, sort_keys=True, default=repr)


def replication_kind(data: Mapping[str, Any]) -> str:
    """How replications differ: ``seed`` (seed + r: every synthetic or retimed workload), ``window`` (a trace
    replayed on its own timestamps with a ``window_s``: replication r replays the r-th next window,
    ``start_s + r * window_s``, so replications are different stretches of real traffic) or ``none`` (a whole
    trace replayed as it is: nothing is random, one replication says everything)."""
    wl = data.get("workload") or {}
    if wl.get("arrivals") is not None or wl.get("prefix_header") == "shuffled_sections" or wl.get("classes"):
        return "seed"
    trace = wl.get("trace") or {}
    return "window" if trace.get("window_s") else "none"


def replication_data(data: Mapping[str, Any], replication: int) -> dict[str, Any]:
    """The scenario mapping replication ``replication`` runs (see ``replication_kind``)."""
    out = copy.deepcopy(dict(data))
    if replication and replication_kind(out) == "window":
        trace = out["workload"]["trace"]
        trace["start_s"] = float(trace.get("start_s", 0.0)) + replication * float(trace["window_s"])
    return out


def effective_replications(data: Mapping[str, Any], replications: int) -> int:
    """1 when replications could not differ (a whole trace replayed as it is), else ``replications``."""
    return 1 if replication_kind(data) == "none" else replications


def job_body(job: SimJob):
    """The validated scenario body a job runs: the replication's data (``replication_data``), the arrival
    rate scaled, the criteria's SLO in place of the scenario's."""
    data = scale_arrivals(replication_data(job.data, job.replication), job.rate_scale)
    if job.criteria is not None and job.criteria.section:
        data["slo"] = job.criteria.section
    return validate_body(data)


def job_deployment(job: SimJob, body: Any, base: Path | None) -> Any:
    """The deployment a job runs, resolved once for the run and its limit's diagnosis: prefill/decode pools,
    the cluster of the job's (or the scenario's) replica groups, or the scenario's own deployment where the run
    is exactly `twin run`'s (``twin.sim.cluster.run_cluster``'s shortcut)."""
    from twin.deploy.run import resolve_for_run
    from twin.sim.cluster import resolve_cluster

    if body.disaggregation is not None and job.groups is None:
        return resolve_for_run(body, base)
    if job.groups is None and body.deployment.groups is None and job.router in (None, body.deployment.router):
        return resolve_for_run(body, base)
    return resolve_cluster(body, job.groups, base)


def evaluate(job: SimJob) -> dict[str, Any]:
    """Run one job. Returns ``{"ok": True, "metrics": {...}, "slo_met": {...}, "passed": bool | None,
    "reasons": [...], "replicas": int, "offered": float, "limit": str, "limit_knob": str | None}`` (plus
    ``"per_replica"``), or ``{"ok": False,
    "error": "..."}`` when the configuration is invalid (one line, naming the field)."""
    from twin.analysis.run_limits import short_doc
    from twin.sim.run import metrics_of
    from twin.sim.cluster import ClusterDeployment, per_replica_metrics, run_cluster

    try:
        body = job_body(job)
        base = Path(job.base_dir) if job.base_dir else None
        dep = job_deployment(job, body, base)
        if body.disaggregation is not None and job.groups is None:   # prefill/decode pools (twin.deploy)
            from twin.deploy.run import run_body

            result = run_body(body, base, replication=job.replication, deployment=dep)
        else:
            cluster = dep if isinstance(dep, ClusterDeployment) else None
            result = run_cluster(body, job.groups, base_dir=base, replication=job.replication, router=job.router,
                                 cluster=cluster, deployment=None if cluster else dep)
        full = metrics_of(result, body)
    except TwinInputError as exc:
        return {"ok": False, "error": str(exc)}
    criteria = job.criteria
    if criteria is None and body.slo.as_dict():
        criteria = Criteria(body.slo.as_dict())
    passed, reasons = judge(full, criteria)
    out: dict[str, Any] = {
        "ok": True,
        "metrics": {k: full.get(k) for k in RESULT_KEYS},
        "slo_met": full.get("slo_met") or {},
        "passed": passed,
        "reasons": reasons,
        "replicas": result.num_replicas,
        "mean_output_tokens": (full["total_output_tokens"] / full["completed"]) if full.get("completed") else None,
        "mean_input_tokens": (full["total_input_tokens"] / full["completed"]) if full.get("completed") else None,
        **short_doc(result, dep, full),      # what limits the run: "limit", "limit_knob" (twin.analysis.run_limits)
    }
    if job.per_replica:
        window = (body.warmup_s, None) if body.warmup_s > 0 else None
        out["per_replica"] = per_replica_metrics(result, slo=body.slo.as_dict() or None, window=window)
    return out
