"""The joint fit over every source in ../shared/ground-truth, and held-out evaluation by source, GPU and model
family.

Sources: the inference-perf runs on one H100 (``ground_truth.h100_cases``) and the vLLM silicon rows the twin
can run (``silicon.silicon_cases``). Each source's cases together weigh in proportion to the square root of
their number (so 350 silicon rows do not drown 20 inference-perf runs, nor the reverse); a silicon row without
a published client weighs half.

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
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from twin.fitting.fit import Case, fit, simulate_cases
from twin.fitting.ground_truth import h100_cases
from twin.fitting.identify import held_at_prior, identification
from twin.fitting.parameters import PARAMETER_NAMES, PARAMETERS_BY_NAME
from twin.fitting.silicon import SiliconCase, model_family, silicon_cases

JOINT_NAMES: tuple[str, ...] = PARAMETER_NAMES + (
    "memory_efficiency@blackwell", "compute_efficiency@blackwell", "request_path_s@blackwell",
    "moe_expert_efficiency", "moe_expert_compute_efficiency", "layer_overhead_s", "kv_memory_efficiency",
    "quant_weight_efficiency@fp8", "quant_weight_efficiency@int4", "step_overhead_s@sync",
    "per_seq_overhead_s@sync")
METRICS = (("mean_ttft_ms", "TTFT mean"), ("median_ttft_ms", "TTFT p50"), ("mean_tpot_ms", "TPOT"),
           ("mean_e2el_ms", "E2E mean"), ("request_throughput", "throughput"))
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


def balanced(cases: Sequence[Case]) -> list[Case]:
    """The cases with weights: each source's total in proportion to sqrt(its count), times the case's own."""
    counts: dict[str, int] = defaultdict(int)
    for c in cases:
        counts[source_of(c)] += 1
    out = []
    for c in cases:
        w = getattr(c, "weight", 1.0) / math.sqrt(counts[source_of(c)])
        out.append(dataclasses.replace(c, weight=w) if isinstance(c, (SiliconCase, WeightedCase))
                   else WeightedCase(c.run, c.target, weight=w))
    return out


def all_cases(ground_truth: Path | None = None, *, silicon_max_requests: int | None = None, silicon_every: int = 1,
              sources: Sequence[str] = (SOURCE_INFERENCE_PERF, SOURCE_SILICON)) -> list[Case]:
    """Both sources' cases, weighted (``balanced``); ``silicon_every``: every n-th runnable silicon row only
    (a bounded subset, in file order)."""
    cases: list[Case] = []
    if SOURCE_INFERENCE_PERF in sources:
        cases += h100_cases(ground_truth)[0]
    if SOURCE_SILICON in sources:
        cases += silicon_cases(ground_truth, max_requests=silicon_max_requests)[0][::silicon_every]
    return balanced(cases)


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


def run_fold(kind: str, group: str, cases: Sequence[Case], group_of: Callable[[Case], str], first: list, *,
             names: Sequence[str] = JOINT_NAMES, outer_iterations: int = 2, fit_sim_s: float = 60.0,
             eval_sim_s: float | None = 120.0, workers: int = 1, seed: int = 0) -> FoldResult:
    train = [i for i, c in enumerate(cases) if group_of(c) != group]
    test = [c for c in cases if group_of(c) == group]
    train_cases = [cases[i] for i in train]
    held = held_at_prior(train_cases, names)
    fit_names = tuple(n for n in names if n not in held)
    start = default_start(names)
    # a held parameter is left out: a scoped one falls back to the unscoped value (Blackwell carries Hopper's
    # fitted fractions, a server without async scheduling the async overheads), the others to the model's
    if fit_names:
        result = fit(train_cases, names=fit_names, start=start,
                     outer_iterations=outer_iterations, max_sim_s=fit_sim_s, workers=workers, seed=seed,
                     first=[first[i] for i in train], final_simulation=False, priors=start)
        params, std = result.params, result.std
    else:      # the training set identifies none of the terms: the held-out group is predicted at the defaults
        params, std = {}, {}
    predicted = [r.metrics for r in simulate_cases(test, params, seed=seed, max_sim_s=eval_sim_s,
                                                   workers=workers)]
    return FoldResult(kind, group, params, std, identification(fit_names, std, held), test, predicted)


def summarize(pairs: Sequence[tuple[Case, dict[str, float]]]) -> dict[str, dict[str, float | int | None]]:
    """Per metric: count, median |error| and median signed error (fractions)."""
    out = {}
    for key, _ in METRICS:
        errs = [e[key] for e in (errors(c, p) for c, p in pairs) if key in e]
        out[key] = {"n": len(errs), "abs": statistics.median(abs(x) for x in errs) if errs else None,
                    "signed": statistics.median(errs) if errs else None}
    return out


def default_start(names: Sequence[str] = JOINT_NAMES) -> dict[str, float]:
    """The embedded defaults (``twin.cost.roofline``, ``twin.cost.generations``) as values of ``names``, in model
    units: where the fit starts, and what a held parameter keeps. (The all-reduce latency is the NVLink one:
    every GPU in the data is NVLink-connected.)"""
    from twin.cost import roofline as r
    from twin.cost.default_terms import EXPERT_FORMAT_TERMS, FORMAT_QUANT_EFFICIENCY, generation_term
    from twin.cost.generations import default_efficiencies
    from twin.cost.moe_terms import DEFAULT_MOE_EXPERT_COMPUTE_EFFICIENCY, DEFAULT_MOE_EXPERT_EFFICIENCY
    from twin.hardware.catalog import resolve_gpu
    mem, comp = default_efficiencies("H100-SXM")
    bw_mem, bw_comp = default_efficiencies("B200")
    hopper, blackwell = resolve_gpu("H100-SXM"), resolve_gpu("B200")
    values = {"memory_efficiency": mem, "compute_efficiency": comp, "gemm_half_tokens": r.DEFAULT_GEMM_HALF_TOKENS,
              "step_overhead_s": r.DEFAULT_STEP_OVERHEAD_S, "per_seq_overhead_s": r.DEFAULT_PER_SEQ_OVERHEAD_S,
              "request_path_s": r.DEFAULT_REQUEST_PATH_S, "request_path_jitter_s": r.DEFAULT_REQUEST_PATH_JITTER_S,
              "allreduce_latency_s": r.default_allreduce_latency_s(hopper), "memory_efficiency@blackwell": bw_mem,
              "compute_efficiency@blackwell": bw_comp, "moe_expert_efficiency": DEFAULT_MOE_EXPERT_EFFICIENCY,
              "moe_expert_compute_efficiency": DEFAULT_MOE_EXPERT_COMPUTE_EFFICIENCY,
              "layer_overhead_s": generation_term(hopper, "layer_overhead_s", 0.0),
              "kv_memory_efficiency": mem, "request_path_s@blackwell": r.DEFAULT_REQUEST_PATH_S,
              "quant_weight_efficiency@fp8": FORMAT_QUANT_EFFICIENCY.get("fp8", 1.0),
              "quant_weight_efficiency@int4": FORMAT_QUANT_EFFICIENCY.get("int4", 1.0),
              "step_overhead_s@sync": r.DEFAULT_STEP_OVERHEAD_S,
              "per_seq_overhead_s@sync": r.DEFAULT_PER_SEQ_OVERHEAD_S,
              "per_token_overhead_s": generation_term(hopper, "per_token_overhead_s", r.DEFAULT_PER_TOKEN_OVERHEAD_S),
              "per_token_overhead_s@blackwell": generation_term(blackwell, "per_token_overhead_s",
                                                                r.DEFAULT_PER_TOKEN_OVERHEAD_S),
              "layer_overhead_s@blackwell": generation_term(blackwell, "layer_overhead_s", 0.0),
              "layer_token_overhead_s": generation_term(hopper, "layer_token_overhead_s", 0.0),
              "layer_token_overhead_s@blackwell": generation_term(blackwell, "layer_token_overhead_s", 0.0),
              "allreduce_latency_s@blackwell": r.default_allreduce_latency_s(blackwell)}
    fused = generation_term(blackwell, "fused_allreduce_latency_s", None)
    if fused is not None:
        values["fused_allreduce_latency_s"] = fused
    for fmt, terms in EXPERT_FORMAT_TERMS.items():     # the expert kernel paths' embedded values
        values |= {f"{k}@experts_{fmt}": v for k, v in terms.items()}
    out = {n: values[n] for n in names if n in values}
    for fmt, terms in EXPERT_FORMAT_TERMS.items():     # ... which go with their unscoped term, else its prior
        out |= {f"{k}@experts_{fmt}": v for k, v in terms.items() if k in out}    # would override them
    return out


def parameter_table(fold: FoldResult) -> list[tuple[str, str, str, str]]:
    """(name, value in fit units, one standard error, identification) per parameter of a fold."""
    rows = []
    for name, status in fold.identification.items():
        p = PARAMETERS_BY_NAME[name]
        value = fold.params.get(name)
        if value is None:      # held: the embedded default it keeps (a scoped one falls back to the unscoped)
            value = default_start((name,)).get(name)
            v = f"{p.from_model(value):.4g} {p.unit} (prior)" if value is not None else "-"
        else:
            v = f"{p.from_model(value):.4g} {p.unit}"
        sd = fold.std.get(name)
        rows.append((name, v, f"{p.from_model(sd):.2g}" if sd is not None and math.isfinite(sd) else "-", status))
    return rows
