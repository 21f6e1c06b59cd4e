"""Drafters: what proposing k draft tokens costs per engine step, and what the drafter holds in GPU memory.

vLLM V1 proposes right after the target's forward pass, inside the same engine step, for every request in the
batch (drafts of a request still mid-prefill are thrown away). A model-based drafter (a separate draft model,
EAGLE or MTP heads) runs k forward passes:

* pass 1 over the tokens the target just ran (prefill chunks and verified tokens alike: the drafter keeps its
  own KV of the whole context, so it "prefills" too, and a prefix-cache hit or a preemption's recompute
  applies to it as to the target), computing one set of logits per sequence;
* passes 2..k over one token per sequence (the previous draft), attending over the context so far.

Each pass is costed by the roofline cost model on the drafter's own shape on the deployment's GPU (weights
streamed once per pass, GEMM FLOPs, attention over its KV, tensor-parallel all-reduces), with a per-pass
overhead (``draft_pass_overhead_s``: launching the pass's CUDA graph and sampling) instead of the engine's
per-step CPU overhead, which the target's step already pays. So drafting is memory-bound and cheap at small
batch and grows with the batch once the drafter's GEMMs turn compute-bound, as on the real server.

* ``draft_model``: a catalog model (e.g. llama-3.2-1b for llama-3.1-8b), its full depth per pass.
* ``eagle`` / ``eagle3`` / ``mtp``: a head derived from the target's shape: ``draft_layers`` decoder layers of
  the target's width, an input projection (fc) of ``fc_inputs x hidden -> hidden`` (EAGLE and MTP fuse the
  token embedding with the target's hidden state, 2h; EAGLE-3 fuses three of the target's layers, 3h) and an
  LM head: the target's (shared, EAGLE-1 and MTP) or EAGLE-3's own reduced-vocabulary head.
* ``ngram``: prompt lookup on the CPU, no model: ``ngram_lookup_s_per_seq`` per sequence and step.

Memory (per GPU): the draft model's weights, or the heads' layers, fc and (EAGLE-3) own LM head; the shared
embedding and LM head are not counted twice. KV per token: the drafter's attention layers, held in the same
blocks as the target's (see ``twin.hardware.kv_sizing``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from operator import mul
from typing import Protocol

from twin.hardware.catalog import (DTYPE_BYTES, GpuSpec, ModelSpec, activation_dtype, compute_dtype,
                                  linear_weight_bytes, normalize_dtype, normalize_weight_dtype)
from twin.cost.base import StepShape
from twin.cost.roofline import RooflineCostModel
from twin.errors import TwinInputError

#: EAGLE-3's draft vocabulary when the checkpoint's config does not say (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B's
#: ``draft_vocab_size``)
DEFAULT_EAGLE3_DRAFT_VOCAB = 32000
#: roofline parameters a drafter takes over from the target's cost model (the rest are the drafter's own)
SHARED_ROOFLINE_PARAMS = ("compute_efficiency", "memory_efficiency", "allreduce_latency_s", "interconnect_efficiency")


@dataclass(slots=True)
class PassShape:
    """A step shape (``twin.cost.base.StepShape``) for one draft pass."""

    num_new_tokens: list[int]
    num_computed_before: list[int]
    num_spec_tokens: list[int]


class Drafter(Protocol):
    method: str
    weight_bytes: int            # per GPU
    kv_bytes_per_token: int      # per GPU, held in the target's blocks

    def draft_time_s(self, step: StepShape, k: int) -> float:
        """Time to propose k drafts for every sequence of ``step`` (the target's step shape)."""


class NgramDrafter:
    """Prompt lookup (vLLM ``method: ngram``): CPU work per sequence, no weights, no KV."""

    method = "ngram"
    weight_bytes = 0
    kv_bytes_per_token = 0

    def __init__(self, lookup_s_per_seq: float = 5.0e-6) -> None:
        if lookup_s_per_seq < 0:
            raise TwinInputError(f"ngram_lookup_s_per_seq = {lookup_s_per_seq!r}: must be >= 0 (seconds)")
        self.lookup_s_per_seq = float(lookup_s_per_seq)

    def draft_time_s(self, step: StepShape, k: int) -> float:
        return self.lookup_s_per_seq * len(step.num_new_tokens)

    def __repr__(self) -> str:
        return f"NgramDrafter({self.lookup_s_per_seq * 1e6:g} us/seq)"


class ModelDrafter:
    """A drafter that runs k forward passes of a (small) transformer: a draft model, or EAGLE / MTP heads.

    ``cost`` costs one pass of the drafter's transformer on the GPU (no host overhead: the host side of
    drafting is ``twin.spec_decode.step_cost``'s); ``extra_linear_params`` are weights outside that shape that
    every token of every pass multiplies through (EAGLE's and MTP's fc, EAGLE-3's wider qkv input), and
    ``first_pass_linear_params`` those only the first pass's tokens go through (EAGLE-3's fc fusing three of the
    target's hidden states)."""

    def __init__(self, method: str, cost: RooflineCostModel, weight_bytes: int, kv_bytes_per_token: int,
                 extra_linear_params: int = 0, first_pass_linear_params: int = 0,
                 logits_bytes_per_seq: int = 0) -> None:
        self.method = method
        self.cost = cost
        self.weight_bytes = int(weight_bytes)
        self.kv_bytes_per_token = int(kv_bytes_per_token)
        self.num_layers = cost.model.num_hidden_layers
        tp = cost.tensor_parallel_size
        self.extra_linear_params = int(extra_linear_params)
        self.first_pass_linear_params = int(first_pass_linear_params)
        peak = cost.gpu.flops(compute_dtype(cost.weight_dtype)) * cost.compute_efficiency
        bandwidth = cost.gpu.memory_bandwidth_bytes_per_s * cost.memory_efficiency
        self._k_extra = 2.0 * extra_linear_params / tp / peak                  # per token
        self._t_extra = linear_weight_bytes(extra_linear_params, cost.weight_dtype) / tp / bandwidth
        self._k_first = 2.0 * first_pass_linear_params / tp / peak
        self._t_first = linear_weight_bytes(first_pass_linear_params, cost.weight_dtype) / tp / bandwidth
        # each pass writes one row of logits per sequence and reads it back for the argmax (EAGLE-3 with a reduced
        # vocabulary also scatters its row into a target-vocabulary row filled with -inf first)
        if not logits_bytes_per_seq:
            logits_bytes_per_seq = 2 * DTYPE_BYTES[activation_dtype(cost.weight_dtype)] * cost.model.vocab_size
        self.logits_bytes_per_seq = int(logits_bytes_per_seq)
        self._k_logits = logits_bytes_per_seq / tp / bandwidth                  # per sequence and pass

    def pass_time_from_sums(self, n_seqs: int, tokens: int, context: int, new_x_context: int, new_squared: int,
                            first: bool) -> float:
        """One pass's GPU time from the pass's sums (as ``RooflineCostModel.step_time_from_sums``)."""
        t = self.cost.step_time_from_sums(n_seqs, tokens, context, new_x_context, new_squared, 0)
        t += self._k_logits * n_seqs
        if self.extra_linear_params:
            extra = self._k_extra * tokens
            t += extra if extra > self._t_extra else self._t_extra
        if first and self.first_pass_linear_params:
            extra = self._k_first * tokens
            t += extra if extra > self._t_first else self._t_first
        return t

    def pass_times_s(self, step: StepShape, k: int) -> list[float]:
        """The k passes' GPU times: pass 1 over the step's tokens (the drafter's own KV of them, one set of
        logits per sequence), then k - 1 passes of one token per sequence over the context so far."""
        nn = step.num_new_tokens
        n_seqs = len(nn)
        if not n_seqs or k <= 0:
            return []
        cc = step.num_computed_before
        tokens, context = sum(nn), sum(cc)
        times = [self.pass_time_from_sums(n_seqs, tokens, context, sum(map(mul, nn, cc)), sum(map(mul, nn, nn)),
                                          True)]
        base = context + tokens
        for j in range(k - 1):
            times.append(self.pass_time_from_sums(n_seqs, n_seqs, base + j * n_seqs, 0, n_seqs, False))
        return times

    def draft_time_s(self, step: StepShape, k: int) -> float:
        """GPU time of the k passes (the host's share and the rejection sampler: ``SpecStepCost``)."""
        return sum(self.pass_times_s(step, k))

    def __repr__(self) -> str:
        return (f"ModelDrafter({self.method}: {self.cost.model.name}, {self.weight_bytes / 2**30:.2f} GiB, "
                f"{self.kv_bytes_per_token} B KV/token)")


def _pass_cost_model(model: ModelSpec, gpu: GpuSpec, tp: int, weight_dtype: str, kv_dtype: str,
                     target_params: dict | None, pass_overhead_s: float) -> RooflineCostModel:
    params = {k: v for k, v in (target_params or {}).items() if k in SHARED_ROOFLINE_PARAMS}
    return RooflineCostModel(model, gpu, tensor_parallel_size=tp, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                             step_overhead_s=pass_overhead_s, per_seq_overhead_s=0.0, **params)


def check_draft_model(target: ModelSpec, draft: ModelSpec, tp: int) -> None:
    """A draft model must share the target's tokenizer (vocabularies within 1 %) and split ``tp`` ways."""
    if abs(draft.vocab_size - target.vocab_size) > 0.01 * target.vocab_size:
        raise TwinInputError(
            f"speculative_decoding.draft_model: {draft.name} has a vocabulary of {draft.vocab_size} tokens, the "
            f"target {target.name} {target.vocab_size}: a draft model must share the target's tokenizer")
    try:
        draft.check_tensor_parallel(tp)
    except TwinInputError as exc:
        raise TwinInputError(f"speculative_decoding.draft_model: {draft.name} runs at the target's "
                             f"tensor_parallel_size: {exc}") from None


def draft_model_drafter(target: ModelSpec, draft: ModelSpec, gpu: GpuSpec, tp: int = 1, weight_dtype: str = "bf16",
                        kv_dtype: str = "bf16", target_params: dict | None = None,
                        pass_overhead_s: float = 0.0) -> ModelDrafter:
    """A separate draft model at the target's tensor-parallel size, dtypes and GPU."""
    check_draft_model(target, draft, tp)
    wd, kd = normalize_weight_dtype(weight_dtype), normalize_dtype(kv_dtype, "kv_dtype")
    cost = _pass_cost_model(draft, gpu, tp, wd, kd, target_params, pass_overhead_s)
    return ModelDrafter("draft_model", cost, draft.weight_bytes(wd, tp), draft.kv_bytes_per_token(kd, tp))


def head_spec(target: ModelSpec, method: str, draft_layers: int = 1, draft_vocab_size: int | None = None
              ) -> tuple[ModelSpec, int, bool]:
    """The head's transformer shape (``draft_layers`` decoder layers of the target's width and its LM head),
    its fc parameters, and whether it has its own LM head (EAGLE-3's reduced vocabulary)."""
    if method not in ("eagle", "eagle3", "mtp"):
        raise TwinInputError(f"speculative_decoding.method: {method!r} has no head; allowed: eagle, eagle3, mtp")
    if draft_vocab_size is not None and draft_vocab_size > target.vocab_size:
        raise TwinInputError(f"speculative_decoding.draft_vocab_size = {draft_vocab_size}: must be at most the "
                             f"target's vocabulary ({target.vocab_size} tokens for {target.name})")
    fc_inputs = 3 if method == "eagle3" else 2
    own_head = method == "eagle3"
    vocab = target.vocab_size
    if own_head:
        vocab = min(draft_vocab_size or DEFAULT_EAGLE3_DRAFT_VOCAB, target.vocab_size)
    spec = replace(target, name=f"{target.name}-{method}-head", num_hidden_layers=draft_layers, vocab_size=vocab,
                   tie_word_embeddings=False, hf_id=None, aliases=(), first_k_dense_layers=0)
    return spec, fc_inputs * target.hidden_size * target.hidden_size, own_head


def head_drafter(target: ModelSpec, method: str, gpu: GpuSpec, tp: int = 1, weight_dtype: str = "bf16",
                 kv_dtype: str = "bf16", target_params: dict | None = None, pass_overhead_s: float = 0.0,
                 draft_layers: int = 1, draft_vocab_size: int | None = None) -> ModelDrafter:
    """EAGLE / EAGLE-3 / MTP heads on the target's shape (see the module docstring)."""
    wd, kd = normalize_weight_dtype(weight_dtype), normalize_dtype(kv_dtype, "kv_dtype")
    spec, fc_params, own_head = head_spec(target, method, draft_layers, draft_vocab_size)
    cost = _pass_cost_model(spec, gpu, tp, wd, kd, target_params, pass_overhead_s)
    ab = DTYPE_BYTES[activation_dtype(wd)]
    layer_params = spec.linear_params                   # draft_layers x (attention + MLP or MoE)
    # EAGLE-3's first layer reads [token embedding, hidden state] (2h wide) into its qkv projection: h x (q + k +
    # v) more weights than a decoder layer of the target's shape, every pass; its fc (3h -> h) fuses three of the
    # target's hidden states once, in the first pass. EAGLE-1 and MTP fuse [embedding, hidden] with their fc
    # (2h -> h) in every pass (Li et al., EAGLE-3, 2025; DeepSeek-V3 report, MTP modules).
    wide_qkv = target.hidden_size * (target.q_dim + 2 * target.kv_dim) if method == "eagle3" else 0
    per_pass, first_pass = (wide_qkv, fc_params) if method == "eagle3" else (fc_params, 0)
    small = draft_layers * (spec.attention_bias_params_per_layer + spec.norm_params_per_layer) + spec.hidden_size
    weights = (-(-linear_weight_bytes(layer_params + fc_params + wide_qkv, wd) // tp) + small * ab
               + (-(-spec.lm_head_matmul_params * ab // tp) if own_head else 0))
    logits = 0
    if own_head and spec.vocab_size < target.vocab_size:
        # vLLM maps EAGLE-3's draft logits into the target's vocabulary: a row of -inf written, the draft row
        # written and scattered into it, the full row read by the argmax
        logits = ab * (3 * spec.vocab_size + 2 * target.vocab_size)
    return ModelDrafter(method, cost, weights, spec.kv_bytes_per_token(kd, tp), extra_linear_params=per_pass,
                        first_pass_linear_params=first_pass, logits_bytes_per_seq=logits)
