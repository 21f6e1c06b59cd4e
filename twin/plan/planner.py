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

import math
import time
from typing import Any

from twin.results import numbers
from twin.plan.candidates import Candidate, expand_candidates
from twin.plan.capacity import Bracket, Capacity, bisect_scale
from twin.plan.evaluate import SimJob, effective_replications, offered_rate
from twin.plan.executor import Runner, Search, gather
from twin.plan.overrides import apply_overrides
from twin.plan.plan_result import PlanResult, build_plan_result
from twin.plan.plan_spec import PlanSpec

MAX_CLUSTER_BLOCKS = 8_000_000  # KV blocks one cluster simulation may hold (~1 GB of block objects)


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
                                "pruned", f"fails at {numbers.with_unit(probe * self.base_rate, 'req/s')}, above the best "
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
            return Capacity(brackets, "never", f"misses the SLOs even at {numbers.with_unit(lowest, 'req/s')} (the lowest rate "
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
        return build_plan_result(self, caps, verified, runner, time.perf_counter() - t0)


def plan(spec: PlanSpec, executor, on_done=None) -> PlanResult:
    """Run a plan on an executor (``twin.plan.executor.make_executor``)."""
    return Planner(spec).run(Runner(executor, on_done=on_done))
