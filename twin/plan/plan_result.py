"""A plan's answer: ``PlanResult`` (the candidates' max rates, the deployments simulated at the target, the
cheapest passing deployment, the cost-latency frontier; as a dict, tables and a figure), ``build_plan_result``
that assembles it, and the statistics it uses (``confidence_interval``, ``pareto``)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from twin.results import numbers
from twin.hardware.pricing import usd_per_million_tokens
from twin.plan.capacity import Capacity
from twin.plan.heldout_rows import band_columns, band_document, server_label
from twin.plan.whatif_axes import plan_whatif
from twin.plan.plan_spec import PlanSpec

if TYPE_CHECKING:  # pragma: no cover
    from twin.plan.executor import Runner
    from twin.plan.planner import Planner


def confidence_interval(values: Sequence[float], confidence: float = 0.95) -> dict[str, float | None]:
    """Mean and Student-t interval of replications (half-width None with fewer than two)."""
    from scipy import stats

    xs = [float(v) for v in values]
    n = len(xs)
    if not n:
        return {"mean": None, "low": None, "high": None, "half_width": None, "n": 0}
    mean = sum(xs) / n
    if n < 2:
        return {"mean": mean, "low": None, "high": None, "half_width": None, "n": n}
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
    return {"mean": mean, "low": mean - half, "high": mean + half, "half_width": half, "n": n}


def build_plan_result(planner: Planner, caps: dict[int, Capacity], verified: dict[int, dict], runner: Runner,
                      wall_s: float) -> PlanResult:
    """The plan's answer from the capacities and the verified replica counts: a row per candidate, the
    deployments simulated at the target, the cheapest passing one and the cost-latency frontier."""
    from twin.analysis.run_limits import agreed

    spec = planner.spec
    rows = []
    for c in planner.candidates:
        row: dict[str, Any] = {"candidate": c.index, "overrides": c.describe(), **c.settings,
                               "price_per_replica_hour": c.price_per_replica_hour}
        if c.error is not None:
            row.update(status="infeasible", note=c.error)
            rows.append(row)
            continue
        cap = caps[c.index]
        rates = [s * planner.base_rate for s in cap.scales()]
        ci = confidence_interval(rates, spec.confidence)
        row.update(status=cap.status, note=cap.note,
                   max_rate_per_s=ci["mean"], max_rate_ci_high=ci["high"],
                   max_rate_ci_low=None if ci["low"] is None else max(0.0, ci["low"]),  # a rate is >= 0
                   max_rate_per_replication=[round(r, 6) for r in rates],
                   failing_rate_per_replication=[None if b.hi is None else round(b.hi * planner.base_rate, 6)
                                                 for b in cap.brackets],
                   simulations=sum(len(b.trail) for b in cap.brackets))
        if cap.status == "pruned":
            row["max_rate_upper_bound"] = min(b.hi for b in cap.brackets) * planner.base_rate
        out_tokens = [b.lo_result.get("mean_output_tokens") for b in cap.brackets
                      if b.lo_result is not None and b.lo_result.get("mean_output_tokens")]
        in_tokens = [b.lo_result.get("mean_input_tokens") for b in cap.brackets
                     if b.lo_result is not None and b.lo_result.get("mean_input_tokens")]
        if ci["mean"] and out_tokens and c.price_per_replica_hour is not None:
            mean_out = sum(out_tokens) / len(out_tokens)
            mean_in = sum(in_tokens) / len(in_tokens) if in_tokens else 0.0
            row["usd_per_million_output_tokens_at_max_rate"] = usd_per_million_tokens(
                c.price_per_replica_hour, ci["mean"] * mean_out)
            row["usd_per_million_tokens_at_max_rate"] = usd_per_million_tokens(
                c.price_per_replica_hour, ci["mean"] * (mean_out + mean_in))
        if cap.status == "measured" or cap.status == "unbounded":
            row["replicas_estimate"] = math.ceil(planner.target_rate / ci["mean"]) if ci["mean"] else None
        for k in ("limit", "limit_knob"):       # what stops a higher rate: the limit at the lowest failing rate
            row[k] = agreed([b.hi_result.get(k) for b in cap.brackets if b.hi_result is not None])
        row["heldout_server"] = server_label(c.servers)       # the held-out error band's server (issue 33)
        rows.append(row)

    deployments = []
    for idx, ver in verified.items():
        c = planner.candidates[idx]
        n = ver.get("n")
        trail = [[m, ok] for m, (ok, _) in sorted(ver.get("tested", {}).items())]
        for m, (ok, results) in sorted(ver.get("tested", {}).items()):
            if n is None or m < n or m > n + spec.frontier_extra:
                continue
            good = [r for r in results if r.get("ok")]
            metrics = _mean_metrics([r["metrics"] for r in good])
            cost = c.price_per_replica_hour * m
            n_req = metrics.get("num_requests") or 0
            dep = {
                "candidate": idx, **c.settings, "replicas": m, "gpus": m * c.settings["tensor_parallel_size"],
                "router": spec.router, "passed": ok, "minimal": m == n, "cost_per_hour": cost,
                "target_rate_per_s": planner.target_rate,
                "usd_per_million_output_tokens": usd_per_million_tokens(cost, metrics.get("output_throughput")),
                "usd_per_million_tokens": usd_per_million_tokens(cost, metrics.get("total_token_throughput")),
                "goodput_fraction": (metrics.get("num_good_requests") / n_req
                                     if n_req and metrics.get("num_good_requests") is not None else None),
                "reasons": sorted({x for r in good for x in r.get("reasons", [])}),
            }
            if m == n:
                dep["replicas_tried"] = trail
            for k in ("request_throughput", "output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p99_tpot_ms",
                      "p99_itl_ms", "p99_e2el_ms", "mean_ttft_ms", "mean_tpot_ms", "prefix_cache_hit_rate",
                      "busy_fraction", spec.latency_metric):
                dep[k] = metrics.get(k)
            for k in ("limit", "limit_knob"):           # what limits it (twin.analysis.run_limits)
                dep[k] = agreed([r.get(k) for r in good])
            dep["heldout_server"] = server_label(c.servers)
            deployments.append(dep)
        if n is None:
            deployments.append({"candidate": idx, **c.settings, "replicas": None, "passed": False,
                                "minimal": False, "note": ver.get("note") or ver.get("error")})
    passing = [d for d in deployments if d.get("passed") and d.get("replicas")]
    passing.sort(key=lambda d: (d["cost_per_hour"], _num(d.get(spec.latency_metric)), d["candidate"]))
    best = passing[0] if passing else None
    frontier = pareto(passing, "cost_per_hour", spec.latency_metric)
    return PlanResult(
        spec=spec, base_rate=planner.base_rate, target_rate=planner.target_rate, target_scale=planner.target_scale,
        candidates=rows, deployments=deployments, best=best, frontier=frontier,
        num_simulations=runner.num_run, num_waves=runner.num_waves, wall_s=wall_s,
        replications=planner.replications,
        band_keys={c.index: c.servers for c in planner.candidates if c.error is None},
        whatif=plan_whatif(spec.data, [c.overrides for c in planner.candidates if c.error is None],
                           [d["replicas"] for d in deployments if d.get("replicas")]),
    )


def _num(x: Any) -> float:
    return float(x) if isinstance(x, (int, float)) and x is not None else math.inf


def _mean_metrics(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not runs:
        return out
    for k in runs[0]:
        vals = [r.get(k) for r in runs]
        nums = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        out[k] = sum(nums) / len(nums) if nums and len(nums) == len(vals) else None
    return out


def pareto(points: Sequence[Mapping[str, Any]], cost_key: str, latency_key: str) -> list[dict[str, Any]]:
    """Points no other point beats on both cost and latency (lower is better), by cost."""
    pts = sorted(points, key=lambda p: (p[cost_key], _num(p.get(latency_key))))
    out, best_latency = [], math.inf
    for p in pts:
        lat = _num(p.get(latency_key))
        if lat < best_latency:
            out.append(dict(p))
            best_latency = lat
    return out


@dataclass
class PlanResult:
    spec: PlanSpec
    base_rate: float
    target_rate: float
    target_scale: float
    candidates: list[dict[str, Any]]
    deployments: list[dict[str, Any]]
    best: dict[str, Any] | None
    frontier: list[dict[str, Any]]
    num_simulations: int
    num_waves: int
    wall_s: float
    replications: int = 1
    band_keys: dict[int, list] = field(default_factory=dict)   # candidate -> held-out band servers (issue 33)
    whatif: dict[str, Any] | None = None     # the what-if band between the candidates (twin.plan.whatif_axes)

    def band_order(self) -> dict[str, list]:
        """{``#candidate``: its servers} for the deployments simulated at the target, the cheapest first (the
        held-out error bands' note and document; ``twin.plan.heldout_rows``)."""
        shown = {d["candidate"]: f"#{d['candidate']} ({d['gpu']} TP{d['tensor_parallel_size']})"
                 for d in ([self.best] if self.best else []) + self.deployments}
        return {name: self.band_keys.get(i, []) for i, name in shown.items()}

    def band_document(self) -> dict[str, Any]:
        """The plan's ``heldout_bands`` (``heldout_rows.band_document``): the cheapest deployment recommended."""
        order = self.band_order()
        return band_document(order, recommended=next(iter(order)) if self.best else None)

    def to_dict(self) -> dict[str, Any]:
        s = self.spec
        return {
            "target_rate_per_s": self.target_rate, "scenario_rate_per_s": self.base_rate,
            "target_rate_scale": self.target_scale,
            "criteria": s.criteria.as_dict(), "router": s.router, "replications": self.replications,
            "rel_tol": s.rel_tol, "confidence": s.confidence, "latency_metric": s.latency_metric,
            "prices_per_gpu_hour": {c["gpu"]: c["price_per_gpu_hour"] for c in self.candidates if c.get("gpu")},
            "best": self.best, "frontier": self.frontier, "deployments": self.deployments,
            "candidates": self.candidates,
            "num_simulations": self.num_simulations, "num_waves": self.num_waves, "wall_s": self.wall_s,
            "heldout_bands": self.band_document(),
            **({"whatif": self.whatif} if self.whatif is not None else {}),
        }

    def candidates_frame(self):
        import pandas as pd

        frame = pd.DataFrame(self.candidates)
        for col in ("max_rate_per_replication", "failing_rate_per_replication"):
            if col in frame:
                frame[col] = frame[col].map(lambda v: json.dumps(v) if isinstance(v, list) else v)
        return self._with_bands(frame)

    def _with_bands(self, frame):
        """A table with its rows' held-out bands as a JSON column (``heldout_rows.band_columns``), last."""
        if "candidate" in frame:
            frame["heldout_bands"] = frame["candidate"].map(
                lambda i: band_columns(self.band_keys[i])["heldout_bands"] if i in self.band_keys else None)
        return frame

    def deployments_frame(self):
        import pandas as pd

        frame = pd.DataFrame(self.deployments)
        if "reasons" in frame:
            frame["reasons"] = frame["reasons"].map(lambda v: "; ".join(v) if isinstance(v, list) else v)
        return self._with_bands(frame)

    def figure(self):
        """Cost per hour against the latency metric for every deployment simulated at the target, the
        frontier joined by a line and the cheapest passing deployment starred."""
        import plotly.graph_objects as go

        key = self.spec.latency_metric
        fig = go.Figure()
        pts = [d for d in self.deployments if d.get("replicas")]
        for ok in (True, False):
            sel = [d for d in pts if bool(d["passed"]) == ok]
            if not sel:
                continue
            fig.add_trace(go.Scatter(
                x=[d["cost_per_hour"] for d in sel], y=[d.get(key) for d in sel], mode="markers",
                name="meets the SLOs" if ok else "misses the SLOs",
                marker={"size": 10, "symbol": "circle" if ok else "x"},
                text=[f"{d['replicas']}x {d['gpu']} TP{d['tensor_parallel_size']} max_num_seqs={d['max_num_seqs']}"
                      for d in sel],
                hovertemplate="%{text}<br>$%{x:.2f}/h<br>" + key + "=%{y:,.4r}<extra></extra>"))
        if self.frontier:
            fig.add_trace(go.Scatter(x=[d["cost_per_hour"] for d in self.frontier],
                                     y=[d.get(key) for d in self.frontier], mode="lines", name="frontier",
                                     line={"dash": "dot"}))
        if self.best:
            fig.add_trace(go.Scatter(x=[self.best["cost_per_hour"]], y=[self.best.get(key)], mode="markers",
                                     name="cheapest", marker={"size": 18, "symbol": "star"}))
        fig.update_layout(title=f"Cost-latency frontier at {numbers.with_unit(self.target_rate, 'req/s')}",
                          xaxis_title="USD per hour", yaxis_title=key, template="plotly_white")
        return fig
