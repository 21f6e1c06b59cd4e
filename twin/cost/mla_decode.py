"""Multi-head latent attention's fixed time per decoder layer and step (Kimi-K2.5, DeepSeek-V3 layout; issue 33,
round 8; docs/fidelity.md "Round 8: Kimi-K2.5 (issue 33)").

What an MLA layer runs that a GQA layer does not (vLLM ``deepseek_v2.py`` and the MLA attention backends, read for
rounds 5 and 7): the fused q_a / kv_a down projection (``ReplicatedLinear``, whole on every TP rank), two RMSNorms
on the latents (q_a_layernorm, kv_a_layernorm), the q up projection, the rotary embedding of the 64 rope dims, the
latent cache write (``concat_and_cache_mla``), and in decode the absorbed form: a batched GEMM of the queries'
nope part with W_UK per head, the MLA decode kernel over the 576-wide latent (FlashInfer TRT-LLM-gen on Blackwell,
``FLASHINFER_MLA``), and a batched GEMM with W_UV per head before o_proj. The twin already charges their bytes and
FLOPs (``twin.hardware.models``, ``twin.hardware.mla_replicated``, ``twin.cost.deployment_terms``); at light load
each of these small kernels takes its minimum duration rather than its bytes / bandwidth, a fixed time per layer
and step that the roofline does not have.

The term: ``layer_overhead_s`` (seconds per decoder layer per step, ``twin.cost.roofline``'s existing fixed time
per layer, prior 0) on MLA models only (fit key ``layer_overhead_s@mla``, ``twin.fitting.scoped``); ``explain()``
names it ``layer_overhead_s`` (seconds per step). Read off the Kimi-K2.5 NVFP4 rows' decode: at the embedded
defaults their TPOT is 0.9-1.3 ms per step short at CONC <= 16 at TP4 and TP8 alike (not TP-divided), on all
three measurement dates (2026-03-11, 03-27, 04-20) and all three ISL/OSL pairs (``benchmarks/kimi_mla_decode.py``).
One constant per step fitted by least squares on the TP4 runs measured 03-27 / 04-20 predicts the TP8 runs and the
03-11 runs (held out) at TPOT 11.3 % (-11.3 %) -> 3.9 % (-2.8 %); fitted on the 03-11 runs, the others 9.7 %
(-9.7 %) -> 2.8 % (-2.3 %); on the 1k/1k and 8k/1k runs, the 1k/8k runs 9.1 % (-9.1 %) -> 3.7 % (-1.9 %). Embedded: the fit on all 43 distinct NVFP4 runs, 0.80 ms per
step = 13.2 us per decoder layer (all 43: 9.6 % (-9.6 %) -> 2.9 % (-1.8 %) by the linear estimate).

What it does not say: Kimi-K2.5 is the only MLA family in the data, so the value cannot be tested on another MLA
model, and a leave-one-family-out fold resets it to its prior 0 (its evidence is every MLA row). The gap shrinks
with load (0.1-0.4 ms at CONC 32-64): a constant charges those rows ~0.7 ms (+3 %) too much; a per-token
coefficient of the other sign fits both ends (-0.3 us per token per layer, more than Blackwell's pooled 0.2 us:
Kimi's decode does not show that per-token cost) but is not embedded (no physics stated for it here).
"""

from __future__ import annotations

# roofline keyword -> value (model units) on MLA models (``ModelSpec.is_mla``), read by twin.cost.default_terms
MLA_TERMS: dict[str, float] = {
    "layer_overhead_s": 13.2e-6,      # s per decoder layer per step: 0.80 ms per step over Kimi-K2.5's 61 layers
}


def mla_term(model, name: str) -> float | None:
    """The embedded value of ``name`` on an MLA model, else None."""
    if not getattr(model, "is_mla", False):
        return None
    return MLA_TERMS.get(name)
