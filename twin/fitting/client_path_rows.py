"""Which training rows identify the bench client's request path in a fold (issue 33, round 18; opt-in).

A fold fits ``request_path_s@client_vllm_bench`` (one constant per request) jointly with the step terms on all its
training rows. Loaded rows queue behind steps the twin prices short, and the least-squares fit lends that time to
the one term every bench row shares: the folds fit 11-19 ms where the client was timed ~1 ms over the embedded
4.8 ms path (docs/fidelity.md, rounds 14-17). At light load nothing queues, so a request's TTFT is its path plus its
own first step: the rule ``light`` fits the path ALONE on the fold's light-load bench rows (CONC <= ``LIGHT_CONC``),
the other terms at the fold's start (one surrogate round on the start's simulations: no extra simulation), then
holds it while the joint fit sets the rest on every training row. The rule ``light-fit`` takes the joint fit as it
is, refits the path alone on the light-load rows at the other terms' FITTED values, and refits the others on every
training row with it held (both on the fit's surrogates, built at the start: no extra simulation). ``all`` is the
folds' rule (no change).
"""

from __future__ import annotations

from collections.abc import Sequence

from twin.errors import TwinInputError
from twin.fitting.parameters import from_model_params, to_model_params
from twin.workload.clients import client_scope

BENCH_PATH = "request_path_s@client_vllm_bench"
RULES = ("all", "light", "light-fit")
LIGHT_CONC = 8          # the light-load band of rounds 14-17's readings (bench_path_pull, request_path_structure)


def check_rule(rule: str) -> str:
    """``rule`` if it is one of ``RULES``, else a one-line error naming the allowed rules."""
    if rule not in RULES:
        raise TwinInputError(f"client path rows {rule!r}: one of {', '.join(RULES)}")
    return rule


def light_bench(case) -> bool:
    """A bench-client row at light load: a closed loop of at most ``LIGHT_CONC`` users."""
    run = case.run
    return (run.client is not None and client_scope(run.client) == BENCH_PATH.split("@")[1]
            and run.max_concurrency is not None and run.max_concurrency <= LIGHT_CONC)


def light_identified_path(rule: str, train_cases: Sequence, train_first: Sequence, fit_names: Sequence[str],
                          start: dict[str, float], fixed: dict[str, float], priors: dict[str, float],
                          fit_fn, **sim) -> dict[str, float]:
    """{``BENCH_PATH``: value} fitted alone on the light-load training bench rows (``rule`` ``light``), or {} (rule
    ``all``, the path not fitted here, or no light-load training bench row). ``train_first``: the training rows
    simulated at ``fixed`` plus ``start``; ``fit_fn``: ``twin.fitting.fit.fit``; ``sim``: its simulation keywords."""
    if check_rule(rule) != "light" or BENCH_PATH not in fit_names:
        return {}
    idx = [k for k, c in enumerate(train_cases) if light_bench(c)]
    if not idx:
        return {}
    others = tuple(n for n in fit_names if n != BENCH_PATH)
    at_start = {**fixed, **to_model_params(from_model_params(start, others), others)} if others else dict(fixed)
    result = fit_fn([train_cases[k] for k in idx], names=(BENCH_PATH,), start=start, fixed=at_start,
                    outer_iterations=1, first=[train_first[k] for k in idx], final_simulation=False, priors=priors,
                    **sim)
    return {BENCH_PATH: result.params[BENCH_PATH]}


def light_path_after_fit(rule: str, train_cases: Sequence, train_first: Sequence, fit_names: Sequence[str],
                         start: dict[str, float], fixed: dict[str, float], priors: dict[str, float],
                         fitted: dict[str, float], *, seed: int, loss: str, scale: float):
    """Rule ``light-fit``: (params, standard errors, data shares, {``BENCH_PATH``: value}) after refitting the path
    alone on the light-load training bench rows at the other terms' fitted values (``fitted``) and then the others
    on every training row with the path held; None for another rule, an unfitted path or no light-load row.
    The surrogates are built where ``train_first`` was simulated (``fixed`` plus ``start``), as ``fit`` builds them."""
    if check_rule(rule) != "light-fit" or BENCH_PATH not in fit_names:
        return None
    from twin.fitting.fit import _fit_on_surrogates, _standard_errors
    from twin.fitting.replay import deployment_for
    from twin.fitting.fit_draws import surrogate_for    # a Draws' mean where the fold draws a run K times
    keep = [k for k, c in enumerate(train_cases) if not c.run.queueing]
    light = [k for k in keep if light_bench(train_cases[k])]
    if not light:
        return None
    base = {**fixed, **to_model_params(from_model_params(start, fit_names), fit_names)}
    sur = {k: surrogate_for(train_cases[k].run, train_cases[k].target,
                            deployment_for(train_cases[k].run, train_cases[k].target), train_first[k], base, seed)
           for k in keep}
    others = tuple(n for n in fit_names if n != BENCH_PATH)
    at_fit = {**fixed, **{n: fitted[n] for n in others}}
    sol, _ = _fit_on_surrogates([sur[k] for k in light], [train_cases[k] for k in light],
                                from_model_params(fitted, (BENCH_PATH,)), (BENCH_PATH,), at_fit, priors, loss, scale)
    path = to_model_params(sol.x, (BENCH_PATH,))
    held = {**fixed, **path}
    if not others:
        return held, {}, {}, path
    sol, residuals = _fit_on_surrogates([sur[k] for k in keep], [train_cases[k] for k in keep],
                                        from_model_params(fitted, others), others, held, priors, loss, scale)
    std, share = _standard_errors(residuals, sol.x, others)
    return {**held, **to_model_params(sol.x, others)}, std, share, path
