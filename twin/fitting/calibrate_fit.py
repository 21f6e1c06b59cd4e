"""The fit behind ``twin calibrate --from-results``: the roofline's physical parameters made to match a user's
own benchmark runs, regularised toward the twin's embedded defaults, with the simulation's noise kept out.

Objective (a sum of squared, noise-scaled terms; scipy ``least_squares``):

* each run the server kept up with: log(simulated / measured) of mean TPOT, mean, median and p90 TTFT, each
  divided by the relative noise stated in ``METRIC_NOISE`` (the run-to-run spread of that statistic on a real
  server); a run that met its server cold leaves its mean TTFT out (``measured_run.is_fit_target``);
* each saturated run (``MeasuredRun.queueing``: its latencies measure the queue, which grows with the run's
  length): log(simulated / measured) throughput over ``CAPACITY_NOISE``: it pins the server's capacity, so the
  fitted server neither collapses nor runs away at the knee;
* each parameter: (value - embedded default) / ``PRIOR_WIDTHS``: a Gaussian prior centred on what the twin uses
  without a fit (``cost_model_for(..., {})``: the GPU generation's efficiencies, the default overheads), so a
  term the runs say little about stays at its default, and its standard error stays near the prior width.

The simulation's noise is kept out of the objective by common random numbers: every round simulates every run
with the same ``replications`` seeds (arrival gaps, lengths and request-path draws fixed), each run long enough
for ``MIN_SIM_REQUESTS`` requests; between simulations the parameters move on the re-costing surrogate
(``twin.fitting.surrogate``), a smooth function of them. Standard errors are the Gauss-Newton covariance at the
solution, inflated by the misfit (chi^2 / degrees of freedom) when it exceeds 1."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

from twin.errors import TwinInputError
from twin.fitting.fit import Case
from twin.fitting.identify import held_at_prior
from twin.fitting.measured_run import is_fit_target
from twin.fitting.switches import map_jobs
from twin.fitting.parameters import PARAMETERS_BY_NAME, from_model_params, to_model_params
from twin.fitting.replay import Replayed, cost_model_for, deployment_for, replay
from twin.fitting.surrogate import Surrogate, compress_steps

# the parameters a server profile holds (twin.cost.server_profile), in fit units' prior widths: the spread of
# each term between vLLM servers of one GPU class that the defaults do not capture (a host CPU, a release)
PRIOR_WIDTHS: dict[str, float] = {
    "memory_efficiency": 0.10,          # fraction of datasheet bandwidth
    "compute_efficiency": 0.15,         # fraction of datasheet dense peak
    "gemm_half_tokens": 64.0,           # tokens
    "step_overhead_s": 1.0,             # ms per step
    "per_seq_overhead_s": 10.0,         # us per sequence per step
    "per_token_overhead_s": 1.0,        # us per token per step
    "request_path_s": 5.0,              # ms per request
    "request_path_jitter_s": 3.0,       # ms per request (mean)
    "allreduce_latency_s": 8.0,         # us per all-reduce
}
CANDIDATES = tuple(PRIOR_WIDTHS)
# the least relative noise of each statistic (the part no simulation shows: a real server's host jitter, clock
# and tokenizer differences); a run's own sampling noise is added to it (``ttft_noise``)
METRIC_NOISE: dict[str, float] = {"mean_tpot_ms": 0.03, "mean_ttft_ms": 0.03, "median_ttft_ms": 0.03,
                                  "p90_ttft_ms": 0.05}
TTFT_STATS = (("mean_ttft_ms", None), ("median_ttft_ms", 50.0), ("p90_ttft_ms", 90.0))
NOISE_BATCHES = 8
CAPACITY_NOISE = 0.04
MIN_SIM_REQUESTS = 200
IDENTIFIED_SHARE = 0.5        # s.e. below half the prior width: the runs pin it
PRIOR_SHARE = 0.9             # s.e. above 90% of the prior width: the runs say (almost) nothing
MOVE_TOL = 0.05               # outer loop stops when no parameter moves more than this share of its width


@dataclass
class CalibrationFit:
    params: dict[str, float]                  # model units: fitted ones, and the defaults of those held
    std: dict[str, float]                     # one standard error (model units), fitted ones
    prior: dict[str, float]                   # the prior centre (model units) of every candidate
    names: tuple[str, ...]                    # fitted
    held: dict[str, str]                      # not fitted: why
    status: dict[str, str]                    # per candidate: identified / weakly identified / at its prior ...
    latency_cases: list[Case]
    capacity_cases: list[Case]
    dropped: list[tuple[str, str]]            # (run, why)
    predicted: dict[str, dict[str, float]] = field(default_factory=dict)     # run name -> simulated metrics
    rounds: int = 0
    chi2_per_dof: float = float("nan")


def sim_seconds(case: Case, max_sim_s: float) -> float:
    """Seconds of the run's traffic to simulate: ``max_sim_s``, longer when that holds fewer than
    ``MIN_SIM_REQUESTS`` of its requests."""
    rate = case.run.rate_per_s
    if rate is None or math.isinf(rate):
        d = case.run.duration_s
        rate = case.run.num_requests / d if d else None
    if not rate:
        return max_sim_s
    return max(max_sim_s, min(case.run.num_requests, MIN_SIM_REQUESTS) / rate)


def prior_centre(cases: Sequence[Case]) -> dict[str, float]:
    """The embedded default of every candidate on the first run's deployment (model units)."""
    case = cases[0]
    cm = cost_model_for(deployment_for(case.run, case.target), case.target, {})
    return {n: float(getattr(cm, n)) for n in CANDIDATES}


def split_runs(cases: Sequence[Case]) -> tuple[list[Case], list[Case], list[tuple[str, str]]]:
    """(latency cases, capacity cases, dropped runs with the reason)."""
    latency, capacity, dropped = [], [], []
    for c in cases:
        m = c.run.metrics
        if c.run.queueing:
            if m.get("output_throughput") or m.get("request_throughput"):
                capacity.append(c)
            else:
                dropped.append((c.run.name, "saturated (TTFT > 50 TPOTs) and no throughput measured"))
        elif any(m.get(k) for k in METRIC_NOISE):
            latency.append(c)
        else:
            dropped.append((c.run.name, f"measures none of {', '.join(METRIC_NOISE)}"))
    return latency, capacity, dropped


def ttft_noise(replicas: Sequence[np.ndarray], replications: int) -> dict[str, float]:
    """Each TTFT statistic's relative sampling noise in a run like this one, by batch means: each simulated
    replica's requests in send order cut into ``NOISE_BATCHES`` batches, the spread of the batches' statistic
    (pooled over the replicas) / sqrt(batches); queueing makes neighbours' TTFTs alike, which the batches keep.
    Both the measured run and the mean of ``replications`` simulated ones carry it: variance x (1 + 1 /
    replications). Added in quadrature to ``METRIC_NOISE``."""
    out = {}
    for key, q in TTFT_STATS:
        rel_vars = []
        for ttft_s in replicas:
            ttft_s = np.asarray(ttft_s, dtype=float)
            if len(ttft_s) < 4 * NOISE_BATCHES:
                continue
            batches = np.array_split(ttft_s, NOISE_BATCHES)
            stats = np.array([b.mean() if q is None else np.percentile(b, q) for b in batches])
            whole = ttft_s.mean() if q is None else np.percentile(ttft_s, q)
            if whole > 0:
                rel_vars.append(float(stats.var(ddof=1)) / NOISE_BATCHES / whole ** 2)
        sampling2 = float(np.mean(rel_vars)) if rel_vars else 0.0
        out[key] = math.sqrt(METRIC_NOISE[key] ** 2 + sampling2 * (1.0 + 1.0 / replications))
    return out


def _capacity_key(run) -> str:
    return "output_throughput" if run.metrics.get("output_throughput") else "request_throughput"


class _Capacity:
    """A saturated run's throughput under other parameters: the simulated one scaled by the steps' total time
    (the same steps, each faster or slower)."""

    def __init__(self, case: Case, dep, replayed: Replayed, params: dict[str, float]) -> None:
        self.case, self.dep = case, dep
        self.features, _, self.count = compress_steps(replayed.steps)
        self.base = float(self.count @ self._times(params)) or 1.0
        self.throughput = float(replayed.metrics.get(_capacity_key(case.run)) or 0.0)

    def _times(self, params):
        return cost_model_for(self.dep, self.case.target, params).step_times_s(*self.features)

    def predict(self, params: dict[str, float]) -> float:
        return self.throughput * self.base / max(float(self.count @ self._times(params)), 1e-12)


def _replay_job(job) -> Replayed:
    case, params, seed, sim_s = job
    return replay(case.run, case.target, params, seed=seed, max_sim_s=sim_s)


def _simulate(cases, params, seeds, max_sim_s, deps, workers: int = 1) -> list[list[Replayed]]:
    if workers > 1 and len(cases) * len(seeds) > 1:       # processes: each builds its run's deployment again
        jobs = [(c, params, s, sim_seconds(c, max_sim_s)) for c in cases for s in seeds]
        flat = list(map_jobs(_replay_job, jobs, workers))       # the harness's switches reach every worker
        return [flat[i * len(seeds):(i + 1) * len(seeds)] for i in range(len(cases))]
    return [[replay(c.run, c.target, params, seed=s, max_sim_s=sim_seconds(c, max_sim_s), deployment=d)
             for s in seeds] for c, d in zip(cases, deps)]


def predict_metrics(cases: Sequence[Case], params: dict[str, float], *, seeds: Sequence[int],
                    max_sim_s: float | None) -> list[dict[str, float]]:
    """Each case simulated at ``params``, metrics averaged over ``seeds`` (``max_sim_s`` None: in full)."""
    out = []
    for c in cases:
        reps = [replay(c.run, c.target, params, seed=s,
                       max_sim_s=None if max_sim_s is None else sim_seconds(c, max_sim_s)).metrics for s in seeds]
        keys = {k for r in reps for k, v in r.items() if isinstance(v, (int, float)) and v is not None}
        out.append({k: float(np.mean([r[k] for r in reps if r.get(k) is not None])) for k in keys})
    return out


def calibrate_fit(cases: Sequence[Case], *, seed: int = 0, replications: int = 2, max_sim_s: float = 60.0,
                  outer_iterations: int = 4, start: dict[str, float] | None = None,
                  progress: Callable[[int], None] | None = None, report: bool = True,
                  workers: int = 1) -> CalibrationFit:
    """Fit ``cases`` (see the module docstring); ``report``: simulate every run at the fitted parameters for
    ``predicted`` (False leaves it empty: a seed or fold refit that needs only the parameters); ``workers``:
    processes simulating the runs (the results do not depend on it)."""
    latency, capacity, dropped = split_runs(cases)
    if not latency:
        raise TwinInputError("the fit needs a run the server kept up with (every run given is saturated or "
                             "measures no latency): add a run at a lower rate or concurrency")
    used = latency + capacity
    prior = prior_centre(used)
    held = held_at_prior(used, CANDIDATES)
    names = tuple(n for n in CANDIDATES if n not in held)
    p = [PARAMETERS_BY_NAME[n] for n in names]
    lower, upper = np.array([q.lower for q in p]), np.array([q.upper for q in p])
    width = np.array([PRIOR_WIDTHS[n] for n in names])
    x_prior = from_model_params(prior, names)
    x = from_model_params({**prior, **(start or {})}, names)
    x = np.clip(x, lower + 1e-3 * (upper - lower), upper - 1e-3 * (upper - lower))
    fixed = {n: prior[n] for n in CANDIDATES if n not in names}
    seeds = [seed * 1009 + r for r in range(replications)]
    deps = [deployment_for(c.run, c.target) for c in used]
    targets = None
    caps = [(c.run.metrics[_capacity_key(c.run)]) for c in capacity]
    nl = len(latency)

    def params_at(xv):
        return {**fixed, **to_model_params(xv, names)}

    sol, rounds = None, 0
    for rounds in range(1, outer_iterations + 1):
        params = params_at(x)
        sims = _simulate(used, params, seeds, max_sim_s, deps, workers)
        if progress:
            progress(len(used))
        surs = [[Surrogate(c.run, c.target, d, r, params, s) for r, s in zip(reps, seeds)]
                for c, d, reps in zip(latency, deps[:nl], sims[:nl])]
        capsur = [[_Capacity(c, d, r, params) for r in reps] for c, d, reps in zip(capacity, deps[nl:], sims[nl:])]
        if targets is None:       # the noise of each statistic, set once (the objective stays one function)
            targets = []
            for c, reps in zip(latency, sims[:nl]):
                noise = {"mean_tpot_ms": METRIC_NOISE["mean_tpot_ms"],
                         **ttft_noise([r.ttft_s for r in reps], replications)}
                targets.append([(k, c.run.metrics[k], noise[k]) for k in METRIC_NOISE if is_fit_target(c.run, k)])

        def residuals(xv):
            pv = params_at(xv)
            res = []
            for reps, tgt in zip(surs, targets):
                preds = [s.predict(pv) for s in reps]
                for k, v, noise in tgt:
                    res.append(math.log(max(float(np.mean([q[k] for q in preds])), 1e-9) / v) / noise)
            for reps, v in zip(capsur, caps):
                res.append(math.log(max(float(np.mean([s.predict(pv) for s in reps])), 1e-12) / v) / CAPACITY_NOISE)
            res.extend((xv - x_prior) / width)
            return np.asarray(res)

        sol = least_squares(residuals, x, bounds=(lower, upper), x_scale=width, method="trf",
                            max_nfev=40 * max(1, len(names)))
        moved = float(np.max(np.abs(sol.x - x) / width)) if len(names) else 0.0
        x = sol.x
        if moved < MOVE_TOL:
            break
    params = params_at(x)
    std, chi2 = _errors(sol, names, len(names))
    status = {}
    for n in CANDIDATES:
        if n in held:
            status[n] = f"held at its default: {held[n]}"
            continue
        share = PARAMETERS_BY_NAME[n].from_model(std[n]) / PRIOR_WIDTHS[n]
        status[n] = ("identified" if share <= IDENTIFIED_SHARE else
                     "weakly identified" if share <= PRIOR_SHARE else "at its prior: the runs do not pin it") + \
            f" (s.e. {share:.0%} of the prior width)"
    result = CalibrationFit(params=params, std=std, prior=prior, names=names, held=held, status=status,
                            latency_cases=latency, capacity_cases=capacity, dropped=dropped, rounds=rounds,
                            chi2_per_dof=chi2)
    if report:
        for c, m in zip(used, predict_metrics(used, params, seeds=seeds, max_sim_s=max_sim_s)):
            result.predicted[c.run.name] = m
    return result


def _errors(sol, names, n_params) -> tuple[dict[str, float], float]:
    if sol is None or not names:
        return {}, float("nan")
    jac = np.asarray(sol.jac)
    n_data = jac.shape[0] - n_params                 # the prior rows are not data
    resid = np.asarray(sol.fun)
    chi2 = float(resid[:n_data] @ resid[:n_data]) / max(1, n_data - n_params) if n_data > 0 else float("nan")
    inflate = max(1.0, chi2) if math.isfinite(chi2) else 1.0
    try:
        cov = np.linalg.inv(jac.T @ jac) * inflate
        err = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    except np.linalg.LinAlgError:
        err = np.full(len(names), np.nan)
    return {n: PARAMETERS_BY_NAME[n].to_model(e) for n, e in zip(names, err)}, chi2
