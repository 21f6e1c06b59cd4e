"""A held-out fused all-reduce priced from the fixed decode time per decoder layer that the kept Blackwell TP sets
read (issue 33, round 11; docs/fidelity.md "Round 11: gpt-oss on B200 held out").

Where a fold resets a path's fused all-reduce + RMSNorm (``fused_allreduce_latency_s@<gen>+experts_<fmt>``; in the
data only gpt-oss-120b's MXFP4 paths have one), round 10 priced it at the fold's unfused latency less one kernel
(``twin.fitting.fused_allreduce_prior``: 22.6 -> 18.8 us in the gpt-oss fold), against 11 us that gpt-oss's own B200
rows read. Why that misses (``benchmarks/gptoss_b200_rows.py``): on Blackwell the fixed time of a decode step
scales with the decoder layers, not with the step. Per set of rows that differ in TP only (same model, format,
release, date; CONC <= 8), TPOT = K + w / TP + A [TP > 1] by least squares (``benchmarks/tp1_decode.py``), and at
ISL / OSL 1k / 1k, CONC 4 the fixed time K per decoder layer is 69.7 us (Llama-3.1-70B FP8, 80 layers, vLLM
0.10.2), 62.0 us (Llama NVFP4), 60.2 us (MiniMax-M2.5 NVFP4, 62 layers, 0.19.0) and 66.9 us (gpt-oss-120b, 36
layers, 0.15.1; not used here, the check): a layer's kernel chain at its launch-bound minimum costs about the same
in every family, whatever its width. The twin's fit puts most of that fixed time in one constant per step
(``step_overhead_s``, 2.07 ms in the gpt-oss fold) read off models of 60-80 layers, plus two all-reduce latencies
per layer; a 36-layer model then gets a per-step constant that already holds ~57 us per layer, and 2 x 18.8 us
per layer on top.

The prior: the held-out path's fused latency L is the one at which the twin's light-load decode step of the
held-out model pays per decoder layer what the kept sets read, in the twin's own structure (TP 1 pays
``2 x layers x (L - link)``, ``twin.cost.unsharded_decode``; TP > 1 ``2 x layers x L``):

    step + C x per_seq + C x layers x v_tok x share + 2 x layers x (L - link) = layers x k
    L = link + max(layers x k - F, 0) / (2 x layers)                              (F: the left side's first terms)

with k the median over the kept Blackwell TP sets of K / layers at the reference group (``REFERENCE_GROUP``: 1k /
1k at CONC 4, the one every Blackwell TP set in the data has), C = 4, the fold's fitted serving terms, and
``link`` the generation's link part of an all-reduce (``GENERATION_TERMS``, 6 us on Blackwell). No TP set kept on
the path's generation (a fold holding out all B200 rows, or the silicon rows), no link part (Hopper: read as
below; since round 16 a fold that resets Blackwell's takes a stated one, ``fold_link_s``,
``twin.fitting.link_prior``), or not one held-out model on the path: round 10's one-kernel rule stands. Measured
TPOT only: no simulation, and the rows that ``unexplained_decode_gap`` keeps out of the fit (the Llama B200 TP 1
0.10.2 rows) are read here, since the reading does not go through the cost model. In the gpt-oss fold (round 11,
before the fold reset the link part that gpt-oss's own B200 rows gave evidence to): k = 62.0 us, F = 2.14 ms,
L = 7.2 us; since, the kernel rule.

Round 16 (docs/fidelity.md "Round 16: gpt-oss held out by family"): a generation whose all-reduce has no link part
(Hopper: no unsharded floor, TP 1 pays no all-reduce) is read the same way from its sets' TP > 1 rows (no Hopper
set has a TP 1 row): over TP 2 / 4 / 8 (``MIN_SHARDED_TP_SIZES``) TPOT = (K + A) + w / TP, and K + A per
decoder layer is the fixed time of a TP > 1 decode step, which the twin prices as step + C x per-sequence + 2 x
layers x L: the same formula with link 0.
In the data the one such kept set is H100 Llama-3.1-70B FP8 (vLLM 0.10.2, 78.7 us per layer), so Hopper's MXFP4
path (gpt-oss's H100 rows) takes L = (36 x 78.7 us - F) / 72 = 8.6 us in the gpt-oss fold (F = 2.22 ms), against
19.5 us by the one-kernel rule. The check, not used: gpt-oss's own H100 set reads 87.6 us per layer, which at the
embedded serving terms gives 18.3 us against the path's embedded 18 us; against it the prior errs fast (the MoE
layer's chain is longer than a dense one's), as Blackwell's does (62.0 vs gpt-oss's 66.9 us).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np

from twin.cost.default_terms import GENERATION_TERMS, NO_FLOOR_LINK_S
from twin.cost.generations import gpu_generation
from twin.cost.unsharded_decode import ALLREDUCE_POINTS_PER_LAYER, LINK_KEY
from twin.fitting.fused_allreduce_prior import is_fused_term
from twin.fitting.link_prior import EXCHANGE_PRIOR_S, TERM as LINK_TERM, rows as link_evidence
from twin.fitting.provenance import RESET
from twin.hardware.weight_formats import format_family

REFERENCE_GROUP = (1024, 1024, 4)     # (ISL, OSL, CONC): the light-load group every Blackwell TP set has
MAX_LIGHT_CONC = 8                    # the TP sets' rows (benchmarks/tp1_decode.py)
MIN_SHARDED_TP_SIZES = 3              # round 16: a set without a TP 1 row (Hopper's): K + A, w and one residual


def tp_split(points: Sequence[tuple[int, tuple, float]], with_allreduce: bool = True
             ) -> tuple[dict[tuple, tuple[float, float]], float | None, float]:
    """({group: (K, w)}, A or None, rms) of ``points`` (TP, group, TPOT in any unit) by least squares on TPOT = K_g +
    w_g / TP + A [TP > 1] (without A: K_g + w_g / TP), one K_g and w_g per group (see the module docstring)."""
    groups = sorted({g for _, g, _ in points})
    x = np.zeros((len(points), 2 * len(groups) + (1 if with_allreduce else 0)))
    for i, (tp, g, _) in enumerate(points):
        j = groups.index(g)
        x[i, j], x[i, len(groups) + j] = 1.0, 1.0 / tp
        if with_allreduce:
            x[i, -1] = 1.0 if tp > 1 else 0.0
    y = np.array([t for _, _, t in points])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    rms = float(np.sqrt(np.mean((x @ beta - y) ** 2)))
    per_group = {g: (float(beta[j]), float(beta[len(groups) + j])) for j, g in enumerate(groups)}
    return per_group, (float(beta[-1]) if with_allreduce else None), rms


def _light(row) -> bool:
    return (row.mode == "agg" and row.concurrency <= MAX_LIGHT_CONC and row.moe_ep <= 1 and row.attention_dp <= 1
            and row.pp <= 1)


def tp_sets(evidence: Sequence[tuple], generation: str, need_tp1: bool = True) -> list[tuple[list, object]]:
    """(points, model spec) for each set of light-load silicon rows in ``evidence`` ((case, deployment) pairs)
    on ``generation`` that differ in TP only and have three TP sizes in ``REFERENCE_GROUP``, one of them TP 1 where
    ``need_tp1`` (K, w and A identified in that group itself; without it, ``sharded_sets`` reads the TP > 1 rows);
    points as ``tp_split`` takes them, TPOT in seconds."""
    sets: dict[tuple, list] = {}
    models: dict[tuple, object] = {}
    for case, dep in evidence:
        row = getattr(case, "row", None)
        if row is None or not _light(row) or gpu_generation(dep.gpu) != generation:
            continue
        key = (row.model_path, row.system, row.precision, row.vllm_version, row.measured)
        sets.setdefault(key, []).append((row.tp, (row.isl, row.osl, row.concurrency), row.tpot_ms * 1e-3))
        models[key] = dep.model
    out = []
    for key, points in sorted(sets.items(), key=lambda kv: str(kv[0])):
        tps = {tp for tp, g, _ in points if g == REFERENCE_GROUP}
        if (1 in tps or not need_tp1) and len(tps) >= 3:
            out.append((points, models[key]))
    return out


def kept_layer_fixed_s(evidence: Sequence[tuple], generation: str) -> list[float]:
    """Seconds per decoder layer: K at ``REFERENCE_GROUP`` over the layers, for each of ``tp_sets``."""
    return [tp_split(points)[0][REFERENCE_GROUP][0] / model.num_hidden_layers
            for points, model in tp_sets(evidence, generation)]


def has_link_part(generation: str) -> bool:
    """Whether the twin splits ``generation``'s all-reduce into a link part and the rest (Blackwell's
    ``unsharded_allreduce_link_s``; its TP 1 steps then pay an unsharded floor, ``twin.cost.unsharded_decode``)."""
    return LINK_KEY in GENERATION_TERMS.get(generation, {})


def sharded_sets(evidence: Sequence[tuple], generation: str) -> list[tuple[list, object]]:
    """(points, model spec) as ``tp_sets``, TP > 1 rows only, for the sets of ``generation`` with at least
    ``MIN_SHARDED_TP_SIZES`` TP sizes above 1 in ``REFERENCE_GROUP`` (round 16: K + A and w identified there, with
    one residual; a TP 1 row, which pays no all-reduce, is not read)."""
    out = []
    for points, model in tp_sets(evidence, generation, need_tp1=False):
        if len({tp for tp, g, _ in points if g == REFERENCE_GROUP and tp > 1}) >= MIN_SHARDED_TP_SIZES:
            out.append(([p for p in points if p[0] > 1], model))
    return out


def kept_sharded_fixed_s(evidence: Sequence[tuple], generation: str) -> list[float]:
    """Seconds per decoder layer: the fixed decode time at TP > 1, K + A (TPOT = K + A + w / TP over TP 2 / 4 / 8,
    ``tp_split`` without its TP 1 term) at ``REFERENCE_GROUP`` over the layers, for each of ``sharded_sets``."""
    return [tp_split(points, with_allreduce=False)[0][REFERENCE_GROUP][0] / model.num_hidden_layers
            for points, model in sharded_sets(evidence, generation)]


def matched_fused_latency_s(layer_fixed_s: float, layers: int, step_fixed_s: float, link_s: float) -> float:
    """Seconds per fused all-reduce at which a step of ``layers`` decoder layers with ``step_fixed_s`` of other
    fixed time pays ``layer_fixed_s`` per layer: link + max(layers x k - F, 0) / (2 x layers)."""
    return link_s + max(layers * layer_fixed_s - step_fixed_s, 0.0) / (ALLREDUCE_POINTS_PER_LAYER * layers)


def _term(params: dict[str, float], name: str, scope: str, default: float) -> float:
    gen = scope.split("+", 1)[0]
    for key in (f"{name}@{scope}", f"{name}@{gen}", name):
        if key in params:
            return params[key]
    return default


def light_step_fixed_s(params: dict[str, float], scope: str, layers: int, conc: int) -> float:
    """F: a decode step's fixed time at ``conc`` sequences besides its all-reduces, at the fold's ``params``: the
    step overhead, the per-sequence time, and the per-token-per-layer time its decode tokens pay."""
    per_token = _term(params, "layer_token_overhead_s", scope, 0.0) * _term(params, "layer_token_decode_share",
                                                                              scope, 1.0)
    return params["step_overhead_s"] + conc * (params["per_seq_overhead_s"] + layers * per_token)


def _on_path(dep, scope: str) -> bool:
    gen, _, fmt = scope.partition("+experts_")
    formats = dep.weight_formats
    return (gpu_generation(dep.gpu) == gen and getattr(dep.model, "is_moe", False) and formats is not None
            and format_family(formats.routed_experts) == fmt)


def link_reset(plan, generation: str) -> bool:
    """Whether ``plan`` resets ``generation``'s link part (``twin.fitting.link_prior``: a fold holding out the rows
    it was read off)."""
    entry = plan.actions.get(f"{LINK_KEY}@{generation}")
    return entry is not None and entry[1] == RESET


def fold_link_s(plan, generation: str) -> float | None:
    """The link part ``plan``'s fold prices ``generation``'s all-reduces with: where it resets it, its value in the
    plan (re-read off the TP sets the fold keeps, ``kept_link_prior``, else NCCL's smallest exchange, round 16);
    else the embedded one. None where there is none (no floor: then the one-kernel rule prices a reset fused entry)."""
    key = f"{LINK_KEY}@{generation}"
    value = plan.fixed.get(key) if link_reset(plan, generation) else GENERATION_TERMS.get(generation, {}).get(LINK_KEY)
    return None if value is None or value >= NO_FLOOR_LINK_S else value


def kept_readings(plan, kept: Sequence[tuple], held: Sequence[tuple]) -> dict[str, tuple[float, int, int, float]]:
    """{fused key: (k, sets read, held-out model's decoder layers, link)} for each fused entry ``plan`` resets with
    one held-out model on the path among ``held`` and at least one TP set among ``kept`` ((case, deployment) of the
    rows the fold keeps): with TP 1 rows where the generation has a link part and the fold prices one, else (round
    16, Hopper) TP > 1 rows at link 0; what ``layer_matched_priors`` prices it from (known before
    the fit; ``benchmarks/unseen_generation.py plans`` prints it)."""
    out = {}
    for p, (_, action) in plan.actions.items():
        if action != RESET or not is_fused_term(p) or "@" not in p:
            continue
        scope = p.split("@", 1)[1]
        gen = scope.split("+", 1)[0]
        link_s = fold_link_s(plan, gen)
        models = {dep.model.num_hidden_layers for _, dep in held if _on_path(dep, scope)}
        if len(models) != 1:
            continue
        if not has_link_part(gen):        # round 16: Hopper, the TP > 1 sets' K + A, no link part
            ks, link_s = kept_sharded_fixed_s(kept, gen), 0.0
        else:
            ks = kept_layer_fixed_s(kept, gen) if link_s is not None else []
        if ks:
            out[p] = (statistics.median(ks), len(ks), models.pop(), link_s)
    return out


def layer_matched_priors(plan, params: dict[str, float], kept: Sequence[tuple],
                         held: Sequence[tuple]) -> dict[str, float]:
    """{fused key: prior} for each entry of ``kept_readings``, at the fold's fitted serving terms ``params``; the
    other reset fused entries are left to the one-kernel rule (``fused_allreduce_prior``)."""
    if "step_overhead_s" not in params:
        return {}
    return {p: matched_fused_latency_s(k, layers, light_step_fixed_s(params, p.split("@", 1)[1], layers,
                                                                      REFERENCE_GROUP[2]), link_s)
            for p, (k, _, layers, link_s) in kept_readings(plan, kept, held).items()}


def allreduces_per_step(model) -> int:
    """A decode step's all-reduces at TP > 1: two per decoder layer, three where the q / k norms span all heads
    (``ModelSpec.qk_norm_allreduce``, MiniMax-M2; ``benchmarks/tp1_decode.py`` counts them alike)."""
    return model.num_hidden_layers * (ALLREDUCE_POINTS_PER_LAYER + (1 if model.qk_norm_allreduce else 0))


def kept_link_prior(plan, kept) -> dict[str, float]:
    """{``link_prior.TERM``: the median link part per all-reduce of its evidence TP sets among ``kept`` ((case,
    deployment) of the rows the fold keeps; ``twin.fitting.link_prior``)} where ``plan`` resets it and keeps such a
    set; where it resets it and keeps none, the exchange-only prior (``link_prior.EXCHANGE_PRIOR_S``, issue 33
    round 16); {} where it keeps the entry (the embedded value stands)."""
    if not link_reset(plan, "blackwell"):
        return {}
    readings = [tp_split(points)[1] / allreduces_per_step(model)
                for points, model in tp_sets([e for e in kept if link_evidence(*e)], "blackwell")]
    return {LINK_TERM: statistics.median(readings) if readings else EXCHANGE_PRIOR_S}
