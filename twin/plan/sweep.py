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
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from twin.errors import TwinInputError
from twin.plan.evaluate import (
    RESULT_KEYS,
    Criteria,
    SimJob,
    effective_replications,
    offered_rate,
    validate_body,
)
from twin.plan.executor import Runner, Search, gather
from twin.hardware.pricing import PriceTable, hourly_cost, usd_per_million_tokens
from twin.scenario import deep_merge

RATE_KEYS = ("rate_scale", "rate")
GROUPS_KEY = "groups"
PRUNE_MODES = ("monotone", "bisect", "none")
TABLE_METRICS = ("request_throughput", "output_throughput", "p50_ttft_ms", "p99_ttft_ms", "p99_tpot_ms",
                 "p99_e2el_ms")


# ---------------------------------------------------------------------------------------------------------
# grid parsing
# ---------------------------------------------------------------------------------------------------------
def _parse_value(raw: str) -> Any:
    raw = raw.strip()
    if raw == "":
        return ""
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def parse_grid_options(items: Sequence[str]) -> list[tuple[str, list[Any]]]:
    """``key=v1,v2,...`` (or ``key=[v1, {a: 1}]``, a YAML list) options -> ``[(key, [values])]``."""
    grid: list[tuple[str, list[Any]]] = []
    seen: set[str] = set()
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise TwinInputError(f"--grid {item!r}: expected key.path=v1,v2,...")
        if key in seen:
            raise TwinInputError(f"--grid {item!r}: {key} is given twice")
        seen.add(key)
        raw = raw.strip()
        if raw.startswith("["):
            try:
                values = yaml.safe_load(raw)
            except yaml.YAMLError:
                raise TwinInputError(f"--grid {item!r}: the bracketed value is not a YAML list") from None
            if not isinstance(values, list):
                raise TwinInputError(f"--grid {item!r}: the bracketed value is not a YAML list")
        else:
            values = [_parse_value(v) for v in raw.split(",")]
        if not values:
            raise TwinInputError(f"--grid {item!r}: no values")
        grid.append((key, values))
    return check_grid(grid)


def check_grid(grid: Sequence[tuple[str, Sequence[Any]]]) -> list[tuple[str, list[Any]]]:
    out = []
    rate_axes = [k for k, _ in grid if k in RATE_KEYS]
    if len(rate_axes) > 1:
        raise TwinInputError("--grid: give one of rate_scale and rate, not both")
    for key, values in grid:
        values = list(values)
        if not values:
            raise TwinInputError(f"grid {key}: no values")
        if key in RATE_KEYS:
            for v in values:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                    raise TwinInputError(f"grid {key}: {v!r} is not a rate; give numbers > 0")
        elif key != GROUPS_KEY and any(not part for part in key.split(".")):
            raise TwinInputError(f"grid {key!r}: not a dotted scenario path like server.max_num_seqs")
        out.append((key, values))
    return out


def nested(key: str, value: Any) -> dict[str, Any]:
    """``"server.max_num_seqs", 4`` -> ``{"server": {"max_num_seqs": 4}}``."""
    node: dict[str, Any] = {}
    out = node
    parts = key.split(".")
    for part in parts[:-1]:
        node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    return out


def apply_overrides(data: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A raw scenario mapping with dotted-key overrides merged in (in order)."""
    out = dict(data)
    for key, value in overrides.items():
        out = deep_merge(out, nested(key, value))
    return out


def label(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return "null" if value is None else str(value)


# ---------------------------------------------------------------------------------------------------------
# the sweep
# ---------------------------------------------------------------------------------------------------------
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
    _offered: dict[str, float] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.grid = check_grid(self.grid)
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
        if key not in self._offered:
            try:
                self._offered[key] = offered_rate(data, self.base_dir)
            except TwinInputError:
                self._offered[key] = None
        return self._offered[key]

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
            parts = [(group_body(body, g).deployment, g.replicas) for g in load_groups(groups)]
        elif body.deployment.groups is not None:  # the scenario's own mixed cluster
            parts = [(group_body(body, g).deployment, g.replicas) for g in body.deployment.groups]
        else:
            parts = [(body.deployment, body.deployment.replicas)]
    except TwinInputError as exc:
        return data, None, str(exc)
    facts: dict[str, Any] = {
        "gpu": "+".join(dict.fromkeys(d.gpu for d, _ in parts)),
        "tensor_parallel_size": parts[0][0].tensor_parallel_size if len(parts) == 1 else None,
        "replicas": sum(n for _, n in parts), "groups": groups,
        "price_per_gpu_hour": None, "cost_per_hour": None,
    }
    if spec.prices is not None:
        prices = [spec.prices.get(d.gpu) for d, _ in parts]
        if all(p is not None for p in prices):
            facts["cost_per_hour"] = sum(hourly_cost(p, d.tensor_parallel_size, n)
                                         for p, (d, n) in zip(prices, parts))
            facts["price_per_gpu_hour"] = prices[0] if len(set(prices)) == 1 else None
    return data, facts, None


def _all_pass(results: Sequence[Mapping[str, Any]]) -> bool | None:
    if any(not r.get("ok") for r in results):
        return False
    flags = [r.get("passed") for r in results]
    if any(f is None for f in flags):
        return None
    return all(flags)


def _config_search(spec: SweepSpec, index: int, config: dict[str, Any]) -> Search:
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
        return _all_pass(out)

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
    answers = yield from gather(_config_search(spec, i, c) for i, c in enumerate(configs))
    rows: list[dict[str, Any]] = []
    for i, (config, ans) in enumerate(zip(configs, answers)):
        rows.extend(_rows(spec, i, config, ans))
    return rows


def run_sweep(spec: SweepSpec, executor, on_done=None) -> list[dict[str, Any]]:
    """Run a sweep on an executor (``twin.plan.executor.make_executor``); one row per (config, rate, replication)."""
    runner = Runner(executor, on_done=on_done)
    rows = runner.drive(sweep_search(spec))
    return rows


def _rows(spec: SweepSpec, index: int, config: Mapping[str, Any], ans: Mapping[str, Any]) -> list[dict[str, Any]]:
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
            rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------------------
# Optuna (optional)
# ---------------------------------------------------------------------------------------------------------
def optuna_search(spec: SweepSpec, *, trials: int, objective: str = "output_throughput",
                  direction: str = "maximize", batch: int = 4, seed: int = 0) -> Search:
    """Optuna's TPE sampler over the grid's values (each axis a categorical choice), ``batch`` trials per
    wave; a trial's value is ``objective`` averaged over replications; a trial that misses the SLOs scores the
    worst possible value. Deterministic for a seed and batch size (not for the number of workers: it does not
    depend on it). Returns the rows of every distinct configuration tried, in trial order."""
    try:
        import optuna
    except ImportError:
        raise TwinInputError("search optuna: the optuna package is not installed (pip install optuna), "
                             "or use the grid search") from None
    if direction not in ("maximize", "minimize"):
        raise TwinInputError(f"direction: {direction!r}: allowed: maximize, minimize")
    if trials < 1 or batch < 1:
        raise TwinInputError("trials and batch must be >= 1")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction=direction, sampler=optuna.samplers.TPESampler(seed=seed))
    worst = -1e300 if direction == "maximize" else 1e300
    axes = spec.grid
    labels = {k: [label(v) for v in values] for k, values in axes}
    tried: dict[str, tuple[int, dict[str, Any], Any]] = {}
    order: list[str] = []
    done = 0
    while done < trials:
        n = min(batch, trials - done)
        asked = [study.ask() for _ in range(n)]
        points = []
        for t in asked:
            point = {}
            for k, values in axes:
                choice = t.suggest_categorical(k, labels[k])
                point[k] = values[labels[k].index(choice)]
            points.append(point)
        searches = []
        for point in points:
            config = {k: v for k, v in point.items() if k not in RATE_KEYS}
            sub = SweepSpec(spec.data, [(k, [v]) for k, v in point.items()], spec.base_dir, spec.replications,
                            spec.criteria, "none", spec.prices, spec.per_replica, spec._offered)
            searches.append(_config_search(sub, 0, config))
        answers = yield from gather(searches)
        for t, point, ans in zip(asked, points, answers):
            key = json.dumps(point, sort_keys=True, default=repr)
            value = worst
            if ans["error"] is None:
                res = ans["results"][0]
                ok = _all_pass(res)
                vals = [r["metrics"].get(objective) for r in res if r.get("ok")]
                if (ok or ok is None) and vals and all(v is not None for v in vals):
                    value = float(sum(vals) / len(vals))
            study.tell(t, value)
            if key not in tried:
                tried[key] = (len(order), point, ans)
                order.append(key)
        done += n
    rows = []
    for key in order:
        idx, point, ans = tried[key]
        config = {k: v for k, v in point.items() if k not in RATE_KEYS}
        sub = SweepSpec(spec.data, [(k, [v]) for k, v in point.items()], spec.base_dir, spec.replications,
                        spec.criteria, "none", spec.prices, spec.per_replica, spec._offered)
        rows.extend(_rows(sub, idx, config, ans))
    return rows


# ---------------------------------------------------------------------------------------------------------
# tables and plots
# ---------------------------------------------------------------------------------------------------------
def rows_frame(rows: Sequence[Mapping[str, Any]]):
    import pandas as pd

    frame = pd.DataFrame(list(rows))
    return frame


def summarize(rows: Sequence[Mapping[str, Any]], knob_keys: Sequence[str]):
    """One row per (configuration, rate): means over replications, ``passed`` when all passed."""
    import pandas as pd

    frame = rows_frame(rows)
    if frame.empty:
        return frame
    keys = ["config", *knob_keys, "rate_scale"]
    out = []
    for _, group in frame.groupby(["config", "rate_scale"], dropna=False, sort=False):
        first = group.iloc[0]
        row = {k: first.get(k) for k in keys if k in group}
        for k in ("offered_rate_per_s", "gpu", "tensor_parallel_size", "replicas", "cost_per_hour"):
            if k in group:
                row[k] = first.get(k)
        statuses = set(group["status"])
        row["status"] = statuses.pop() if len(statuses) == 1 else "mixed"
        flags = list(group["passed"])
        row["passed"] = None if any(f is None for f in flags) else bool(all(flags))
        row["replications"] = int((group["status"] == "ok").sum())
        for k in (*TABLE_METRICS, "request_goodput", "prefix_cache_hit_rate", "usd_per_million_output_tokens"):
            if k in group:
                vals = pd.to_numeric(group[k], errors="coerce").dropna()
                row[k] = float(vals.mean()) if len(vals) else None
        row["reasons"] = next((r for r in group["reasons"] if r), "")
        out.append(row)
    return pd.DataFrame(out)


def sweep_figure(summary, x: str | None = None, y: str = "p99_ttft_ms", color: str | None = None,
                 title: str = "twin sweep"):
    """A Plotly scatter of the summary: one line per configuration across rates, failures hollow."""
    import plotly.graph_objects as go

    fig = go.Figure()
    if summary.empty:
        return fig
    x = x or ("offered_rate_per_s" if summary["offered_rate_per_s"].notna().any() else "config")
    for k in (x, y):
        if k not in summary.columns:
            raise TwinInputError(f"plot axis {k!r}: not a column; columns: {', '.join(summary.columns)}")
    groups = summary.groupby("config", sort=False)
    for cfg, g in groups:
        g = g[g["status"] == "ok"] if (g["status"] == "ok").any() else g
        name = g.iloc[0][color] if color and color in g else cfg
        passed = [bool(p) if p is not None else True for p in g["passed"]]
        fig.add_trace(go.Scatter(
            x=g[x], y=g[y], mode="lines+markers", name=f"{name} (#{cfg})" if color else f"config {cfg}",
            marker={"symbol": ["circle" if p else "circle-open" for p in passed], "size": 9},
            text=[f"passed={p}" for p in g["passed"]], hovertemplate=f"{x}=%{{x}}<br>{y}=%{{y}}<br>%{{text}}",
        ))
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, template="plotly_white",
                      legend_title=color or "configuration")
    return fig


def write_html(fig, path: str) -> None:
    from pathlib import Path

    p = Path(path)
    if not p.parent.exists():
        raise TwinInputError(f"--plot {path}: folder {p.parent} does not exist")
    fig.write_html(str(p), include_plotlyjs=True, full_html=True)
