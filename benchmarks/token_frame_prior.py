"""A held-out Hopper MoE path's per-token prompt cost carried in the fold's own Blackwell frame (issue 33, round 18;
docs/fidelity.md "Round 18: gpt-oss's TTFT held out by family, term by term"). A READING, not in any fold: the
fold machinery (``twin.fitting.joint.run_fold``) does not call it; ``benchmarks/gptoss_token_frame.py`` does.

What it changes: where a fold holds out a Hopper expert path (gpt-oss-120b's Marlin MXFP4 path in the gpt-oss family
fold and the H100 GPU fold), ``twin.fitting.path_token_prior`` sets its ``layer_token_overhead_s`` to the geometric
mean of the kept TP-split readings U (us per token per decoder layer that TP does not split). The kept ones are
B200 readings (Kimi-K2.5 NVFP4 0.241, MiniMax-M2.5 NVFP4 0.146: 0.188 us), taken at the embedded defaults, where
Blackwell's own per-token term is 0.2 us (``default_terms.GENERATION_TERMS``). Every fold refits that Blackwell term
on its training rows beside a bench-client path three times the embedded one (15-20 ms against 4.8), and reads it
at 0.155-0.163 us: the fold prices a Blackwell prompt token at ~0.8 of the frame the readings were taken in. The rule
here carries each Blackwell reading in the fold's frame, ``U x fitted / embedded`` (a Hopper reading unscaled), and
optionally sets the decode share of the carried cost (``path_token_prior`` charges prompt tokens only, share 0).

No gpt-oss row is read: the readings are the Kimi / MiniMax B200 rows' and the ratio is the fold's own fit on its
training rows over the embedded constant.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from twin.cost.default_terms import GENERATION_TERMS
from twin.errors import TwinInputError
from twin.fitting.expert_path_prior import geometric_mean
from twin.fitting.moe_token_prior import SHARE, TERM
from twin.fitting.path_token_prior import MOE_TOKEN_READINGS
from twin.fitting.scoped import split

FRAME_GENERATION = "blackwell"
EMBEDDED_FRAME_S = GENERATION_TERMS[FRAME_GENERATION][TERM]      # 0.2 us: the frame the readings were taken in
# the GPU a reading's rows ran on (the first word of its label in path_token_prior.MOE_TOKEN_READINGS) -> generation
READING_GENERATION = {"H100": "hopper", "B200": "blackwell"}


def reading_generation(label: str) -> str:
    """The generation of a ``MOE_TOKEN_READINGS`` label's rows (its first word names the GPU)."""
    gpu = label.split(" ", 1)[0]
    if gpu not in READING_GENERATION:
        raise TwinInputError(f"token frame: reading {label!r} names no known GPU ({', '.join(READING_GENERATION)})")
    return READING_GENERATION[gpu]


def frame_ratio(params: dict[str, float]) -> float | None:
    """The fold's fitted Blackwell per-token term over the embedded one; None where the fold has no positive value
    of it (no Blackwell row trains: the rule does not apply)."""
    value = params.get(f"{TERM}@{FRAME_GENERATION}")
    if value is None or not value > 0:
        return None
    return value / EMBEDDED_FRAME_S


def framed_value(held_rows: Sequence[tuple], ratio: float) -> float | None:
    """The geometric mean of the readings none of whose rows is held out (``held_rows``: (case, deployment)), each
    Blackwell one times ``ratio``; None where none is kept."""
    values = [v * (ratio if reading_generation(label) == FRAME_GENERATION else 1.0)
              for label, v, rows in MOE_TOKEN_READINGS if not any(rows(c, d) for c, d in held_rows)]
    return geometric_mean(values) if values else None


def framed_prior(prior: dict[str, float], params: dict[str, float], held_rows: Sequence[tuple],
                 decode_share: float | None = None) -> dict[str, float]:
    """``prior`` (``path_token_prior``'s entries of a fold) with every ``layer_token_overhead_s`` entry at
    ``framed_value`` in the fold's frame (``params``: its fitted values) and, if ``decode_share`` is given, its
    decode share at that value; {} where the frame or the readings are missing."""
    if decode_share is not None and not 0.0 <= decode_share <= 1.0:
        raise TwinInputError(f"token frame: decode share {decode_share!r} is not in [0, 1]")
    ratio = frame_ratio(params)
    value = framed_value(held_rows, ratio) if ratio is not None else None
    if value is None:
        return {}
    out: dict[str, float] = {}
    for key in prior:
        base, scope = split(key)
        if base == TERM and scope:
            out[key] = value
            if decode_share is not None:
                out[f"{SHARE}@{scope}"] = decode_share
    return out


def held_rows_of(evidence: Sequence[tuple], group: str, group_of: Callable) -> list[tuple]:
    """The (case, deployment) pairs of ``evidence`` that the fold holding out ``group`` holds out."""
    return [(c, d) for c, d in evidence if group_of(c) == group]
