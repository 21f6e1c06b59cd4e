"""Kimi-K2.5 NVFP4's per-request time: ``expert_path_request_s`` on the MLA model's NVFP4 expert path (seconds per
request; issue 33, round 12; docs/fidelity.md "Round 12: Kimi-K2.5's per-request time and the bench client").

What the rows show (``benchmarks/kimi_request_reading.py``, the embedded defaults of round 11, CONC <= 8): the
Kimi-K2.5 NVFP4 rows (B200, vLLM 0.17.0) miss a time per request that does not grow with the prompt and that TP does
not divide: TP 4 +20.1 ms at 1k and +21.6 ms at 8k prompts, TP 8 +15.8 ms; the graphed 1k rows of 2026-04-20 (no
eager floor in them) +18.6 / +19.2 / +21.7 ms, the eager rows of March as much; median over the 26 light-load rows
20.9 ms. It is not on the NVFP4 expert path as such (MiniMax-M2.5's NVFP4 checkpoint on the same GPU misses -0.4 ms,
vLLM 0.19.0), and not on Kimi-K2.5 as such (its INT4 checkpoint, same architecture class
``KimiK25ForConditionalGeneration``, same tokenizer, vLLM 0.15.1, misses none: -18 ms median, its 8k rows -18 /
+24 ms). Nor does it hold up the engine's other sequences: the loaded NVFP4 rows' TPOT already sits at or above the
measured one, where the same time charged to every prompt step would add several points. So, as the block-FP8 path's
time (``twin.cost.expert_path_request``), it is charged on the request path (``request_path_s``), for every request
of a deployment of an MLA model with NVFP4 routed experts. In this data that is one checkpoint on one release: which
of the two (the checkpoint, vLLM 0.17.0) it follows is not separable, and which work it is, is not pinned (the
multimodal processor does not run on a text prompt, vLLM ``inputs/preprocess.py``; the tokenizer is the INT4
checkpoint's too).

Prior 0. Its evidence would be every Kimi-K2.5 NVFP4 row (all B200): the Kimi family fold, the B200-held-out GPU
fold and the silicon-held-out source fold reset it to 0 (no other model, GPU or release reads it). **Not embedded**
(``MLA_EXPERT_REQUEST_S`` is empty; the reading is ``READINGS``): embedded, it takes Kimi NVFP4's TTFT at the
defaults from 11.3 % (-11.3 %) to 3.4 % (-0.6 %), but the folds holding its rows out reset it, and where it is kept
the refit is a trade: the H100-held-out fold worse (TTFT 4.7 % -> 6.2 %, TPOT 6.2 % -> 7.6 %), the family folds'
pooled TTFT 10.3 % -> 8.7 % on gpt-oss's fold alone (round 13: the H100 fold's loss is mostly the Blackwell bandwidth
fraction it carries to Hopper, a per-generation term; docs/fidelity.md "Round 13: terms that transfer between
generations"). A fold can fit
it instead (``fidelity_real.py --add-terms expert_path_request_s@mla+experts_nvfp4``), and a user can pass it.
"""

from __future__ import annotations

from twin.hardware.weight_formats import format_family

TERM = "expert_path_request_s"
SCOPE = "mla+experts_{fmt}"
# routed experts' format -> seconds per request, on MLA models: the reading (the median gap of the 26 Kimi-K2.5
# NVFP4 rows at CONC <= 8, benchmarks/kimi_request_reading.py) and the embedded table (empty: not adopted, above)
READINGS: dict[str, float] = {"nvfp4": 20.9e-3}
MLA_EXPERT_REQUEST_S: dict[str, float] = {}


def mla_request_s(model, formats) -> float | None:
    """The embedded per-request time of an MLA MoE model on its routed experts' path, else None."""
    if not (getattr(model, "is_mla", False) and getattr(model, "is_moe", False)) or formats is None:
        return None
    return MLA_EXPERT_REQUEST_S.get(format_family(formats.routed_experts))


def scoped_values() -> dict[str, float]:
    """The table as fit parameters: ``expert_path_request_s@mla+experts_<format>`` (``twin.fitting.scoped``)."""
    return {f"{TERM}@{SCOPE.format(fmt=fmt)}": v for fmt, v in MLA_EXPERT_REQUEST_S.items()}


def mla_scoped_values() -> dict[str, tuple[float, str]]:
    """Every embedded MLA-scoped value as fit key -> (value, table): ``twin.cost.mla_decode.MLA_TERMS`` at ``@mla``
    and this table at ``@mla+experts_<format>`` (``twin.fitting.provenance`` lists them)."""
    from twin.cost.mla_decode import MLA_TERMS
    return {**{f"{n}@mla": (v, "MLA_TERMS") for n, v in MLA_TERMS.items()},
            **{k: (v, "MLA_EXPERT_REQUEST_S") for k, v in scoped_values().items()}}
