"""The held-out prior of a GPU generation's fixed time per MoE layer on an expert path (``moe_layer_overhead_s``;
issue 33, round 17; docs/fidelity.md "Round 17: MoE TTFT with B200 held out: what carries from Hopper").

What the term is (``twin.cost.kernel_path``): seconds per MoE decoder layer per step that the roofline's bytes and
FLOPs do not price, on one (generation, routed-expert format) path: the expert path's small kernels (routing, top-k,
token alignment, per-token-group activation quantisation, the combine), each at its minimum duration. Embedded on
one path that is not Marlin: Hopper's block-FP8 experts (MiniMax-M2.5, 16 us, read off the H100 rows' decode).

Where a fold has no row of a generation (the B200-held-out GPU fold: ``layer_token_overhead_s@<gen>`` cannot be
fitted, the same test as ``twin.fitting.moe_token_prior``), that generation's paths had no such time at all (the
flat 0) although the kept generation's path of the SAME format reads one. The transfer rule, from the datasheets: a
fixed time per layer made of launch-bound small kernels is not shortened by a faster tensor core or HBM (the
per-kernel floor is the launch and synchronisation latency, the same order on both generations; round 13: the
host-side and all-reduce latencies read alike on B200 and H100 alone), so the kept value carries UNSCALED. A term
that is tensor work would scale by the tensor-rate ratio instead (``twin.fitting.expert_request_prior``); the
per-token prompt cost tried that way is refuted (the docs section: B200-fold MoE TTFT 12.1 % -> 27.8 %).

Checked, not fitted: on B200 the same block-FP8 path's layer chain reads ~19 us per layer beyond the NVFP4 one
(round 16, ``twin.cost.block_fp8_chain``), beside Hopper's 16 us. Held out (the B200 fold, 39 cases): TPOT 6.7 %
(-4.1 %) -> 5.1 % (-0.6 %), E2E 5.6 -> 4.3 %, TTFT signed -12.1 -> -9.5 %. At the embedded defaults the B200 FP8
rows would overshoot with it (TPOT -2.3 -> +4.7 % signed): there Blackwell's per-token cost is paid by decode tokens
too (share 1), which the fold's carried MoE per-token prior is not (share 0): not an embedded default. A path with
no kept reading of its format on another generation (Blackwell NVFP4, MXFP4 on TRT-LLM-gen, Marlin INT4) gets
nothing: no same-format evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from twin.fitting.expert_path_prior import geometric_mean
from twin.fitting.moe_token_prior import TERM as GATE, expert_path_values, for_generations_without_rows
from twin.fitting.scoped import EXPERT_PREFIX

TERM = "moe_layer_overhead_s"


def kept_layer_readings(entries: Sequence, actions: Iterable[str]) -> dict[tuple[str, str], float]:
    """(generation, expert format) -> the embedded ``moe_layer_overhead_s@<gen>+experts_<fmt>`` values whose
    evidence the fold keeps (not among the plan's ``actions``: reset or refit)."""
    return {(gen, fmt): v for gen, fmt, v in expert_path_values(TERM, entries, actions) if "+" not in fmt}


def moe_layer_transfer(generation: str, unfitted: Iterable[str], entries: Sequence,
                       actions: Iterable[str]) -> dict[str, float]:
    """``moe_layer_overhead_s@<generation>+experts_<fmt>`` for every format another generation keeps a reading of,
    at that reading unscaled (the geometric mean where several do), when ``layer_token_overhead_s@<generation>`` is
    among ``unfitted`` (the fold has no row of the generation); {} otherwise. An embedded entry of the generation's
    own is not replaced."""
    if f"{GATE}@{generation}" not in set(unfitted):
        return {}
    kept = kept_layer_readings(entries, actions)
    own = {fmt for (g, fmt) in kept if g == generation}
    by_fmt: dict[str, list[float]] = {}
    for (g, fmt), v in kept.items():
        if g != generation and fmt not in own:
            by_fmt.setdefault(fmt, []).append(v)
    return {f"{TERM}@{generation}+{EXPERT_PREFIX}{fmt}": geometric_mean(values)
            for fmt, values in sorted(by_fmt.items())}


def fold_moe_layer_transfer(names: Sequence[str], held_names: Iterable[str], plan) -> dict[str, float]:
    """``moe_layer_transfer`` for every generation a fold has no row of (``layer_token_overhead_s@<gen>`` unfitted,
    ``moe_token_prior.for_generations_without_rows``)."""
    return for_generations_without_rows(names, held_names, plan, moe_layer_transfer)
