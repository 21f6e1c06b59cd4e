"""Fit cost parameters to real benchmark runs by simulating them.

Outer loop (a fixed point): simulate every run at the current parameters; then, holding each run's simulated
steps fixed, find the parameters whose re-costed metrics (``twin.fitting.surrogate``) best match the measured
ones (scipy ``least_squares`` on log ratios, with weak priors towards the pre-fit defaults); repeat with the new
parameters until they stop moving. The last simulation at the final parameters gives the in-sample errors.

Residual weights: mean TPOT x2, mean and median TTFT x1, p90 TTFT x0.5 (it pins the request path's variable
part). p99 latencies are left to the evaluation: one run's tail is too noisy to steer shared parameters. A run
that met its server cold (``MeasuredRun.cold_start``) leaves its mean TTFT to the evaluation too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

from twin.errors import TwinInputError
from twin.fitting.fit_draws import case_seeds, check_draws, check_draws_option, grouped, surrogate_for  # noqa: F401
from twin.fitting.measured_run import MeasuredRun, is_fit_target
from twin.fitting.parameters import PARAMETER_NAMES, PARAMETERS_BY_NAME, from_model_params, to_model_params
from twin.fitting.replay import Replayed, Target, deployment_for, replay
from twin.fitting.robust import ROBUST_SCALE_LOG, transformed
from twin.fitting.surrogate import Surrogate
from twin.fitting.switches import Switches, map_jobs

FIT_METRICS: dict[str, float] = {"mean_tpot_ms": 2.0, "mean_ttft_ms": 1.0, "median_ttft_ms": 1.0,
                                 "p90_ttft_ms": 0.5}
PRIOR_WEIGHT = 0.05       # per parameter, on (x - prior) / (upper - lower)
DEFAULT_MAX_SIM_S = 120.0


PREFILL_HEAVY_TOKENS = 1024


@dataclass(frozen=True)
class Case:
    """A measured run and the deployment it ran on."""

    run: MeasuredRun
    target: Target


def identifiable_parameters(cases: Sequence[Case]) -> tuple[str, ...]:
    """The parameters the runs can pin down: the compute efficiency only when some run prefills long prompts
    without a prefix cache (else GEMMs never leave the weight-read bound), the all-reduce only with TP > 1."""
    names = list(PARAMETER_NAMES)
    if not any(c.run.prompt_pool is None and c.run.prompt_tokens.mean >= PREFILL_HEAVY_TOKENS for c in cases):
        names.remove("compute_efficiency")
    if all(c.target.tensor_parallel_size == 1 for c in cases):
        names.remove("allreduce_latency_s")
    return tuple(names)


@dataclass
class FitResult:
    params: dict[str, float]                       # model units (s, fractions, tokens)
    std: dict[str, float]                          # one standard error each, model units
    predicted: list[dict[str, float]]              # per fitted case, simulated at ``params``
    names: tuple[str, ...]
    cases: list[Case]                              # the cases fitted (those that did not queue)
    iterations: int
    history: list[dict[str, float]] = field(default_factory=list)
    data_share: dict[str, float] = field(default_factory=dict)   # of each term's precision: the runs' (not the prior's)


def _replay_one(args: tuple[Case, dict[str, float], int, float | None]) -> Replayed:
    case, params, seed, max_sim_s = args
    return replay(case.run, case.target, params, seed=seed, max_sim_s=None if case.run.queueing else max_sim_s)


def check_simulation_options(max_sim_s: float | None, workers: int, sim_flag: str = "--sim-s",
                             workers_flag: str = "--workers") -> None:
    """A one-line error naming the option for a simulated window that is not a positive finite number of seconds
    (None: the whole run) or a worker count below 1 (scripts call it before their work; ``simulate_cases`` too)."""
    if max_sim_s is not None and (isinstance(max_sim_s, bool) or not (
            isinstance(max_sim_s, (int, float)) and math.isfinite(max_sim_s) and max_sim_s > 0)):
        raise TwinInputError(f"{sim_flag} {max_sim_s}: must be a positive finite number of seconds")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise TwinInputError(f"{workers_flag} {workers}: must be a whole number >= 1")


def simulate_cases(cases: Sequence[Case], params: dict[str, float], *, seed: int = 0,
                   max_sim_s: float | None = DEFAULT_MAX_SIM_S, workers: int = 1,
                   progress: Callable[[int], None] | None = None, switches: Switches | None = None,
                   draws: int = 1) -> list[Replayed]:
    """Every case simulated at ``params`` (in ``workers`` processes): its first ``max_sim_s`` seconds, or all
    of it for a run that queued; ``progress`` is called once per simulation. ``switches``: the harness's switches
    every simulation sees, in any worker process (``twin.fitting.switches``; default this process's). ``draws``
    K > 1: each open-loop run the fit keeps is simulated at K draw seeds, its entry a ``fit_draws.Draws``
    (``twin.fitting.fit_draws``)."""
    check_simulation_options(max_sim_s, workers, "max_sim_s", "workers")
    check_draws(draws)
    jobs = [(c, params, s, max_sim_s) for c in cases for s in case_seeds(c, seed, draws)]
    out = []
    for r in map_jobs(_replay_one, jobs, workers, switches):
        out.append(r)
        if progress:
            progress(1)
    return out if draws == 1 else grouped(cases, out, seed, draws)


START_INSET = 1e-3       # share of a parameter's range the optimiser starts inside its bounds


def _measured(case: Case) -> list[tuple[str, float, float]]:
    """(metric, measured value, weight) of the fit's targets on one run; a cold run's one-off tail is not one
    (``measured_run.COLD_START_UNFITTED``)."""
    return [(k, case.run.metrics[k], w) for k, w in FIT_METRICS.items() if is_fit_target(case.run, k)]


def _bounds(names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of each parameter's plausible range, in fit units."""
    return (np.array([PARAMETERS_BY_NAME[n].lower for n in names]),
            np.array([PARAMETERS_BY_NAME[n].upper for n in names]))


def _fit_on_surrogates(surrogates: list[Surrogate], cases: Sequence[Case], x0: np.ndarray,
                       names: tuple[str, ...], fixed: dict[str, float], priors: dict[str, float] | None = None,
                       loss: str = "linear", scale: float = ROBUST_SCALE_LOG):
    """scipy's solution and the residual function it minimised (``_standard_errors`` evaluates it again);
    ``loss``/``scale``: each data residual's log ratio through ``robust.transformed`` (the priors' rows as they are)."""
    lower, upper = _bounds(names)
    prior = from_model_params(priors, names) if priors is not None else \
        np.array([PARAMETERS_BY_NAME[n].prior for n in names])
    span = upper - lower
    targets = [_measured(c) for c in cases]
    case_weights = [math.sqrt(getattr(c, "weight", 1.0)) for c in cases]   # a case's share of the cost

    def residuals(x: np.ndarray) -> np.ndarray:
        params = {**fixed, **to_model_params(x, names)}
        res = []
        for sur, tgt, cw in zip(surrogates, targets, case_weights):
            pred = sur.predict(params)
            res.extend(cw * w * transformed(math.log(max(pred[k], 1e-9) / v), loss, scale) for k, v, w in tgt)
        res.extend(PRIOR_WEIGHT * (x - prior) / span)
        return np.asarray(res)

    # start strictly inside the bounds: scipy's trust-region reflective method stops at once when it starts on
    # a bound (a prior of 0 or 1 is often one), so such a parameter could never leave its prior
    x0 = np.clip(x0, lower + START_INSET * span, upper - START_INSET * span)
    sol = least_squares(residuals, x0, bounds=(lower, upper), x_scale=span, method="trf", max_nfev=60 * len(names))
    return sol, residuals


def fit(cases: Sequence[Case], *, start: dict[str, float] | None = None, names: tuple[str, ...] = PARAMETER_NAMES,
        fixed: dict[str, float] | None = None, outer_iterations: int = 3, seed: int = 0,
        max_sim_s: float | None = DEFAULT_MAX_SIM_S, workers: int = 1, tol: float = 0.002,
        progress: Callable[[int], None] | None = None, first: list[Replayed] | None = None,
        final_simulation: bool = True, priors: dict[str, float] | None = None, loss: str = "linear",
        scale: float = ROBUST_SCALE_LOG, draws: int = 1) -> FitResult:
    """Fit ``names`` (the others stay at ``fixed`` or the model's defaults) to ``cases``; runs that queue
    (``MeasuredRun.queueing``) are left out of the fit, and ``predicted`` follows the cases that were fitted.

    ``first``: the cases already simulated at ``start`` (saves one simulation of every case).
    ``final_simulation=False``: no simulation at the final parameters (``predicted`` is then empty).
    ``priors``: the values (model units) the weak priors pull towards; default each parameter's stated prior.
    ``loss``: ``linear`` (least squares on log ratios) or a robust one (``twin.fitting.robust``) at ``scale``.
    ``draws``: K draws of each open-loop run in every simulation here, each predicted as their mean
    (``twin.fitting.fit_draws``; ``first`` then holds its ``Draws``); 1 (default): one draw, as before."""
    if first is not None:
        first = [r for c, r in zip(cases, first) if not c.run.queueing]
    cases = [c for c in cases if not c.run.queueing]
    if not cases:
        raise TwinInputError("the fit needs a run that the server kept up with (every run given queued: its "
                             "latencies measure the queue, not the server)")
    fixed = dict(fixed or {})
    x = from_model_params(start or {}, names)
    lower, upper = _bounds(names)
    spans = upper - lower
    deployments = [deployment_for(c.run, c.target) for c in cases]
    params = {**fixed, **to_model_params(x, names)}
    replayed = first if first is not None else simulate_cases(cases, params, seed=seed, max_sim_s=max_sim_s,
                                                              workers=workers, progress=progress, draws=draws)
    history = [dict(params)]
    sol = residuals = None
    it = 0
    for it in range(1, outer_iterations + 1):
        surrogates = [surrogate_for(c.run, c.target, d, r, params, seed) for c, d, r in zip(cases, deployments, replayed)]
        sol, residuals = _fit_on_surrogates(surrogates, cases, x, names, fixed, priors, loss, scale)
        moved = np.max(np.abs(sol.x - x) / spans)        # as a share of each parameter's plausible range
        x = sol.x
        params = {**fixed, **to_model_params(x, names)}
        history.append(dict(params))
        if not final_simulation and (it == outer_iterations or moved < tol):
            replayed = []
            break
        replayed = simulate_cases(cases, params, seed=seed, max_sim_s=max_sim_s, workers=workers,
                                  progress=progress, draws=draws)
        if moved < tol:
            break
    std, share = _standard_errors(residuals, sol.x, names) if sol is not None else (
        {n: float("nan") for n in names}, {n: 0.0 for n in names})
    return FitResult(params=params, std=std, predicted=[r.metrics for r in replayed], names=names,
                     cases=list(cases), iterations=it, history=history, data_share=share)


SE_STEP_SHARE = 0.01      # the standard errors' Jacobian step, as a share of each parameter's plausible range


def _standard_errors(residuals: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
                     names: tuple[str, ...]) -> tuple[dict[str, float], dict[str, float]]:
    """One standard error per parameter (model units) and the share of its precision the runs give (the rest is
    the weak prior's), from the Gauss-Newton covariance s^2 (J^T J)^-1 at the solution ``x`` (s^2: the residual
    variance there, over residuals less parameters).

    J is taken by central differences over +/- ``SE_STEP_SHARE`` of each parameter's range (one-sided at a
    bound), not scipy's: its steps (~1e-8 of the value) fall below the surrogate's resolution, and where the
    optimiser stopped on a small jump of the surrogate that Jacobian is huge and the standard error ~0 (issue 33,
    round 7: memory_efficiency +/- 5e-8 on a MoE run whose recosted steps lost a token to truncation).
    The data share is 1 - (the prior's precision) / (the term's whole precision, correlations included): ~0 where
    the runs do not move the term apart from the others, whatever s^2 (a noise-free fit has a tiny s^2 and so a
    tiny standard error for a term only its prior holds)."""
    lower, upper = _bounds(names)
    span = upper - lower
    r0 = residuals(x)
    jac = np.empty((len(r0), len(names)))
    for i in range(len(names)):
        hi, lo = x.copy(), x.copy()
        hi[i], lo[i] = min(upper[i], x[i] + SE_STEP_SHARE * span[i]), max(lower[i], x[i] - SE_STEP_SHARE * span[i])
        jac[:, i] = (residuals(hi) - residuals(lo)) / (hi[i] - lo[i])
    s2 = float(r0 @ r0) / max(1, len(r0) - len(names))
    try:
        inv = np.linalg.pinv(jac.T @ jac)
        err = np.sqrt(np.clip(np.diag(inv) * s2, 0.0, None))
        prior_precision = (PRIOR_WEIGHT / span) ** 2            # of the prior's residual rows alone, per s^2
        share = np.clip(1.0 - prior_precision * np.diag(inv), 0.0, 1.0)
    except np.linalg.LinAlgError:
        err, share = np.full(len(names), np.nan), np.zeros(len(names))
    return ({n: PARAMETERS_BY_NAME[n].to_model(e) for n, e in zip(names, err)},
            {n: float(v) for n, v in zip(names, share)})
