"""The held-out prior of a GPU generation's per-token-per-layer cost on MoE deployments (``moe_token_prior``):
the OTHER generations' MoE expert-path readings of ``layer_token_overhead_s`` (issue 33, round 9; docs/fidelity.md
"Round 9: Blackwell's per-token prompt cost").

What the rows say (``benchmarks/layer_token_reading.py``: the per-prompt-token time the light-load 1k -> 8k TTFT
growth needs beyond the twin's, split over TP into a part TP divides, the GEMMs, and a part every TP rank repeats,
U): on MoE models the part TP does not divide is there on BOTH generations, in the same unit and of the same size,
us per token per (MoE) decoder layer: H100 gpt-oss-120b (MXFP4 Marlin experts, TP 2-8) U = 0.195 us (embedded for
that path: 0.15 us, ``twin.cost.marlin_mxfp4``), B200 Kimi-K2.5 NVFP4 (TP 4-8) 0.24 us, MiniMax-M2.5 NVFP4 (TP 1-2)
0.15 us, and at one TP (an upper bound: U plus the GEMM share) B200 gpt-oss 0.18, MiniMax FP8 0.25-0.30 us. A MoE
layer's routing, top-k, token permutation / combine and the activation quantisation of every token's hidden state
run on every TP rank for all tokens (the experts' GEMMs are what TP splits). On DENSE models it is Blackwell's
alone (B200 Llama-3.1-70B 0.15-0.21 us, H100 Llama-3.1-70B 0.016 us): no prior is carried there.

So a fold that has no row of generation g (its ``layer_token_overhead_s@g`` cannot be fitted: the B200-held-out
GPU fold) sets ``layer_token_overhead_s@g+experts_<fmt>`` for every expert format to the geometric mean of the
other generations' expert-path entries of the term whose evidence the fold keeps (today: Hopper's MXFP4 path,
0.15 us, evidence the H100 gpt-oss rows); none kept (the silicon-held-out source fold): nothing is set and the
term falls back as before (the fold's unscoped value)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from twin.cost.generations import GENERATION_OF_NAME
from twin.fitting.expert_path_prior import geometric_mean
from twin.fitting.provenance import RESET, embedded_entries
from twin.fitting.scoped import EXPERT_FORMATS, EXPERT_PREFIX, split

TERM = "layer_token_overhead_s"
SHARE = "layer_token_decode_share"     # twin.cost.decode_tokens: the share a decode-position token pays
# round 10: the carried reading is charged to prompt tokens only. It was read off how TTFT grows with the PROMPT
# (U above: evidence about prompt tokens); where a decode share was read at all it is ~0 (round 8: the B200
# MiniMax FP8 rows, fitted jointly with their prompt stream), and the reading's own rows decode better without it
# (the H100 gpt-oss rows at the embedded defaults, Hopper's MXFP4 path at share 0 instead of 1: TPOT 3.9 % (+2.7 %)
# -> 3.1 % (+0.5 %) over 69 rows, C >= 32 +6.0 % -> +3.6 %; benchmarks/gptoss_b200_levers.py --report embedded
# --gpu h100). Embedded entries keep the flat prior 1 (not refitted here).
PRIOR_DECODE_SHARE = 0.0


def expert_path_values(term: str, entries: Sequence, held: Iterable[str]) -> list[tuple[str, str, float]]:
    """(generation, expert path after ``experts_``, value) of each positive ``<term>@<gen>+experts_<path>`` among
    ``entries`` (provenance ``Entry``) that is not in ``held`` (the fold holds its evidence out, or refits it)."""
    held = set(held)
    out = []
    for e in entries:
        base, scope = split(e.parameter)
        if base != term or not scope or "+" not in scope or e.parameter in held:
            continue
        gen, path = scope.split("+", 1)
        if path.startswith(EXPERT_PREFIX) and e.value > 0:
            out.append((gen, path[len(EXPERT_PREFIX):], e.value))
    return out


def moe_token_readings(generation: str, entries: Sequence, held: Iterable[str]) -> list[float]:
    """The other generations' expert-path values of ``layer_token_overhead_s`` (``entries``: provenance
    ``Entry``; keys ``layer_token_overhead_s@<gen>+experts_<fmt>`` with another ``<gen>``), those in ``held`` (the
    fold holds their evidence out) left out."""
    return [v for gen, _, v in expert_path_values(TERM, entries, held) if gen != generation]


def moe_token_prior(generation: str, unfitted: Iterable[str], entries: Sequence, held: Iterable[str]) -> dict[str, float]:
    """The values a fold sets for ``layer_token_overhead_s@<generation>+experts_<fmt>`` (every expert format; with
    ``layer_token_decode_share`` there at ``PRIOR_DECODE_SHARE``: prompt tokens pay it, decode tokens not) when
    ``layer_token_overhead_s@<generation>`` is among ``unfitted`` (the fold's training rows have no row of the
    generation, or its evidence is held out and it is not refit): the other generations' MoE readings pooled
    (``moe_token_readings``); {} when the term is fitted here or no reading is kept."""
    if f"{TERM}@{generation}" not in set(unfitted):
        return {}
    values = moe_token_readings(generation, entries, held)
    if not values:
        return {}
    v = geometric_mean(values)
    out: dict[str, float] = {}
    for fmt in EXPERT_FORMATS:
        out |= prompt_token_entries(generation, fmt, v)
    return out


def prompt_token_entries(generation: str, fmt: str, value_s: float) -> dict[str, float]:
    """``layer_token_overhead_s`` of the ``<generation>+experts_<fmt>`` path at ``value_s``, charged to prompt tokens
    only (its ``layer_token_decode_share`` at ``PRIOR_DECODE_SHARE``): a held-out prior read off TTFT growth."""
    path = f"{generation}+{EXPERT_PREFIX}{fmt}"
    return {f"{TERM}@{path}": value_s, f"{SHARE}@{path}": PRIOR_DECODE_SHARE}


def for_generations_without_rows(names: Sequence[str], held_names: Iterable[str], plan, rule) -> dict[str, float]:
    """``rule(generation, unfitted, entries, actions)`` merged over every generation-scoped
    ``layer_token_overhead_s@<gen>`` among a fold's ``names`` (the fold has no row of that generation where it is
    unfitted: the training rows cannot identify it, ``held_names``, or the fold's ``plan`` (``provenance.FoldPlan``)
    resets it); ``entries``: the embedded table, ``actions``: the plan's (whose evidence the plan holds out)."""
    generations = {g for g, _ in GENERATION_OF_NAME}
    unfitted = set(held_names) | {p for p, (_, a) in plan.actions.items() if a == RESET}
    out: dict[str, float] = {}
    for n in names:
        base, scope = split(n)
        if base == TERM and scope in generations:
            out |= rule(scope, unfitted, embedded_entries(), plan.actions)
    return out


def fold_moe_token_prior(names: Sequence[str], held_names: Iterable[str], plan) -> dict[str, float]:
    """``moe_token_prior`` for every generation a fold has no row of (``for_generations_without_rows``); the
    readings whose evidence the plan holds out are left out."""
    return for_generations_without_rows(names, held_names, plan, moe_token_prior)
