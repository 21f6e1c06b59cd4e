"""Marlin MoE's token blocks: the padded rows a prompt step's expert GEMMs run on vLLM's Marlin MoE kernel path
(issue 33, round 6; docs/fidelity.md "Round 6: gpt-oss-120b and Llama prompt steps").

Facts (vLLM source, ``vllm/model_executor/layers/fused_moe/fused_marlin_moe.py``: the same heuristic in every
version of it read; ``oracle/mxfp4.py`` for the backend choice):

* ``fused_marlin_moe`` picks the token block of its grouped GEMMs from the step's tokens M, top-k and the number
  of experts E: the first ``block_size_m`` of (8, 16, 32, 48, 64) with ``M x top_k / E / block_size_m < 0.9``,
  else 64 (``marlin_block_rows``). ``moe_align_block_size`` then sorts the (token, expert) pairs by expert and
  pads every expert's list to a whole number of blocks; the Marlin GEMMs run one thread-block row per block, so
  an expert with n pairs costs ``ceil(n / B) x B`` rows of MMAs (both GEMMs: gate/up and down).
* Which deployments take this path: gpt-oss-120b's H100 rows (``single_node/gptoss_fp4_h100.sh``, InferenceX
  cec542a9a, v0.18.0) export ``VLLM_MXFP4_USE_MARLIN=1``, and vLLM's MXFP4 oracle returns the ``MARLIN`` backend
  for it before its own priority list (W4A16: E2M1 weights dequantised to bf16 in registers, ``mma.sync`` MMAs;
  Hopper has no FP4 tensor rate). INT4 experts on every generation (``MARLIN_FORMATS``; issue 33, round 7):
  vLLM loads compressed-tensors W4A16 experts (Kimi-K2.5's INT4 checkpoint) with
  ``CompressedTensorsWNA16MarlinMoEMethod``, whose ``apply`` calls the same ``fused_marlin_moe`` with
  ``input_dtype`` = ``get_marlin_input_dtype`` (None unless the server asks for 8-bit activations, so the
  ``max(block_size_m, 16)`` of 8-bit activations does not apply): the same block heuristic and
  ``moe_align_block_size`` (``compressed_tensors_moe.py`` and ``fused_marlin_moe.py``, read at a 2026 main
  commit; round 5 read the v0.15.1 path to ``fused_marlin_moe``). Kimi-K2.5 (E = 384, top-8): a 1k prompt step
  takes B = 32 and pads ~52 %, an 8k one B = 64 and ~14 %; its INT4 terms (``twin.cost.marlin_moe``) are refitted
  with the blocks in place.

The term (seconds per step, prompt steps only): ``(E[padded rows] - M x top_k) x the path's seconds per routed
row``, where a routed row costs one (token, expert) pair's expert FLOPs on this GPU at the path's rate (the
dense rate x ``moe_expert_compute_efficiency``) and ``E[padded rows] = E x E[ceil(n / B) x B]`` with n, an
expert's pairs, ~ Binomial(M, top_k / E) (uniform routing, as ``twin.hardware.moe`` assumes). A 1k-token prompt
step of gpt-oss-120b (E = 128, top-4) gets B = 48 and ~6,140 rows for its ~4,100 pairs (+50 %); an 8k step B = 64
and +12 %: the short prompts' excess that one per-pair rate cannot give both. ``explain()``: ``moe_block_padding_s``.
Pure decode steps are not charged: with a few pairs per expert the Marlin kernel streams the expert weights and
its padded MMAs overlap the stream. Charged, a TP2 C = 64 decode step of gpt-oss (B = 8: ~890 rows for 256
pairs) would take ~2.7 ms more, +19 % on a TPOT the rows show within +5 % without it. No free parameter: a fact
of the kernel priced at the path's fitted rate. It is GPU time: on a step no CUDA graph covers, the step takes the
longer of (GPU time + padded rows) and the eager host floor (``twin.cost.eager_steps``; round 6 added it on top of
the floor, the same on Hopper, whose floor is 0, but not on Blackwell).
"""

from __future__ import annotations

import functools
import math

from twin.cost.eager_steps import name_floor_share, prompt_step_array
from twin.cost.generations import gpu_generation
from twin.cost.moe_terms import routed_expert_flops_per_token
from twin.cost.mxfp4_path import group_rate_dtype
from twin.hardware.weight_formats import format_family

MARLIN_BLOCK_ROWS = (8, 16, 32, 48, 64)     # fused_marlin_moe's candidate block_size_m, smallest first
MARLIN_PATHS = {("hopper", "mxfp4")}        # (GPU generation, routed experts' format) served by Marlin MoE here
MARLIN_FORMATS = {"int4"}                   # routed experts' formats served by Marlin MoE on every generation
_TAIL_SD = 12.0                             # binomial terms kept: mean +/- 12 standard deviations


def marlin_block_rows(tokens: int, top_k: int, experts: int) -> int:
    """vLLM's ``block_size_m`` for a step of ``tokens`` tokens: the first candidate with fewer than 0.9 blocks of
    pairs per expert on average, else the largest."""
    for rows in MARLIN_BLOCK_ROWS:
        if tokens * top_k / experts / rows < 0.9:
            return rows
    return MARLIN_BLOCK_ROWS[-1]


@functools.lru_cache(maxsize=1 << 16)      # parameter-free: one cache for every cost model (the fit builds many)
def expected_padded_rows(tokens: int, top_k: int, experts: int) -> float:
    """E[sum over experts of ceil(n_e / B) x B], each n_e ~ Binomial(tokens, top_k / experts)."""
    if tokens <= 0:
        return 0.0
    block = marlin_block_rows(tokens, top_k, experts)
    p = min(1.0, top_k / experts)
    if p >= 1.0:
        return experts * math.ceil(tokens / block) * block
    mean, sd = tokens * p, math.sqrt(tokens * p * (1.0 - p))
    lo, hi = max(0, int(mean - _TAIL_SD * sd)), min(tokens, int(mean + _TAIL_SD * sd) + 1)
    log_n = math.lgamma(tokens + 1)
    lp, lq = math.log(p), math.log1p(-p)
    total = 0.0
    for n in range(lo, hi + 1):
        pmf = math.exp(log_n - math.lgamma(n + 1) - math.lgamma(tokens - n + 1) + n * lp + (tokens - n) * lq)
        total += pmf * (-(-n // block) * block)
    return experts * total


def on_marlin_path(gpu, model, formats) -> bool:
    """Whether the deployment's routed experts run on vLLM's Marlin MoE kernel here (``MARLIN_PATHS``)."""
    fmt = format_family(formats.routed_experts)
    on_path = fmt in MARLIN_FORMATS or (gpu_generation(gpu), fmt) in MARLIN_PATHS
    return bool(getattr(model, "is_moe", False)) and on_path


def seconds_per_routed_row(cost) -> float:
    """One (token, expert) pair's expert FLOPs on one GPU of the roofline ``cost`` at the path's rate (s)."""
    gpu, model, formats = cost.gpu, cost.model, cost.weight_formats
    q = cost.quant_weight_efficiency if formats.is_quantized and formats.routed_experts != formats.activation else 1.0
    rate = gpu.flops(group_rate_dtype(gpu, formats, "routed_experts")) * cost.compute_efficiency * q \
        * cost.moe_expert_compute_efficiency
    return routed_expert_flops_per_token(model, cost.tensor_parallel_size) / model.num_experts_per_tok / rate


def install(cost) -> None:
    """Give a roofline ``cost`` on the Marlin path its padded rows: ``marlin_padding_s(tokens)``, a step-time method
    that adds it to every step with a prompt in it, ``marlin_padding_array`` (the same for the fit's arrays, added
    by the roofline before its eager floor) and ``explain()``'s part. Installed before the eager floor
    (``twin.cost.eager_steps``), which then floors the GPU time with the rows in it. Elsewhere nothing changes
    (``marlin_padding_s`` / ``marlin_padding_array`` None: the hot path is untouched)."""
    cost.marlin_padding_s = cost.marlin_padding_array = None
    if not on_marlin_path(cost.gpu, cost.model, cost.weight_formats):
        return
    model, per_row = cost.model, seconds_per_routed_row(cost)
    k, e = model.num_experts_per_tok, model.num_experts

    @functools.lru_cache(maxsize=8192)
    def padding_s(tokens: int) -> float:
        return max(0.0, expected_padded_rows(tokens, k, e) - tokens * k) * per_row

    sums, explain = cost.step_time_from_sums, cost.explain

    def step_time_from_sums(n_seqs: int, tokens: int, context: int, new_x_context: int, new_squared: int,
                            spec_tokens: int) -> float:
        t = sums(n_seqs, tokens, context, new_x_context, new_squared, spec_tokens)
        return t + padding_s(tokens) if tokens != n_seqs else t

    def padding_array(tokens, seqs):
        return prompt_step_array(tokens, seqs, padding_s)

    def explain_step(step) -> dict[str, float]:
        parts = explain(step)
        n_seqs, tokens = len(step.num_new_tokens), sum(step.num_new_tokens)
        pad = padding_s(tokens) if n_seqs and tokens != n_seqs else 0.0
        if pad:        # the floor's catch-all part holds it (total beyond the GPU parts): name it
            name_floor_share(parts, "moe_block_padding_s", pad)
        return parts

    cost.marlin_padding_s, cost.marlin_padding_array = padding_s, padding_array
    cost.step_time_from_sums, cost.explain = step_time_from_sums, explain_step
