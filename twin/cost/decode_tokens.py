"""Which tokens pay the per-token-per-layer cost: ``layer_token_decode_share`` (issue 33, round 8; docs/fidelity.md
"Round 8: MiniMax-M2.5 (issue 33)").

``layer_token_overhead_s`` (``twin.cost.layer_tokens``; Blackwell 0.2 us per token per decoder layer) was read off
how the light-load TTFT grows with the PROMPT (the C = 4 prompt slopes of four families, round 4): it is evidence
about prompt tokens. The roofline charged it on every scheduled token, so a pure decode step of N sequences paid
N x layers x 0.2 us as well (MiniMax-M2.5, 62 layers: 3.2 ms of a 256-sequence B200 step, every step, at every
TP). ``layer_token_decode_share`` (dimensionless, in [0, 1]) is the share of that per-token cost a sequence's one
decoded token pays:

    layer-token cost of a step = layer_token_overhead_s x layers x (tokens - (1 - share) x sequences)

(every scheduled sequence has one token at the decode position: a decode's only token, or the last token of a
prompt chunk; the tokens beyond one per sequence are prompt tokens, which pay in full; a 1k-token prompt chunk pays
for 1k - 1 tokens at share 0). Folded into the roofline's per-sequence coefficient (``_k_seq``), so the step-time
hot path is unchanged; ``explain()``'s ``layer_token_overhead_s`` part shows what the step's tokens pay.

Prior 1 (every token pays: the round-4 form). Why a share (docs/fidelity.md, round 8): MiniMax-M2.5's light-load
1k prompt steps on B200 need ~0.5 of the decode weight-stream rate for their routed experts
(``twin.cost.prompt_experts``), which round 7 rejected because the same price over-charged every CONC >= 32 row;
fitted jointly with this share on the B200 v0.19 MiniMax FP8 rows the share goes to 0 (decode tokens do not pay
it) in every split tried (by TP, by ISL / OSL, by load band: ``benchmarks/minimax_prefill.py joint-test``).
Nothing is embedded: Blackwell-wide, share 0 makes the other families' B200 decode too fast at the embedded
defaults (TPOT -1.8 % -> -4.5 % signed), and on MiniMax's FP8 expert path alone (with the prompt stream at 0.5) the
family folds' Kimi-held-out refit of the eager MoE host floor falls from 1.08 to 0.43 ms (held-out Kimi TTFT
11.8 % -> 25.4 %). A fit may set it per scope (``layer_token_decode_share@blackwell+experts_fp8``).
"""

from __future__ import annotations

import math

from twin.cost.layer_tokens import layer_token_terms
from twin.errors import TwinInputError


def check_share(v: float) -> float:
    """``v`` as a float, if it is a number in [0, 1]; else a one-line error naming the field."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0.0 <= v <= 1.0:
        raise TwinInputError(f"layer_token_decode_share = {v!r}: must be a number in [0, 1]")
    return float(v)


def layer_token_split(terms: dict, model) -> tuple[float, float, float]:
    """From the resolved ``terms`` (``layer_token_overhead_s``, ``layer_token_decode_share``): the checked per-layer
    value, its cost per scheduled token of a step, and the part a sequence's decode-position token does not pay
    (seconds per sequence: ``(1 - share) x`` the per-token cost; 0.0 at the prior 1)."""
    v, k_tok = layer_token_terms(terms["layer_token_overhead_s"], model)
    return v, k_tok, (1.0 - check_share(terms["layer_token_decode_share"])) * k_tok


def explain_decode_share(parts: dict[str, float], k_off_s: float, n_seqs: int) -> None:
    """Move the decode positions' waived per-token cost (seconds per sequence) from ``parts["overhead_s"]`` to
    ``parts["layer_token_overhead_s"]`` (which ``explain_token_parts`` filled at the full per-token price)."""
    if k_off_s and "layer_token_overhead_s" in parts:
        parts["layer_token_overhead_s"] -= k_off_s * n_seqs
        parts["overhead_s"] += k_off_s * n_seqs
