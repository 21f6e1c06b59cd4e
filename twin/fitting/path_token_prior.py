"""The held-out prior of a Hopper MoE expert path's per-token prompt cost (``path_token_prior``; issue 33, round 10;
docs/fidelity.md "Round 10: MoE prompt time on Hopper held out").

What it is: ``layer_token_overhead_s`` (s per scheduled token per decoder layer, every TP rank:
``twin.cost.layer_tokens``) on one (generation, routed-expert format) path, ``layer_token_overhead_s@hopper+experts_
<fmt>``. A MoE layer routes every token (router GEMM, top-k), sorts and aligns the tokens by expert, gathers and
combines the top-k pairs over the full hidden size and quantises each token's activations for the experts' GEMM:
work that every TP rank repeats for all of the step's tokens (TP splits the experts' weights, not this). The
readings (``benchmarks/layer_token_reading.py``: the light-load 1k -> 8k TTFT growth the twin misses, split over
TP into a part TP divides and a part U it does not; docs/fidelity.md "Round 9: Blackwell's per-token prompt
cost") put U on every MoE path they separate at the same size, in us per token per (MoE) decoder layer, on both
generations: H100 gpt-oss-120b MXFP4 Marlin (TP 2 / 4 / 8) 0.195, B200 Kimi-K2.5 NVFP4 (TP 4 / 8) 0.241, B200
MiniMax-M2.5 NVFP4 (TP 1 / 2) 0.146. Only TP-split readings count (a reading at one TP is U plus a GEMM share:
an upper bound). Dense rows do not carry it on Hopper (H100 Llama-3.1-70B U = 0.016 us).

Why a fold needs it: on Hopper the per-token term a fold fits (the unscoped ``layer_token_overhead_s``) is read off
dense rows (~0), and the only MoE path with its own value (gpt-oss's MXFP4, 0.15 us) is held out with its family or
GPU. So where a fold holds out a Hopper expert path's embedded evidence (its efficiency reset to the pooled / carried
prior, or its per-token entry replaced by the unscoped term) the path is simulated with no MoE per-token cost at all,
while the efficiency it takes was read BESIDE one (Hopper MXFP4's 0.35 beside 0.15 us; Kimi INT4's 0.175 beside
Blackwell's 0.2 us). Such a path takes the geometric mean of the readings above whose rows the fold keeps.
Blackwell's paths are not given one: there the fold fits ``layer_token_overhead_s@blackwell`` on its MoE and dense
rows alike (the B200-held-out fold: ``twin.fitting.moe_token_prior``).

The efficiency beside it: a held-out path's ``moe_expert_compute_efficiency`` is reset to the other paths' values
(``twin.fitting.expert_path_prior``), and today those are Marlin W4A16 paths only (``mma.sync`` with the weights
dequantised in registers: gpt-oss MXFP4 0.35, Kimi INT4 0.175). A Hopper path that is not a Marlin one (block FP8:
DeepGEMM or Triton ``fused_moe``, both on Hopper's ``wgmma`` FP8 tensor cores like the dense GEMMs) takes the dense
rate instead (the flat prior 1), beside U: round 8 already keeps such paths out of the Marlin prior for this reason.
Checked against the one reading of such a path, not fitted to it: MiniMax-M2.5's H100 FP8 path embeds efficiency
0.18 and no per-token term (fitted on its 8k - 1k TTFT growth); an 8k-token prompt step at TP4 EP4 costs 215.3 ms
there, and 214.1 ms at the dense rate plus U = 0.217 us (the Kimi / gpt-oss readings), against 287.1 ms with the
pooled Marlin efficiency (0.245) plus U; a 1k step 31.1 / 43.4 / 43.4 ms (the rows' 1k TTFT is ~26 ms above the
twin's at the embedded values, at both lengths).

A stated prior (the readings' rows are training rows of every fold that uses them), not a fit: no fold's training
rows are simulated differently (no Hopper MoE path trains where its evidence is held out)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from twin.cost.moe_terms import DEFAULT_MOE_EXPERT_COMPUTE_EFFICIENCY
from twin.fitting.expert_path_prior import MARLIN_PATHS, geometric_mean
from twin.fitting.moe_token_prior import prompt_token_entries
from twin.fitting.provenance import RESET, silicon_rows_of
from twin.fitting.scoped import EXPERT_PREFIX, split
from twin.fitting.switches import register

# on in every fold (round 10); False: the folds as in round 9 (docs/fidelity.md: the held-out figures move both ways);
# set it with twin.fitting.switches (registered there: it carries it to worker processes)
ENABLED = True
register("path_token_prior", sys.modules[__name__])
EFFICIENCY = "moe_expert_compute_efficiency"
GENERATIONS = ("hopper",)      # generations whose fitted per-token term carries no MoE reading (see above)
# (what, us per token per MoE decoder layer, the rows it was read off): benchmarks/layer_token_reading.py, main
# 36f3017's embedded defaults with the per-token term at 0, the TP-split U of docs/fidelity.md "Round 9:
# Blackwell's per-token prompt cost"
MOE_TOKEN_READINGS: tuple[tuple[str, float, Callable], ...] = (
    ("H100 gpt-oss-120b MXFP4 Marlin, TP 2 / 4 / 8", 0.195e-6, silicon_rows_of("h100_sxm", "gpt-oss")),
    ("B200 Kimi-K2.5 NVFP4, TP 4 / 8", 0.241e-6, silicon_rows_of("b200_sxm", "kimi")),
    ("B200 MiniMax-M2.5 NVFP4, TP 1 / 2", 0.146e-6, silicon_rows_of("b200_sxm", "minimax")),
)


def kept_readings(held_rows: Sequence[tuple]) -> list[float]:
    """The readings (s per token per layer) none of whose rows is among ``held_rows`` ((case, deployment) pairs)."""
    return [v for _, v, rows in MOE_TOKEN_READINGS if not any(rows(c, d) for c, d in held_rows)]


def held_paths(actions: dict) -> set[tuple[str, str]]:
    """(generation, expert format) of every ``GENERATIONS`` expert path with an embedded entry the fold does not
    keep (``actions``: ``provenance.FoldPlan.actions``, reset or refit as its unscoped term)."""
    out = set()
    for parameter in actions:
        scope = split(parameter)[1] or ""
        gen, _, path = scope.partition("+")
        if gen in GENERATIONS and path.startswith(EXPERT_PREFIX):
            out.add((gen, path[len(EXPERT_PREFIX):]))
    return out


def path_token_prior(plan, group: str, group_of: Callable, evidence: Sequence[tuple]) -> dict[str, float]:
    """``layer_token_overhead_s@<gen>+experts_<fmt>`` (decode share 0) for every held-out Hopper expert path of ``plan``
    (``provenance.FoldPlan``) of the fold holding out ``group`` (``evidence``: (case, deployment) of every
    ground-truth row): the geometric mean of the readings whose rows it keeps; {} where no path is held or no
    reading is kept."""
    paths = held_paths(plan.actions) if ENABLED else set()
    values = kept_readings([(c, d) for c, d in evidence if group_of(c) == group]) if paths else []
    if not values:
        return {}
    v = geometric_mean(values)
    out: dict[str, float] = {}
    for gen, fmt in sorted(paths):     # prompt tokens only, as the carried Blackwell prior: readings of TTFT growth
        out |= prompt_token_entries(gen, fmt, v)
    for gen, fmt in sorted(paths):      # a wgmma path whose efficiency is reset: the dense rate beside U
        key = f"{EFFICIENCY}@{gen}+{EXPERT_PREFIX}{fmt}"
        if key not in MARLIN_PATHS and plan.actions.get(key, (None, None))[1] == RESET:
            out[key] = DEFAULT_MOE_EXPERT_COMPUTE_EFFICIENCY
    return out
