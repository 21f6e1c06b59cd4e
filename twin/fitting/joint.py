"""The joint fit over every source in ../shared/ground-truth, and held-out evaluation by source, GPU and model
family.

Sources: the inference-perf runs on one H100 (``ground_truth.h100_cases``) and the vLLM silicon rows the twin
can run (``silicon.silicon_cases``). Each source's cases together weigh in proportion to the square root of
their number (so 350 silicon rows do not drown 20 inference-perf runs, nor the reverse); a silicon row without
a published client weighs half. ``case_weights``: the option to share a source's total among its (family, GPU)
cells instead (round 19).

Folds (``FOLDS``): leave-one-source-out, leave-one-GPU-out (H100 vs B200) and leave-one-model-family-out.
Each fold fits on the other groups, holding at its prior every parameter that training set cannot identify
(``identify.held_at_prior``), then simulates the held-out cases at the fitted parameters. Those predictions are
the figures to report; in-sample ones are not evidence of prediction.

Compared metrics: mean and median TTFT, mean TPOT, mean E2E and request throughput. A silicon row has mean TTFT
and TPOT only; its E2E and throughput are derived from them (``silicon.derived_metrics``) and the twin's are
derived the same way from its own mean TTFT and TPOT, like for like.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from twin.fitting.case_weights import DEFAULT_WEIGHTING, case_divisors
from twin.fitting.client_path_rows import light_identified_path, light_path_after_fit
from twin.fitting.fit import Case, fit, simulate_cases
from twin.fitting.ground_truth import h100_cases
from twin.fitting.identify import held_at_prior, identification, not_identified, weakness
from twin.fitting.fused_allreduce_prior import fused_prior_after_fit, fused_prior_labels
from twin.fitting.held_priors import held_priors_after_fit
from twin.fitting.layer_fixed_prior import kept_link_prior, layer_matched_priors
from twin.fitting.inherit_fitted import inherited_after_fit
from twin.fitting.moe_layer_transfer import fold_moe_layer_transfer
from twin.fitting.moe_token_prior import fold_moe_token_prior
from twin.fitting.path_token_prior import path_token_prior
from twin.fitting.expert_request_prior import expert_request_prior
from twin.fitting.parameters import PARAMETER_NAMES, PARAMETERS_BY_NAME, from_model_params, to_model_params
from twin.fitting.provenance import FoldPlan, embedded_start, fold_plan
from twin.fitting.robust import ROBUST_SCALE_LOG
from twin.fitting.scoped import params_for, split
from twin.fitting.targets import METRICS
from twin.fitting.silicon import SiliconCase, model_family, silicon_cases
from twin.fitting.unseen_bandwidth import unexplained_decode_gap, unseen_reference

JOINT_NAMES: tuple[str, ...] = PARAMETER_NAMES + (
    "memory_efficiency@blackwell", "compute_efficiency@blackwell", "request_path_s@blackwell",
    "moe_expert_efficiency", "moe_expert_compute_efficiency", "layer_overhead_s", "kv_memory_efficiency",
    "quant_weight_efficiency@fp8", "quant_weight_efficiency@int4", "step_overhead_s@sync",
    "per_seq_overhead_s@sync")
SOURCE_INFERENCE_PERF = "inference-perf"
SOURCE_SILICON = "silicon"


@dataclass(frozen=True)
class WeightedCase(Case):
    weight: float = 1.0


def source_of(case: Case) -> str:
    return SOURCE_SILICON if isinstance(case, SiliconCase) else SOURCE_INFERENCE_PERF


def gpu_of(case: Case) -> str:
    return case.target.gpu


def family_of(case: Case) -> str:
    return model_family(case.run.model or case.target.model)


FOLDS: dict[str, Callable[[Case], str]] = {"source": source_of, "GPU": gpu_of, "family": family_of}


def balanced(cases: Sequence[Case], weighting: str = DEFAULT_WEIGHTING) -> list[Case]:
    """The cases with weights: each source's total in proportion to sqrt(its count), times the case's own;
    ``weighting="cell"`` shares a source's total among its (family, GPU) cells by sqrt(count) (``case_weights``)."""
    divisors = case_divisors(cases, source_of, lambda c: (family_of(c), gpu_of(c)), weighting)
    out = []
    for c, d in zip(cases, divisors):
        w = getattr(c, "weight", 1.0) / d
        out.append(dataclasses.replace(c, weight=w) if isinstance(c, (SiliconCase, WeightedCase))
                   else WeightedCase(c.run, c.target, weight=w))
    return out


def all_cases(ground_truth: Path | None = None, *, silicon_max_requests: int | None = None, silicon_every: int = 1,
              sources: Sequence[str] = (SOURCE_INFERENCE_PERF, SOURCE_SILICON),
              weighting: str = DEFAULT_WEIGHTING) -> list[Case]:
    """Both sources' cases, weighted (``balanced``, by ``weighting``); ``silicon_every``: every n-th runnable
    silicon row only (a bounded subset, in file order)."""
    cases: list[Case] = []
    if SOURCE_INFERENCE_PERF in sources:
        cases += h100_cases(ground_truth)[0]
    if SOURCE_SILICON in sources:
        cases += silicon_cases(ground_truth, max_requests=silicon_max_requests)[0][::silicon_every]
    return balanced(cases, weighting)


def compared(case: Case, predicted: dict[str, float]) -> dict[str, float]:
    """The twin's metrics to set beside the measured ones: as simulated, or for a silicon row derived from its
    mean TTFT and TPOT as the measured ones are."""
    if not isinstance(case, SiliconCase):
        return dict(predicted)
    osl = case.run.output_tokens.mean
    ttft, tpot = predicted.get("mean_ttft_ms"), predicted.get("mean_tpot_ms")
    if ttft is None or tpot is None:
        return {}
    e2e = ttft + (osl - 1.0) * tpot
    return {"mean_ttft_ms": ttft, "mean_tpot_ms": tpot, "mean_e2el_ms": e2e,
            "request_throughput": case.run.max_concurrency / (e2e / 1e3)}


def errors(case: Case, predicted: dict[str, float]) -> dict[str, float]:
    """Relative error (predicted / measured - 1) per metric both sides have."""
    pred = compared(case, predicted)
    out = {}
    for key, _ in METRICS:
        m, p = case.run.metrics.get(key), pred.get(key)
        if m and p is not None and math.isfinite(p):
            out[key] = p / m - 1.0
    return out


@dataclass
class FoldResult:
    kind: str                          # source, GPU or family
    held_out: str
    params: dict[str, float]
    std: dict[str, float]
    identification: dict[str, str]
    cases: list[Case]
    predicted: list[dict[str, float]]
    plan: FoldPlan | None = None       # what the fold did with the embedded values its group gave evidence to
    data_share: dict[str, float] | None = None     # of each fitted term's precision: the runs' (fit._standard_errors)


def with_deployments(cases: Sequence[Case]) -> list[tuple[Case, object]]:
    """(case, its deployment) for each case: the evidence rows of ``provenance.fold_plan``."""
    from twin.fitting.replay import deployment_for
    return [(c, deployment_for(c.run, c.target)) for c in cases]


def run_fold(kind: str, group: str, cases: Sequence[Case], group_of: Callable[[Case], str], first: list | None, *,
             names: Sequence[str] = JOINT_NAMES, outer_iterations: int = 2, fit_sim_s: float = 60.0,
             eval_sim_s: float | None = 120.0, workers: int = 1, seed: int = 0,
             evidence: Sequence[tuple] | None = None, defaults: Sequence[dict] | None = None,
             allow: Sequence[str] = (), cache: dict | None = None, settle: bool = True, loss: str = "linear",
             loss_scale: float = ROBUST_SCALE_LOG, exclude_gap: bool = True,
             client_path_rows: str = "all", fit_draws: int = 1) -> FoldResult:
    """Fit ``names`` on every group but ``group`` and predict ``group``. Embedded values whose evidence
    (``twin.fitting.provenance``) includes a row of ``group`` are refit (when fitted here) from their stated
    prior, or reset to it. ``evidence``: (case, deployment) of EVERY ground-truth row (default: ``cases``);
    ``first``: ``cases`` simulated at ``default_start(names)`` (``fit_sim_s``; unused when nothing is fitted);
    ``defaults``: ``cases`` predicted at the embedded defaults (``eval_sim_s``), reused for a held-out case the
    fold costs exactly as the defaults do; ``allow``: parameters let through unchanged (the report says so);
    ``cache``: a dict kept across folds (held-out predictions, and training rows simulated again at a fold's
    start, by case and the cost keywords it sees);
    ``settle``: a fitted term the training rows do not identify (``identify.not_identified``) is held at its prior
    (the stated one where its evidence is held out, else its embedded value) and the others are fitted again;
    ``loss``, ``loss_scale``: the fit's loss on the data residuals (``twin.fitting.robust``; least squares by
    default); ``exclude_gap``: leave the rows ``unexplained_decode_gap`` names out of the fit (round 9);
    ``client_path_rows``: which training rows identify the bench client's path (``client_path_rows``; round 18).
    ``fit_draws``: K draws of each open-loop training run in the fit's simulations (``first`` then holds their
    ``fit_draws.Draws``), each predicted as their mean (``twin.fitting.fit_draws``; round 23); held-out rows keep one.

    What a fold assumes for a term it has no reading of (issue 33, docs/fidelity.md "Round 8 / 9 / 10 outcome"):
    the plan's stated priors (``provenance.fold_plan``: pooled or carried expert-path efficiencies,
    ``expert_path_prior``; host time from another generation and kernel launches, ``launch_prior``); before the fit,
    a generation's MoE per-token cost from the other generation (``moe_token_prior``) and a held-out Hopper MoE
    path's from the MoE readings kept (``path_token_prior``), an expert path's request time from another generation's
    (``expert_request_prior``) and its fixed time per MoE layer, same format, unscaled (``moe_layer_transfer``);
    after it, the reference generation's bandwidth fraction from the others (``unseen_bandwidth``), MLA and
    sync-host (with the sort sampler) priors (``held_priors``), inheriting resets at the fitted source
    (``inherit_fitted``), a held-out fused all-reduce at the unfused latency less one kernel
    (``fused_allreduce_prior``) or, on Blackwell, at the kept TP sets' fixed time per decoder layer
    (``layer_fixed_prior``)."""
    # round 9: a row whose decode the cost model knowingly cannot express does not set the shared terms
    train = [i for i, c in enumerate(cases)
             if group_of(c) != group and not (exclude_gap and unexplained_decode_gap(c))]
    test_idx = [i for i, c in enumerate(cases) if group_of(c) == group]
    test = [cases[i] for i in test_idx]
    train_cases = [cases[i] for i in train]
    held = held_at_prior(train_cases, names) if names else {}
    settled: dict[str, float] = {}
    fit_names = tuple(n for n in names if n not in held)
    evidence = evidence if evidence is not None else with_deployments(cases)
    plan = fold_plan(group, group_of, evidence, fit_names, allow=allow)
    start = default_start(names) | plan.start
    # a held parameter is left out: a scoped one falls back to the unscoped value (Blackwell carries Hopper's
    # fitted fractions, a server without async scheduling the async overheads), the others to the model's; an
    # expert path's embedded entry beside a fitted unscoped term of its name is held (the fitted value would
    # override it; round 7: layer_token_overhead_s beside Hopper's Marlin MXFP4 path), unless its evidence is held
    # out (the plan then refits it as the unscoped term, or resets it)
    plan.fixed.update(kept_link_prior(plan, [e for e in evidence if group_of(e[0]) != group]))   # round 11
    fixed = {n: v for n, v in start.items() if n not in names and n not in plan.actions} | plan.fixed
    fixed |= fold_moe_token_prior(names, held, plan)    # round 9: a generation without rows, on MoE models
    fixed |= path_token_prior(plan, group, group_of, evidence)     # round 10: a held-out Hopper MoE path
    fixed |= expert_request_prior(plan)    # round 11: a held-out generation's expert-path request time
    fixed |= fold_moe_layer_transfer(names, held, plan)    # round 17: its MoE layer time, same format, unscaled
    if fit_names:
        train_first = [first[i] for i in train]
        if plan.actions:       # training rows the plan costs differently: simulated again at the fit's start
            point = {**fixed, **to_model_params(from_model_params(start, fit_names), fit_names)}
            _resimulate(train_cases, train_first, plan, point, default_start(names), cache, max_sim_s=fit_sim_s,
                        workers=workers, seed=seed, draws=fit_draws)
        priors = start | plan.prior
        fixed |= (path := light_identified_path(client_path_rows, train_cases, train_first, fit_names, start, fixed,
                                                priors, fit, max_sim_s=fit_sim_s, workers=workers, seed=seed,
                                                loss=loss, scale=loss_scale))
        fit_names = tuple(n for n in fit_names if n not in path)
        result = fit(train_cases, names=fit_names, start=start, fixed=fixed,
                     outer_iterations=outer_iterations, max_sim_s=fit_sim_s, workers=workers, seed=seed,
                     first=train_first, final_simulation=False, priors=priors, loss=loss, scale=loss_scale,
                     draws=fit_draws)
        params, std, share = result.params, result.std, result.data_share
        if (again := light_path_after_fit(client_path_rows, train_cases, train_first, fit_names, start, fixed, priors,
                                          params, seed=seed, loss=loss, scale=loss_scale)) is not None:
            params, std, share, path = again
            fixed |= path
            fit_names = tuple(n for n in fit_names if n not in path)
        if settle and (weak := not_identified(fit_names, std, share)):
            params, std, share, settled = _settle(train_cases, fit_names, weak, std, share, priors, fixed,
                                                  start, train_first, fit_sim_s=fit_sim_s, workers=workers, seed=seed,
                                                  loss=loss, scale=loss_scale)
    else:      # nothing to fit here: the held-out group is predicted at the defaults less the plan's resets
        params, std, share = dict(fixed), {}, {}
    plan.fixed.update(carried := unseen_reference(plan, params))     # round 9: the other generations' fraction
    params = params | carried
    deps = with_deployments(test)
    resets, added = held_priors_after_fit(plan, params, names, deps)      # round 9/10: MLA / sync stated priors
    # round 8: INHERIT follows the fit; round 10: a held-out fused all-reduce at the unfused one less a kernel, or
    # (round 11) at the kept Blackwell TP sets' fixed time per decoder layer
    matched = layer_matched_priors(plan, params, [e for e in evidence if group_of(e[0]) != group], deps)
    plan.how.update(fused_prior_labels(plan, matched))       # the report says which rule priced it, not "inherit"
    plan.fixed.update(inherited := fused_prior_after_fit(plan, inherited_after_fit(plan, params) | resets, matched))
    params = params | inherited | added
    predicted: list = [None] * len(test)
    if defaults is not None and not fit_names:
        for k, (_, d) in enumerate(deps):
            if not plan.affects(d):
                predicted[k] = defaults[test_idx[k]]
    # ``cache``: predictions by (case, the cost model keywords it sees): folds that cost a case alike share one
    keys = [_cache_key(c, d, params, eval_sim_s, seed) for c, d in deps]
    if cache is not None:
        predicted = [cache.get(key, p) if p is None else p for key, p in zip(keys, predicted)]
    todo = [k for k, p in enumerate(predicted) if p is None]
    for k, r in zip(todo, simulate_cases([test[k] for k in todo], params, seed=seed, max_sim_s=eval_sim_s,
                                         workers=workers)):
        predicted[k] = r.metrics
        if cache is not None:
            cache[keys[k]] = r.metrics
    return FoldResult(kind, group, params, std, identification(fit_names, std, held, settled, share), test,
                      predicted, plan, share)


def _cache_key(case: Case, deployment, params: dict[str, float], sim_s: float | None, seed: int,
               kind: str = "predict") -> tuple:
    """A simulation's key in a fold ``cache``: the case and the cost model keywords it sees (folds that cost a
    case alike share one simulation); ``kind`` keeps a fit's training simulation apart from a held-out prediction."""
    return (kind, case.run.name, repr(case.target), tuple(sorted(params_for(params, deployment).items())), sim_s,
            seed)


def _resimulate(train_cases, train_first, plan, point, first_point, cache, **sim) -> None:
    """Replace in ``train_first`` the simulations of the training rows ``plan`` costs differently at ``point``
    than at ``first_point`` (where ``train_first`` was simulated): a row whose cost keywords are the same at both
    keeps its simulation (the same run, seed and keywords give the same replay), and with ``cache`` a row
    simulated at the same keywords by an earlier fold (folds that reset the same entries) is reused."""
    cache = {} if cache is None else cache
    moved = {k: _cache_key(train_cases[k], d, point, sim["max_sim_s"], sim["seed"], "fit")
             for k, (_, d) in enumerate(with_deployments(train_cases))
             if plan.affects(d) and params_for(point, d) != params_for(first_point, d)}
    todo = [k for k, key in moved.items() if key not in cache]
    for k, r in zip(todo, simulate_cases([train_cases[k] for k in todo], point, **sim) if todo else []):
        cache[moved[k]] = r
    for k, key in moved.items():
        train_first[k] = cache[key]


def _settle(train_cases, fit_names, weak, std, share, priors, fixed, start, first, **sim):
    """Hold the terms the fit did not identify (``weak``) at their priors and fit the others again on the same
    simulations (one surrogate round): returns (params, standard errors, data shares, {held term: why})."""
    settled = {n: weakness(n, std, share) for n in weak}
    fixed = {**fixed, **{n: priors[n] if n in priors else PARAMETERS_BY_NAME[n].to_model(PARAMETERS_BY_NAME[n].prior)
                         for n in weak}}
    keep = tuple(n for n in fit_names if n not in weak)
    if not keep:
        return fixed, {}, {}, settled
    again = fit(train_cases, names=keep, start=start, fixed=fixed, outer_iterations=1, first=first,
                final_simulation=False, priors=priors, max_sim_s=sim["fit_sim_s"], workers=sim["workers"],
                seed=sim["seed"], loss=sim["loss"], scale=sim["scale"])
    return again.params, again.std, again.data_share, settled


def summarize(pairs: Sequence[tuple[Case, dict[str, float]]]) -> dict[str, dict[str, float | int | None]]:
    """Per metric: count, median |error| and median signed error (fractions)."""
    return summarize_errors([errors(c, p) for c, p in pairs])


def summarize_errors(case_errors: Sequence[dict[str, float]]) -> dict[str, dict[str, float | int | None]]:
    """``summarize`` of the cases' ``errors`` (e.g. a report's, read back)."""
    out = {}
    for key, _ in METRICS:
        errs = [e[key] for e in case_errors if key in e]
        out[key] = {"n": len(errs), "abs": statistics.median(abs(x) for x in errs) if errs else None,
                    "signed": statistics.median(errs) if errs else None}
    return out


def default_start(names: Sequence[str] = JOINT_NAMES) -> dict[str, float]:
    """The embedded defaults as values of ``names`` (``provenance.embedded_start``): where a fit starts."""
    return embedded_start(names)


def simulated_value(fold: FoldResult, name: str) -> tuple[float | None, str]:
    """The value of ``name`` the fold's simulations used (model units) and where it came from: the fitted one;
    the plan's reset (its evidence is held out); for a held scoped term not in the fold's parameters, the
    unscoped value it falls back to (``scoped.params_for``: e.g. ``per_seq_overhead_s@sync`` held in a fold
    without a sync server in its training rows costs the held-out sync servers at the fold's
    ``per_seq_overhead_s``, a given value being the server's whole per-sequence cost); else the embedded default
    the cost model resolves itself."""
    if fold.plan is not None and name in fold.plan.fixed:
        return fold.plan.fixed[name], "stated prior: its evidence is held out"
    if name in fold.params:
        return fold.params[name], ""
    base, scope = split(name)
    # a compound scope falls back to a fitted part's value first (``request_path_s@client_vllm_bench+vllm_0.10``
    # held: the bench path), as ``scoped.params_for`` resolves it
    parts = scope.split("+") if scope is not None and "+" in scope else []
    wider = next((f"{base}@{p}" for p in parts if f"{base}@{p}" in fold.params), None)
    if wider is not None:
        return fold.params[wider], f"held: simulated at the fold's {wider}"
    if scope is not None and base in fold.params:
        return fold.params[base], f"held: simulated at the fold's {base}"
    value = default_start((name,)).get(name)
    return value, "held: the embedded default" if value is not None else "held"


def parameter_table(fold: FoldResult) -> list[tuple[str, str, str, str]]:
    """(name, value in fit units as simulated, one standard error, identification) per parameter of a fold."""
    rows = []
    for name, status in fold.identification.items():
        p = PARAMETERS_BY_NAME[name]
        value, where = simulated_value(fold, name)
        v = "-" if value is None else f"{p.from_model(value):.4g} {p.unit}" + (f" ({where})" if where else "")
        sd = fold.std.get(name)
        rows.append((name, v, f"{p.from_model(sd):.2g}" if sd is not None and math.isfinite(sd) else "-", status))
    return rows
