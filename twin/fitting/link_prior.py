"""Where the Blackwell link part of an all-reduce came from, and what a fold that holds those rows out uses (issue
33, round 11; docs/fidelity.md "Round 11: the Blackwell link part held out (issue 33)").

``unsharded_allreduce_link_s@blackwell`` (6 us, ``twin.cost.default_terms.GENERATION_TERMS``; the term:
``twin.cost.unsharded_decode``: a TP 1 step pays 2 x layers x max(L - link, 0)) is the increment per all-reduce
that the gpt-oss-120b MXFP4 and MiniMax-M2.5 NVFP4 B200 TP sets show over their TP 1 rows (5.5 / 7.0 us,
``benchmarks/tp1_decode.py``; the Llama B200 sets were not used: they test it). Those rows are its evidence
(``ROWS``): a fold holding any of them out (the B200 GPU fold, the silicon source fold, the gpt-oss and MiniMax
family folds) resets it to its stated prior, ``default_terms.NO_FLOOR_LINK_S``: no floor, the whole all-reduce
latency is link and a TP 1 step pays nothing extra (Hopper's behaviour, and the twin's before round 10). No
physical fact gives a better one: the exchange-only latency of a collective (NCCL's LL figures, 7.8-15 us at TP
2-8) is a TP > 1 quantity, and which kernels a TP 1 step still runs is what the TP sets read, not a datasheet.

Round 16: a fold that keeps NONE of them (the B200 GPU fold, the silicon source fold) takes NCCL's latency of the
smallest exchange instead of no floor (``EXCHANGE_PRIOR_S``, below; docs/fidelity.md "Round 16: the B200 TP 1
decode held out"): the no-floor prior cost their Llama B200 TP 1 rows ~12 points of TPOT held out.

A fold that keeps some of those TP sets (the gpt-oss and MiniMax family folds keep the other family's) reads it
again off them (``layer_fixed_prior.kept_link_prior``: the all-reduce part A of each kept set's TP split over its
all-reduces per step; their median): 7.0 us in the gpt-oss fold (MiniMax NVFP4), 5.5 us in the MiniMax fold
(gpt-oss), where the embedded 6 us is the reading of both. A fold left without a link part prices a reset fused
all-reduce by round 10's one-kernel rule (``twin.fitting.layer_fixed_prior.kept_readings``), since its
layer-matched rule adds the link part."""

from __future__ import annotations

from twin.cost.unsharded_decode import EXCHANGE_PRIOR_LINK_S, LINK_KEY

# issue 33 round 16 (docs/fidelity.md "Round 16: the B200 TP 1 decode held out"): what a fold takes where it resets
# the term and keeps none of its evidence TP sets (the B200 GPU fold, the silicon source fold), in place of no floor:
# NCCL's latency model of the smallest exchange (LL, 2 NVLink GPUs: 6.6 + 2 x 0.6 = 7.8 us), the stated prior
# twin.cost.qk_norm_allreduce already gives the same quantity there; read off no row
EXCHANGE_PRIOR_S = EXCHANGE_PRIOR_LINK_S
TERM = f"{LINK_KEY}@blackwell"
WHAT = "the B200 gpt-oss-120b and MiniMax-M2.5 NVFP4 rows (their TP sets' increment per all-reduce)"


def rows(case, _deployment) -> bool:
    """Whether ``case`` is a B200 gpt-oss-120b row or a B200 MiniMax-M2.5 NVFP4 (``fp4``) row."""
    from twin.fitting.silicon import model_family
    row = getattr(case, "row", None)
    if row is None or row.system != "b200_sxm":
        return False
    family = model_family(row.model_path)
    return family == "gpt-oss" or (family == "minimax" and row.precision == "fp4")


EVIDENCE = {TERM: (WHAT, rows)}        # twin.fitting.provenance_evidence.DECLARED_EVIDENCE

