"""Sweeps: a grid (or an Optuna search) over scenario knobs, run on any backend, as one table.

    spec = SweepSpec(data, grid=parse_grid_options(["server.max_num_seqs=4,16,64",
                                                    "deployment.gpu=H100-SXM,A100-SXM-80GB",
                                                    "rate_scale=0.5,1,2,4"]),
                     criteria=Criteria({"ttft_ms": {"p99": 1000}}))
    rows = run_sweep(spec, make_executor("process"))

A grid key is a dotted scenario path (``server.max_num_seqs``, ``deployment.gpu``, ``workload.arrivals.
rate_per_s``, ``speculative_decoding``), or one of two rate axes: ``rate_scale`` (multiplies the scenario's
arrival rate, see ``twin.plan.evaluate.scale_arrivals``) or ``rate`` (requests per second, converted to a scale
through the scenario's offered rate); or ``groups``, a list of replica groups for a mixed cluster
(``groups=[[{gpu: H100-SXM, replicas: 2}, {gpu: A100-SXM-80GB, replicas: 2}]]``). Values are YAML scalars (``null`` = vLLM's default; a value in
brackets is a YAML list, for mappings: ``speculative_decoding=[null, {method: ngram, ...}]``).

Pruning along the rate axis when there are criteria (the SLOs): a configuration that fails at rate r fails at
every higher rate (the same requests, only closer together). ``monotone`` runs the rates from low to high and
skips the rates above a failure (rows ``pruned``); ``bisect`` bisects the rate levels (``log2`` runs per
configuration; the levels it skips are ``inferred`` pass or fail); ``none`` runs everything. A (config, rate)
passes when every replication passes.

Every row is one (configuration, rate, replication); the result does not depend on the backend or on the
number of workers.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from twin.errors import TwinInputError
from twin.plan.evaluate import (
    RESULT_KEYS,
    Criteria,
    SimJob,
    effective_replications,
    check_axis_values,
    offered_rate,
    validate_body,
)
from twin.plan.executor import Runner, Search, gather
from twin.plan.grid import GROUPS_KEY, RATE_KEYS, check_grid
from twin.plan.heldout_rows import band_columns, band_servers
from twin.plan.overrides import apply_overrides, label
from twin.hardware.pricing import PriceTable, hourly_cost, usd_per_million_tokens

PRUNE_MODES = ("monotone", "bisect", "none")


@dataclass
class SweepSpec:
    data: dict[str, Any]
    grid: list[tuple[str, list[Any]]]
    base_dir: str | None = None
    replications: int = 1
    criteria: Criteria | None = None
    prune: str = "monotone"
    prices: PriceTable | None = None
    per_replica: bool = False
    offered_cache: dict[str, float] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.grid = check_grid(self.grid)
        check_axis_values(self.data, self.grid, base_dir=self.base_dir)
        if self.prune not in PRUNE_MODES:
            raise TwinInputError(f"prune: {self.prune!r}: allowed: {', '.join(PRUNE_MODES)}")
        if isinstance(self.replications, bool) or not isinstance(self.replications, int) or self.replications < 1:
            raise TwinInputError(f"replications: {self.replications!r}: must be an integer >= 1")
        self.replications = effective_replications(self.data, self.replications)

    @property
    def knob_axes(self) -> list[tuple[str, list[Any]]]:
        return [(k, v) for k, v in self.grid if k not in RATE_KEYS]

    @property
    def rate_axis(self) -> tuple[str, list[float]] | None:
        for k, v in self.grid:
            if k in RATE_KEYS:
                return k, sorted({float(x) for x in v})
        return None

    def configs(self) -> list[dict[str, Any]]:
        axes = self.knob_axes
        if not axes:
            return [{}]
        keys = [k for k, _ in axes]
        return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in axes))]

    def offered(self, data: Mapping[str, Any]) -> float | None:
        """The configuration's offered rate at scale 1 (cached per workload section and seed)."""
        key = json.dumps([data.get("workload"), data.get("seed", 0)], sort_keys=True, default=repr)
        if key not in self.offered_cache:
            try:
                self.offered_cache[key] = offered_rate(data, self.base_dir)
            except TwinInputError:
                self.offered_cache[key] = None
        return self.offered_cache[key]

    def levels(self, data: Mapping[str, Any]) -> list[tuple[float, float | None]]:
        """(rate_scale, offered req/s) per rate level, ascending; one level at scale 1 without a rate axis."""
        axis = self.rate_axis
        if axis is None:
            return [(1.0, self.offered(data))]
        key, values = axis
        base = self.offered(data)
        if key == "rate_scale":
            return [(v, base * v if base else None) for v in values]
        if not base:
            raise TwinInputError("grid rate: the scenario's offered rate is unknown (closed loop?); use rate_scale")
        return [(v / base, v) for v in values]

    def job(self, data: dict[str, Any], scale: float, replication: int, tag: Any = None,
            groups: list[dict[str, Any]] | None = None) -> SimJob:
        return SimJob(data, self.base_dir, replication, scale, groups=groups, criteria=self.criteria,
                      per_replica=self.per_replica, tag=tag)


def _config_info(spec: SweepSpec, config: Mapping[str, Any]
                 ) -> tuple[dict[str, Any], dict[str, Any] | None, str | None]:
    """(merged data, deployment facts, error) for one configuration. The grid key ``groups`` is a list of
    replica groups (``twin.sim.cluster.ReplicaGroup`` mappings): a mixed cluster instead of the deployment's
    replicas."""
    from twin.sim.cluster import group_body, load_groups

    knobs = {k: v for k, v in config.items() if k != GROUPS_KEY}
    data = apply_overrides(spec.data, knobs)
    where = "grid point " + ", ".join(f"{k}={label(v)}" for k, v in config.items())
    try:
        body = validate_body(data, where)
        groups = None
        if config.get(GROUPS_KEY) is not None:
            if not isinstance(config[GROUPS_KEY], list):
                raise TwinInputError(f"{where}: groups: must be a list of replica groups")
            groups = [g.model_dump(exclude_none=True) for g in load_groups(config[GROUPS_KEY])]
            bodies = [group_body(body, g) for g in load_groups(groups)]
        elif body.deployment.groups is not None:  # the scenario's own mixed cluster
            bodies = [group_body(body, g) for g in body.deployment.groups]
        else:
            bodies = [body]
        parts = [(b.deployment, b.deployment.replicas) for b in bodies]
    except TwinInputError as exc:
        return data, None, str(exc)
    facts: dict[str, Any] = {
        "gpu": "+".join(dict.fromkeys(d.gpu for d, _ in parts)),
        "tensor_parallel_size": parts[0][0].tensor_parallel_size if len(parts) == 1 else None,
        "replicas": sum(n for _, n in parts), "groups": groups,
        "price_per_gpu_hour": None, "cost_per_hour": None,
        "servers": band_servers(bodies, spec.base_dir),     # the held-out error bands' keys (issue 33)
    }
    if spec.prices is not None:
        prices = [spec.prices.get(d.gpu) for d, _ in parts]
        if all(p is not None for p in prices):
            facts["cost_per_hour"] = sum(hourly_cost(p, d.tensor_parallel_size, n)
                                         for p, (d, n) in zip(prices, parts))
            facts["price_per_gpu_hour"] = prices[0] if len(set(prices)) == 1 else None
    return data, facts, None


def all_pass(results: Sequence[Mapping[str, Any]]) -> bool | None:
    if any(not r.get("ok") for r in results):
        return False
    flags = [r.get("passed") for r in results]
    if any(f is None for f in flags):
        return None
    return all(flags)


def config_search(spec: SweepSpec, index: int, config: dict[str, Any]) -> Search:
    """One configuration's runs across the rate levels: {level index: [result per replication] | marker}."""
    data, facts, error = _config_info(spec, config)
    if error is not None:
        return {"error": error, "data": data, "facts": None, "levels": [], "results": {}}
    levels = spec.levels(data)
    reps = range(spec.replications)
    results: dict[int, Any] = {}

    groups = facts["groups"]

    def run(li: int):
        scale = levels[li][0]
        out = yield [spec.job(data, scale, r, groups=groups) for r in reps]
        results[li] = out
        return all_pass(out)

    prune = spec.prune if spec.criteria is not None and spec.rate_axis is not None and len(levels) > 1 else "none"
    if prune == "none":
        out = yield [spec.job(data, s, r, groups=groups) for s, _ in levels for r in reps]
        for li in range(len(levels)):
            results[li] = out[li * len(reps):(li + 1) * len(reps)]
    elif prune == "monotone":
        for li in range(len(levels)):
            ok = yield from run(li)
            if not ok:
                for lj in range(li + 1, len(levels)):
                    results[lj] = ("pruned", levels[li][0])
                break
    else:  # bisect
        lo, hi = -1, len(levels)
        while hi - lo > 1:
            m = (lo + hi) // 2
            ok = yield from run(m)
            if ok:
                lo = m
            else:
                hi = m
        for li in range(len(levels)):
            if li not in results:
                results[li] = ("inferred-pass", None) if li <= lo else ("inferred-fail", None)
    return {"error": None, "data": data, "facts": facts, "levels": levels, "results": results}


def sweep_search(spec: SweepSpec) -> Search:
    """The whole sweep as one search; returns its rows."""
    configs = spec.configs()
    answers = yield from gather(config_search(spec, i, c) for i, c in enumerate(configs))
    rows: list[dict[str, Any]] = []
    for i, (config, ans) in enumerate(zip(configs, answers)):
        rows.extend(sweep_rows(spec, i, config, ans))
    return rows


def run_sweep(spec: SweepSpec, executor, on_done=None) -> list[dict[str, Any]]:
    """Run a sweep on an executor (``twin.plan.executor.make_executor``); one row per (config, rate, replication)."""
    runner = Runner(executor, on_done=on_done)
    rows = runner.drive(sweep_search(spec))
    return rows


def sweep_rows(spec: SweepSpec, index: int, config: Mapping[str, Any], ans: Mapping[str, Any]) -> list[dict[str, Any]]:
    base = {"config": index}
    for key, _ in spec.knob_axes:
        base[key] = label(config[key]) if isinstance(config[key], (dict, list)) else config[key]
    rate_key = spec.rate_axis[0] if spec.rate_axis else None
    facts = ans["facts"] or {}
    base.update({k: facts.get(k) for k in ("gpu", "tensor_parallel_size", "replicas", "price_per_gpu_hour",
                                           "cost_per_hour")})
    if ans["error"] is not None:
        return [{**base, "rate_scale": None, "offered_rate_per_s": None, "replication": None, "status": "error",
                 "passed": False, "reasons": ans["error"]}]
    bands = band_columns(facts["servers"])        # last, after every run's own columns (issue 33)
    rows = []
    for li, (scale, offered) in enumerate(ans["levels"]):
        res = ans["results"].get(li)
        head = {**base, "rate_scale": scale, "offered_rate_per_s": offered}
        if rate_key == "rate":
            head["rate"] = offered
        if isinstance(res, tuple):
            status, at = res
            reason = f"fails at rate_scale {at:g} (monotone in rate)" if status == "pruned" else "bisection"
            rows.append({**head, "replication": None, "status": status,
                         "passed": status == "inferred-pass", "reasons": reason})
            continue
        for r, result in enumerate(res):
            row = {**head, "replication": r}
            if not result.get("ok"):
                row.update(status="error", passed=False, reasons=result.get("error"))
            else:
                m = result["metrics"]
                row.update(status="ok", passed=result["passed"], reasons="; ".join(result["reasons"]))
                row.update({k: m.get(k) for k in RESULT_KEYS})
                if base["cost_per_hour"] is not None:
                    row["usd_per_million_output_tokens"] = usd_per_million_tokens(base["cost_per_hour"],
                                                                                  m.get("output_throughput"))
                    row["usd_per_million_tokens"] = usd_per_million_tokens(base["cost_per_hour"],
                                                                           m.get("total_token_throughput"))
                if spec.per_replica:
                    row["per_replica"] = json.dumps(result.get("per_replica"), default=repr)
                row.update(limit=result.get("limit"), limit_knob=result.get("limit_knob"))   # twin.analysis.run_limits
            rows.append(row)
    return [{**row, **bands} for row in rows]
