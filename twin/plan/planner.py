"""Capacity planning: the cheapest deployment that serves a target rate within the SLOs.

Given a workload (a scenario, synthetic or a trace), SLOs, a target arrival rate and GPU prices, ``plan``:

1. expands the search space (GPU type, tensor parallelism, ``max_num_seqs``, ``max_num_batched_tokens``,
   prefix caching, speculative decoding if the scenario has it, any other dotted key) into candidates, each a
   replica configuration; candidates that cannot run (the model does not fit, TP does not divide the heads,
   no price) are reported as infeasible;
2. measures each candidate's **maximum sustainable rate per replica**: for every replication (seed), a
   bisection on the arrival-rate scale (``twin.plan.evaluate.scale_arrivals``) between a passing and a failing
   rate, to a relative tolerance; the replications give a mean and a Student-t confidence interval.
   Candidates on the same hardware (same GPU and TP, so the same price) compete on that rate alone, so with
   pruning on a challenger is first run at the incumbent's rate x (1 + tol): if every replication fails
   there it cannot be better and is pruned ("fails at rate r, so fails above r");
3. sizes each hardware option's best candidate: ``N = ceil(target / rate)`` replicas, then checks N by
   simulating the whole cluster (the router in front) at the target rate, and walks N up or down until N
   passes and N - 1 fails; ``frontier_extra`` more replicas give lower-latency, dearer points;
4. reports the cheapest passing deployment, the cost-latency frontier (Pareto points of hourly cost against
   ``latency_metric``), the max rate and cost per million tokens of every candidate.

A (configuration, rate) passes when every replication passes ``criteria`` (``twin.plan.evaluate.Criteria``).
Every decision is taken between waves of simulations on complete results, so a plan is the same on every
backend and with any number of workers.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from twin.errors import TwinInputError
from twin.plan.evaluate import (
    Criteria,
    SimJob,
    effective_replications,
    offered_rate,
    validate_body,
)
from twin.plan.executor import Runner, Search, gather
from twin.hardware.pricing import PriceTable, hourly_cost, usd_per_million_tokens
from twin.plan.sweep import apply_overrides, label

DEFAULT_GPUS = ("H100-SXM", "H200-SXM", "A100-SXM-80GB")
DEFAULT_MAX_NUM_SEQS = (64, 128, 256)
MAX_DOUBLINGS = 12   # a rate 4096x the start passing: 'unbounded'
MAX_HALVINGS = 8     # 1/256 of the start still failing: 'never' (the SLO is out of reach even unloaded)
MAX_CLUSTER_BLOCKS = 8_000_000  # KV blocks one cluster simulation may hold (~1 GB of block objects)


# ---------------------------------------------------------------------------------------------------------
# the question
# ---------------------------------------------------------------------------------------------------------
@dataclass
class PlanSpec:
    """What to plan. ``data`` is the complete raw scenario mapping (variant and overrides merged in);
    ``space`` the grid of dotted keys -> values, or ``candidates`` an explicit list of override mappings
    (dotted keys), or both (the grid is expanded over each candidate)."""

    data: dict[str, Any]
    criteria: Criteria
    target_rate: float | None = None
    base_dir: str | None = None
    prices: PriceTable = field(default_factory=PriceTable)
    space: list[tuple[str, list[Any]]] = field(default_factory=list)
    candidates: list[dict[str, Any]] | None = None
    router: str = "least_outstanding"
    replications: int = 2
    rel_tol: float = 0.05
    confidence: float = 0.95
    max_replicas: int = 256
    frontier_extra: int = 1
    prune: bool = True
    verify_all: bool = False
    latency_metric: str = "p99_ttft_ms"

    def __post_init__(self) -> None:
        if self.target_rate is not None and (isinstance(self.target_rate, bool) or not self.target_rate > 0
                                             or not math.isfinite(self.target_rate)):
            raise TwinInputError(f"target_rate_per_s: {self.target_rate!r}: must be a number > 0 (requests/s)")
        if not (0 < self.rel_tol < 1):
            raise TwinInputError(f"rel_tol: {self.rel_tol!r}: must be in (0, 1), e.g. 0.05")
        if not (0 < self.confidence < 1):
            raise TwinInputError(f"confidence: {self.confidence!r}: must be in (0, 1), e.g. 0.95")
        for name in ("replications", "max_replicas"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise TwinInputError(f"{name}: {v!r}: must be an integer >= 1")
        if isinstance(self.frontier_extra, bool) or not isinstance(self.frontier_extra, int) or self.frontier_extra < 0:
            raise TwinInputError(f"frontier_extra_replicas: {self.frontier_extra!r}: must be an integer >= 0")
        if not self.criteria.slo and self.criteria.goodput is None:
            raise TwinInputError("slo: planning needs SLOs (in the scenario's slo: section or given to the plan)")
        deployment = self.data.get("deployment")
        if isinstance(deployment, Mapping) and deployment.get("groups") is not None:
            raise TwinInputError("deployment.groups: twin plan sizes replicas of one GPU type per candidate, not "
                                 "replica groups; leave groups out (its candidates pick the GPU)")


def default_space(data: Mapping[str, Any]) -> list[tuple[str, list[Any]]]:
    """GPU types (the scenario's and H100/H200/A100), the scenario's TP, max_num_seqs 64/128/256, prefix
    caching on and off when the workload can share prefixes, speculative decoding on and off when the
    scenario has it."""
    body = validate_body(data)
    gpus = list(dict.fromkeys([body.deployment.gpu, *DEFAULT_GPUS]))
    space: list[tuple[str, list[Any]]] = [
        ("deployment.gpu", gpus),
        ("deployment.tensor_parallel_size", [body.deployment.tensor_parallel_size]),
        ("server.max_num_seqs", list(DEFAULT_MAX_NUM_SEQS)),
    ]
    if _shares_prefixes(body):
        space.append(("server.enable_prefix_caching", [True, False]))
    spec = data.get("speculative_decoding")
    if spec:
        space.append(("speculative_decoding", [spec, None]))
    return space


def _shares_prefixes(body) -> bool:
    wl = body.workload
    if wl.trace is not None:
        return wl.trace.format == "mooncake" or str(wl.trace.path).endswith(".jsonl")
    return any(c.prompt.shared_prefix_tokens > 0 or c.prompt.few_shot is not None or c.multi_turn is not None
               for c in wl.classes)


# ---------------------------------------------------------------------------------------------------------
# candidates
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Candidate:
    index: int
    overrides: dict[str, Any]
    data: dict[str, Any]                 # one replica
    hardware: tuple[str, int] | None = None
    price_per_replica_hour: float | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def describe(self) -> str:
        return ", ".join(f"{k}={label(v)}" for k, v in self.overrides.items()) or "(scenario as given)"


def expand_candidates(spec: PlanSpec) -> list[Candidate]:
    from twin.sim.deployment import resolve_deployment

    bases = spec.candidates or [{}]
    space = spec.space if (spec.space or spec.candidates) else default_space(spec.data)
    combos = list(itertools.product(*(values for _, values in space))) if space else [()]
    out: list[Candidate] = []
    seen: set[str] = set()
    base_dir = None if spec.base_dir is None else __import__("pathlib").Path(spec.base_dir)
    for base in bases:
        for combo in combos:
            overrides = dict(base)
            overrides.update({k: v for (k, _), v in zip(space, combo)})
            key = json.dumps(overrides, sort_keys=True, default=repr)
            if key in seen:
                continue
            seen.add(key)
            data = apply_overrides(spec.data, {**overrides, "deployment.replicas": 1})
            cand = Candidate(len(out), overrides, data)
            out.append(cand)
            try:
                body = validate_body(data, f"candidate {cand.describe()}")
                dep = resolve_deployment(body, base_dir)
                tp = body.deployment.tensor_parallel_size
                price = spec.prices.price(dep.gpu.name)
            except TwinInputError as exc:
                cand.error = str(exc)
                continue
            sc = dep.scheduler_config
            sd = body.speculative_decoding
            cand.hardware = (dep.gpu.name, tp)
            cand.price_per_replica_hour = hourly_cost(price, tp, 1)
            cand.settings = {
                "gpu": dep.gpu.name, "tensor_parallel_size": tp, "max_num_seqs": sc.max_num_seqs,
                "max_num_batched_tokens": sc.max_num_batched_tokens,
                "enable_prefix_caching": sc.enable_prefix_caching,
                "speculative_decoding": None if sd is None else
                f"{sd.method} k={sd.num_speculative_tokens}",
                "kv_capacity_tokens": dep.kv_pool.capacity_tokens, "price_per_gpu_hour": price,
            }
    return out


# ---------------------------------------------------------------------------------------------------------
# bisection on the arrival-rate scale
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Bracket:
    """``lo`` passes, ``hi`` fails (scales); ``lo`` None: fails even at the smallest scale tried; ``hi``
    None: passes at the largest. ``trail`` lists every (scale, passed) evaluated, in order."""

    lo: float | None
    hi: float | None
    lo_result: dict[str, Any] | None = None
    hi_result: dict[str, Any] | None = None
    trail: list[tuple[float, bool]] = field(default_factory=list)
    error: str | None = None


def bisect_scale(job_at, *, start: float = 1.0, rel_tol: float = 0.05, lo: float | None = None,
                 hi: float | None = None, lo_result=None, hi_result=None) -> Search:
    """Find ``lo < hi`` with ``job_at(lo)`` passing, ``job_at(hi)`` failing and ``hi / lo <= 1 + rel_tol``:
    doubling (or halving) from ``start`` until the rate is bracketed, then geometric bisection. ``job_at``
    maps a scale to a ``SimJob`` whose result carries ``passed``."""
    trail: list[tuple[float, bool]] = []
    if lo is not None:
        trail.append((lo, True))
    if hi is not None:
        trail.append((hi, False))

    def probe(scale: float):
        (res,) = yield [job_at(scale)]
        if not res.get("ok"):
            return None, res
        ok = bool(res.get("passed"))
        trail.append((scale, ok))
        return ok, res

    if lo is None and hi is None:
        ok, res = yield from probe(start)
        if ok is None:
            return Bracket(None, None, trail=trail, error=res.get("error"))
        if ok:
            lo, lo_result = start, res
        else:
            hi, hi_result = start, res
    for _ in range(MAX_DOUBLINGS):
        if hi is not None:
            break
        ok, res = yield from probe(lo * 2)
        if ok is None:
            return Bracket(lo, None, lo_result, trail=trail, error=res.get("error"))
        if ok:
            lo, lo_result = lo * 2, res
        else:
            hi, hi_result = lo * 2, res
    else:
        return Bracket(lo, None, lo_result, trail=trail)
    for _ in range(MAX_HALVINGS):
        if lo is not None:
            break
        ok, res = yield from probe(hi / 2)
        if ok is None:
            return Bracket(None, hi, None, hi_result, trail=trail, error=res.get("error"))
        if ok:
            lo, lo_result = hi / 2, res
        else:
            hi, hi_result = hi / 2, res
    else:
        return Bracket(None, hi, None, hi_result, trail=trail)
    while hi / lo > 1 + rel_tol:
        mid = math.sqrt(lo * hi)
        ok, res = yield from probe(mid)
        if ok is None:
            return Bracket(lo, hi, lo_result, hi_result, trail=trail, error=res.get("error"))
        if ok:
            lo, lo_result = mid, res
        else:
            hi, hi_result = mid, res
    return Bracket(lo, hi, lo_result, hi_result, trail=trail)


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


# ---------------------------------------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------------------------------------
@dataclass
class Capacity:
    brackets: list[Bracket]
    status: str                      # measured | pruned | unbounded | never | error
    note: str = ""

    def scales(self) -> list[float]:
        return [b.lo for b in self.brackets if b.lo is not None]


class Planner:
    def __init__(self, spec: PlanSpec) -> None:
        self.spec = spec
        self.base_rate = offered_rate(spec.data, spec.base_dir)
        self.target_rate = spec.target_rate if spec.target_rate is not None else self.base_rate
        self.target_scale = self.target_rate / self.base_rate
        self.candidates = expand_candidates(spec)
        self.replications = effective_replications(spec.data, spec.replications)

    # ---- jobs ------------------------------------------------------------------------------------------
    def capacity_job(self, cand: Candidate, replication: int, scale: float) -> SimJob:
        return SimJob(cand.data, self.spec.base_dir, replication, scale, criteria=self.spec.criteria)

    def cluster_job(self, cand: Candidate, replication: int, replicas: int) -> SimJob:
        data = apply_overrides(cand.data, {"deployment.replicas": replicas})
        return SimJob(data, self.spec.base_dir, replication, self.target_scale, router=self.spec.router,
                      criteria=self.spec.criteria)

    # ---- step 2: max rate per replica -------------------------------------------------------------------
    def capacity_search(self, cand: Candidate, start: float, incumbent: float | None) -> Search:
        reps = range(self.replications)
        tol = self.spec.rel_tol
        los: dict[int, tuple[float, Any]] = {}
        his: dict[int, tuple[float, Any]] = {}
        if incumbent is not None:
            probe = incumbent * (1 + tol)
            results = yield [self.capacity_job(cand, r, probe) for r in reps]
            for r, res in zip(reps, results):
                if not res.get("ok"):
                    return Capacity([Bracket(None, None, error=res.get("error"))], "error", res.get("error", ""))
                (los if res.get("passed") else his)[r] = (probe, res)
            if not los:
                return Capacity([Bracket(None, probe, None, his[r][1], trail=[(probe, False)]) for r in reps],
                                "pruned", f"fails at {probe * self.base_rate:.4g} req/s, above the best "
                                          f"candidate on this hardware")
        searches = []
        for r in reps:
            lo, lo_res = los.get(r, (None, None))
            hi, hi_res = his.get(r, (None, None))
            searches.append(bisect_scale(lambda s, r=r: self.capacity_job(cand, r, s), start=start, rel_tol=tol,
                                         lo=lo, hi=hi, lo_result=lo_res, hi_result=hi_res))
        brackets = yield from gather(searches)
        errors = [b.error for b in brackets if b.error]
        if errors:
            return Capacity(brackets, "error", errors[0])
        if any(b.lo is None for b in brackets):
            lowest = min(s for b in brackets for s, _ in b.trail) * self.base_rate
            return Capacity(brackets, "never", f"misses the SLOs even at {lowest:.3g} req/s (the lowest rate "
                                               f"tried): out of reach for this configuration")
        if any(b.hi is None for b in brackets):
            return Capacity(brackets, "unbounded", "meets the SLOs at every rate tried")
        return Capacity(brackets, "measured")

    def hardware_search(self, cands: list[Candidate], start: float) -> Search:
        """The candidates of one hardware option, in order; with pruning each challenges the best so far."""
        out: dict[int, Capacity] = {}
        best: float | None = None
        if not self.spec.prune:
            caps = yield from gather(self.capacity_search(c, start, None) for c in cands)
            return dict(zip((c.index for c in cands), caps))
        for cand in cands:
            cap = yield from self.capacity_search(cand, best if best is not None else start, best)
            out[cand.index] = cap
            if cap.status == "measured":
                mean = sum(cap.scales()) / len(cap.scales())
                if best is None or mean > best:
                    best = mean
        return out

    # ---- step 3: replicas at the target ------------------------------------------------------------------
    def replicas_search(self, cand: Candidate, rate: float) -> Search:
        """Smallest N that passes at the target (N - 1 fails, or N = 1), then the extra frontier points."""
        reps = range(self.replications)
        tested: dict[int, tuple[bool, list]] = {}

        blocks = max(1, cand.settings.get("kv_capacity_tokens", 0) // 16)

        def at(n: int):
            if n * blocks > MAX_CLUSTER_BLOCKS:
                tested[n] = (False, [])
                return False, [f"{n} replicas x {blocks:,} KV blocks is too large a cluster to simulate here"]
            results = yield [self.cluster_job(cand, r, n) for r in reps]
            errors = [res.get("error") for res in results if not res.get("ok")]
            ok = not errors and all(res.get("passed") for res in results)
            tested[n] = (ok, results)
            return ok, errors

        limit = self.spec.max_replicas
        n0 = min(limit, max(1, math.ceil(self.target_rate / rate))) if rate > 0 else 1
        ok, errors = yield from at(n0)
        if errors:
            return {"error": errors[0], "tested": tested}
        # halve (or grow) from the estimate to a bracket lo_fail < hi_ok, then bisect it. The estimate is
        # usually high: N replicas behind a router pool their queues, so each sustains more than one alone
        if ok:
            lo_fail, hi_ok = 0, n0
            while hi_ok - lo_fail > 1:
                m = max(lo_fail + 1, hi_ok // 2)
                ok_m, _ = yield from at(m)
                if not ok_m:
                    lo_fail = m
                    break
                hi_ok = m
        else:
            lo_fail, step = n0, max(1, n0 // 4)
            while True:
                if lo_fail >= limit:
                    return {"n": None, "tested": tested, "note": f"fails with {limit} replicas (max_replicas)"}
                m = min(limit, lo_fail + step)
                ok_m, errs = yield from at(m)
                if errs:
                    return {"n": None, "tested": tested, "note": errs[0]}
                if ok_m:
                    hi_ok = m
                    break
                lo_fail, step = m, step * 2
        while hi_ok - lo_fail > 1:
            mid = (hi_ok + lo_fail) // 2
            ok_mid, _ = yield from at(mid)
            if ok_mid:
                hi_ok = mid
            else:
                lo_fail = mid
        n = hi_ok
        extras = [m for m in range(n + 1, n + 1 + self.spec.frontier_extra)
                  if m <= limit and m * blocks <= MAX_CLUSTER_BLOCKS]
        if extras:
            results = yield [self.cluster_job(cand, r, m) for m in extras for r in reps]
            k = len(reps)
            for i, m in enumerate(extras):
                chunk = results[i * k:(i + 1) * k]
                tested[m] = (all(x.get("ok") and x.get("passed") for x in chunk), chunk)
        return {"n": n, "tested": tested}

    # ---- the whole plan ------------------------------------------------------------------------------
    def search(self) -> Search:
        spec = self.spec
        feasible = [c for c in self.candidates if c.error is None]
        groups: dict[tuple[str, int], list[Candidate]] = {}
        for c in feasible:
            groups.setdefault(c.hardware, []).append(c)
        # a first guess for the per-replica rate: the scenario's own rate (scale 1)
        start = 1.0
        caps_list = yield from gather(self.hardware_search(cs, start) for cs in groups.values())
        caps: dict[int, Capacity] = {}
        for d in caps_list:
            caps.update(d)
        # best candidate per hardware option
        to_verify: list[Candidate] = []
        for cs in groups.values():
            measured = [c for c in cs if caps[c.index].status in ("measured", "unbounded")]
            if not measured:
                continue
            ranked = sorted(measured, key=lambda c: (-self._rate(caps[c.index]), c.index))
            to_verify.extend(ranked if spec.verify_all else ranked[:1])
        verified = yield from gather(self.replicas_search(c, self._rate(caps[c.index])) for c in to_verify)
        return caps, dict(zip((c.index for c in to_verify), verified))

    def _rate(self, cap: Capacity) -> float:
        """Mean sustainable rate (req/s) per replica; unbounded: the highest passing scale tried."""
        scales = cap.scales()
        return self.base_rate * sum(scales) / len(scales) if scales else 0.0

    def run(self, runner: Runner) -> PlanResult:
        t0 = time.perf_counter()
        caps, verified = runner.drive(self.search())
        return self._result(caps, verified, runner, time.perf_counter() - t0)

    # ---- results ---------------------------------------------------------------------------------------
    def _result(self, caps: dict[int, Capacity], verified: dict[int, dict], runner: Runner, wall_s: float) -> PlanResult:
        spec = self.spec
        rows = []
        for c in self.candidates:
            row: dict[str, Any] = {"candidate": c.index, "overrides": c.describe(), **c.settings,
                                   "price_per_replica_hour": c.price_per_replica_hour}
            if c.error is not None:
                row.update(status="infeasible", note=c.error)
                rows.append(row)
                continue
            cap = caps[c.index]
            rates = [s * self.base_rate for s in cap.scales()]
            ci = confidence_interval(rates, spec.confidence)
            row.update(status=cap.status, note=cap.note,
                       max_rate_per_s=ci["mean"], max_rate_ci_high=ci["high"],
                       max_rate_ci_low=None if ci["low"] is None else max(0.0, ci["low"]),  # a rate is >= 0
                       max_rate_per_replication=[round(r, 6) for r in rates],
                       failing_rate_per_replication=[None if b.hi is None else round(b.hi * self.base_rate, 6)
                                                     for b in cap.brackets],
                       simulations=sum(len(b.trail) for b in cap.brackets))
            if cap.status == "pruned":
                row["max_rate_upper_bound"] = min(b.hi for b in cap.brackets) * self.base_rate
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
                row["replicas_estimate"] = math.ceil(self.target_rate / ci["mean"]) if ci["mean"] else None
            rows.append(row)

        deployments = []
        for idx, ver in verified.items():
            c = self.candidates[idx]
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
                    "target_rate_per_s": self.target_rate,
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
                deployments.append(dep)
            if n is None:
                deployments.append({"candidate": idx, **c.settings, "replicas": None, "passed": False,
                                    "minimal": False, "note": ver.get("note") or ver.get("error")})
        passing = [d for d in deployments if d.get("passed") and d.get("replicas")]
        passing.sort(key=lambda d: (d["cost_per_hour"], _num(d.get(spec.latency_metric)), d["candidate"]))
        best = passing[0] if passing else None
        frontier = pareto(passing, "cost_per_hour", spec.latency_metric)
        return PlanResult(
            spec=spec, base_rate=self.base_rate, target_rate=self.target_rate, target_scale=self.target_scale,
            candidates=rows, deployments=deployments, best=best, frontier=frontier,
            num_simulations=runner.num_run, num_waves=runner.num_waves, wall_s=wall_s,
            replications=self.replications,
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
        }

    def candidates_frame(self):
        import pandas as pd

        frame = pd.DataFrame(self.candidates)
        for col in ("max_rate_per_replication", "failing_rate_per_replication"):
            if col in frame:
                frame[col] = frame[col].map(lambda v: json.dumps(v) if isinstance(v, list) else v)
        return frame

    def deployments_frame(self):
        import pandas as pd

        frame = pd.DataFrame(self.deployments)
        if "reasons" in frame:
            frame["reasons"] = frame["reasons"].map(lambda v: "; ".join(v) if isinstance(v, list) else v)
        return frame

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
                hovertemplate="%{text}<br>$%{x:.2f}/h<br>" + key + "=%{y:.4g}<extra></extra>"))
        if self.frontier:
            fig.add_trace(go.Scatter(x=[d["cost_per_hour"] for d in self.frontier],
                                     y=[d.get(key) for d in self.frontier], mode="lines", name="frontier",
                                     line={"dash": "dot"}))
        if self.best:
            fig.add_trace(go.Scatter(x=[self.best["cost_per_hour"]], y=[self.best.get(key)], mode="markers",
                                     name="cheapest", marker={"size": 18, "symbol": "star"}))
        fig.update_layout(title=f"Cost-latency frontier at {self.target_rate:.4g} req/s",
                          xaxis_title="USD per hour", yaxis_title=key, template="plotly_white")
        return fig


def plan(spec: PlanSpec, executor, on_done=None) -> PlanResult:
    """Run a plan on an executor (``twin.plan.executor.make_executor``)."""
    return Planner(spec).run(Runner(executor, on_done=on_done))


# ---------------------------------------------------------------------------------------------------------
# plan files
# ---------------------------------------------------------------------------------------------------------
PLAN_FIELDS = ("scenario", "variant", "overrides", "target_rate_per_s", "slo", "goodput", "prices", "search",
               "candidates", "router", "replications", "rel_tol", "confidence", "max_replicas",
               "frontier_extra_replicas", "prune", "verify_all", "latency_metric", "description", "name")


def is_plan_file(data: Any) -> bool:
    return isinstance(data, Mapping) and "scenario" in data and "workload" not in data


def read_plan_file(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Check a plan file's top level; returns it as a plain dict (fields are validated where they are used)."""
    unknown = [k for k in data if k not in PLAN_FIELDS]
    if unknown:
        raise TwinInputError(f"{source}: unknown field {unknown[0]!r} (allowed: {', '.join(PLAN_FIELDS)})")
    search = data.get("search") or {}
    if not isinstance(search, Mapping) or any(not isinstance(v, list) or not v for v in search.values()):
        raise TwinInputError(f"{source}: search: must map dotted keys to non-empty lists of values")
    cands = data.get("candidates")
    if cands is not None and (not isinstance(cands, list) or any(not isinstance(c, Mapping) for c in cands)):
        raise TwinInputError(f"{source}: candidates: must be a list of mappings of dotted keys to values")
    return dict(data)
