"""Planning prefill/decode disaggregation: which P:D ratio (and offload size, link, GPU per pool, any other
scenario key) serves a target rate within the SLOs at the least cost.

``twin plan`` on a scenario with a ``disaggregation:`` section runs this instead of the replica search: the
search space is a grid (``disaggregation.prefill.replicas`` and ``disaggregation.decode.replicas``, 1 to 4 each
unless the plan gives them, times any other axis, e.g. ``server.kv_offloading_size``), every point is simulated
at the target rate (``replications`` seeds; a point passes when every replication meets the criteria), and
its cost is the GPUs of both pools at their hourly prices. The answer: every point's latency, throughput, cost,
verdict and what limits it (``limit`` / ``limit_knob``, the binding pool named: ``KV pool in the decode pool``),
the cheapest passing point and the cost-latency frontier (Pareto points of hourly cost against
``latency_metric`` among the passing ones).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from twin.errors import TwinInputError
from twin.hardware.pricing import PriceTable, usd_per_million_tokens
from twin.plan.evaluate import Criteria, SimJob, check_metric, offered_rate, validate_body
from twin.plan.heldout_rows import band_document, band_servers, server_label
from twin.plan.grid import MAX_GRID_POINTS
from twin.plan.overrides import apply_overrides

PD_KEYS = ("disaggregation.prefill.replicas", "disaggregation.decode.replicas")
DEFAULT_ENGINES = (1, 2, 3, 4)


def pd_points(space: Sequence[tuple[str, Sequence[Any]]]) -> list[dict[str, Any]]:
    """The grid's points (override mappings), the P and D axes first (1..4 each when the space has none)."""
    axes = dict(space)
    for key in PD_KEYS:
        axes.setdefault(key, list(DEFAULT_ENGINES))
    keys = [*PD_KEYS, *(k for k in axes if k not in PD_KEYS)]
    n = 1
    for k in keys:
        n *= len(axes[k])
    if n > MAX_GRID_POINTS:
        raise TwinInputError(f"search: {n} points; at most {MAX_GRID_POINTS}")
    return [dict(zip(keys, values)) for values in itertools.product(*(axes[k] for k in keys))]


def pool_gpus(body: Any) -> dict[str, tuple[str, int]]:
    """Per pool, its GPU type and GPU count (engines x TP x PP x DP)."""
    dep, dis = body.deployment, body.disaggregation
    out = {}
    for name in ("prefill", "decode"):
        pool = getattr(dis, name)
        tp = pool.tensor_parallel_size or dep.tensor_parallel_size
        dp = pool.data_parallel_size or dep.data_parallel_size
        out[name] = (pool.gpu or dep.gpu, pool.replicas * tp * dp * dep.pipeline_parallel_size)
    return out


def _mean(values: list[Any]) -> float | None:
    vals = [v for v in values if isinstance(v, (int, float))]
    return sum(vals) / len(vals) if vals and len(vals) == len(values) else None


def _pareto(rows: list[dict[str, Any]], metric: str) -> list[dict[str, Any]]:
    """Passing rows not beaten on both hourly cost and ``metric`` (ties keep the first)."""
    ok = sorted((r for r in rows if r["passed"] and r.get(metric) is not None),
                key=lambda r: (r["usd_per_hour"], r[metric]))
    out, best = [], None
    for r in ok:
        if best is None or r[metric] < best:
            out.append(r)
            best = r[metric]
    return out


def plan_pd(data: Mapping[str, Any], *, base_dir: str | None, criteria: Criteria, prices: PriceTable,
            target_rate: float | None, space: Sequence[tuple[str, Sequence[Any]]], replications: int, runner: Any,
            latency_metric: str = "p99_ttft_ms") -> dict[str, Any]:
    """Simulate every point of the P/D grid at the target rate; see the module's docstring."""
    from twin.analysis.run_limits import agreed

    if not criteria.slo and criteria.goodput is None:
        raise TwinInputError("slo: planning needs SLOs (in the scenario's slo: section or given to the plan)")
    check_metric(latency_metric, "latency_metric")
    base_rate = offered_rate(data, base_dir)
    target = target_rate if target_rate is not None else base_rate
    scale = target / base_rate
    points = pd_points(space)
    bodies = []
    for pt in points:
        where = "search " + ", ".join(f"{k}={v}" for k, v in pt.items())
        bodies.append(validate_body(apply_overrides(data, pt), where))
    reps = range(replications)
    jobs = [SimJob(apply_overrides(dict(data), pt), base_dir, r, scale, criteria=criteria) for pt in points for r in reps]
    results = runner.run(jobs)
    rows, keys = [], {}
    for i, (pt, body) in enumerate(zip(points, bodies)):
        res = results[i * len(reps):(i + 1) * len(reps)]
        errors = [x["error"] for x in res if not x.get("ok")]
        gpus = pool_gpus(body)
        cost, missing = 0.0, []
        for gpu, n in gpus.values():
            price = prices.get(gpu)
            if price is None:
                missing.append(gpu)
            else:
                cost += price * n
        m = [x.get("metrics", {}) for x in res if x.get("ok")]
        row: dict[str, Any] = {
            "config": f"{pt[PD_KEYS[0]]}P{pt[PD_KEYS[1]]}D",
            **{k: v for k, v in pt.items() if k not in PD_KEYS},
            "gpus": sum(n for _, n in gpus.values()), "usd_per_hour": None if missing else cost,
            "passed": not errors and not missing and all(x.get("passed") for x in res),
            "reasons": errors or ([f"no price for {', '.join(missing)}"] if missing else
                                  sorted({r for x in res for r in x.get("reasons", [])})),
        }
        for key in ("p99_ttft_ms", "median_ttft_ms", "p99_tpot_ms", "median_tpot_ms", "output_throughput",
                    "request_throughput", latency_metric):
            row[key] = _mean([x.get(key) for x in m]) if m else None
        row["usd_per_million_output_tokens"] = (usd_per_million_tokens(cost, row["output_throughput"])
                                                if not missing else None)
        for k in ("limit", "limit_knob"):      # what limits the point, with its pool (twin.analysis.run_limits)
            row[k] = agreed([x.get(k) for x in res if x.get("ok")])
        keys[row["config"]] = band_servers([body], base_dir)       # the held-out error bands (issue 33)
        row["heldout_server"] = server_label(keys[row["config"]])
        rows.append(row)
    passing = [r for r in rows if r["passed"]]
    cheapest = min(passing, key=lambda r: (r["usd_per_hour"], r[latency_metric] or 0.0)) if passing else None
    return {"target_rate_per_s": target, "base_rate_per_s": base_rate, "replications": replications,
            "criteria": criteria.as_dict(), "latency_metric": latency_metric, "rows": rows,
            "cheapest": cheapest, "frontier": _pareto(rows, latency_metric),
            "heldout_bands": band_document(keys, recommended=cheapest["config"] if cheapest else None)}
