"""Where gpt-oss-120b's active expert share came from, and what a fold that holds those rows out uses (issue 33,
round 12; docs/fidelity.md "Round 12: gpt-oss's loaded B200 rows (issue 33)"). Tried, NOT embedded (the H100-held-out
fold got worse: see ``twin.cost.default_terms.EXPERT_FORMAT_TERMS``); declared here so that an entry, if embedded,
is held out where it should be (``twin.fitting.provenance_evidence.DECLARED_EVIDENCE``: the B200 gpt-oss
rows).

``moe_active_expert_share@experts_mxfp4`` (0.75 as tried in ``twin.cost.default_terms.EXPERT_FORMAT_TERMS``; the term:
``twin.cost.moe_terms``, a layer's routing drawn from only that share of its experts) was read off the B200
gpt-oss-120b rows alone: the share at which the twin's pure-decode step of their 1k / 8k rows (28 rows, TP 1-8,
CONC 4-128; ``benchmarks/gptoss_decode_gap.py``) best matches the measured TPOT at CONC >= 32, on the grid 1, 0.9,
0.85, 0.8, 0.75, 0.7 (median |error| 10.7, 11.8, 10.9, 8.1, 6.6, 7.4 %). Those rows are its evidence: a fold holding
any of them out (the B200 GPU fold, the silicon source fold, the gpt-oss family fold) resets it to its stated prior
1 (uniform routing over every expert, ``twin.hardware.moe``). The H100 gpt-oss rows were not read: the H100 GPU
fold keeps the value and predicts them with it, the check that the share is the model's routing and not the B200
kernel's (the same model on H100 runs Marlin's MXFP4 MoE, another kernel)."""

from __future__ import annotations

TERM = "moe_active_expert_share@experts_mxfp4"
WHAT = "the B200 gpt-oss-120b rows (their 1k / 8k decode, benchmarks/gptoss_decode_gap.py)"

