"""What speculative decoding adds to an engine step, term by term, per method and vLLM release.

The target's verification of 1 + k tokens per sequence is costed by the target's own cost model: the scheduler
schedules those tokens, so the step is prefill-like (1 + k query tokens per sequence, the LM head over every
verified position, the draft tokens' KV written into their lookahead slots) and its GEMMs turn compute-bound
once batch x (1 + k) passes the roofline's ridge (about 200 tokens for an 8B model on an H100), k + 1 times
sooner than decoding. ``SpecStepCost`` adds what the step does beyond that, each term in seconds:

* ``draft_gpu_s``: the drafter's k forward passes on the GPU (``ModelDrafter``): pass 1 over every token the
  target ran, rejected drafts included (vLLM's padded drafter batch: the drafter keeps its own KV of them and
  needs no host round trip to drop them), passes 2..k over one token per sequence; each streams the drafter's
  layers and its LM head (the target's, or EAGLE-3's over ``draft_vocab_size``), computes the logits of one
  position per sequence and reads them back for the argmax.
* ``draft_host_s``: the host's work to launch each pass that the GPU does not hide. vLLM's proposer advances
  positions, sequence lengths and slot mappings, builds the drafting attention metadata, replays the drafter's
  CUDA graph (piecewise: each layer's attention runs outside it) and takes the argmax: ``DRAFT_PASS_HOST_OPS +
  DRAFT_ATTN_OPS_PER_LAYER x layers`` eager operations per pass at ``HOST_OP_S`` each, ``EAGER_OPS_PER_LAYER x
  layers`` more when the pass is larger than the largest captured CUDA graph (``GRAPH_MAX_TOKENS``). Without
  async scheduling the drafter's launches start after the step's sampled tokens are synchronised, so a pass
  takes ``max(GPU, host)``; with async scheduling (vLLM >= 0.14 for EAGLE and MTP) the host runs ahead and only
  the GPU time counts.
* ``spec_host_s``: the per-step host work of speculation that blocks the GPU without async scheduling: the
  verification's spec-decode metadata, the rejection sampler's launches and the drafter's input preparation
  (``SPEC_STEP_HOST_OPS`` operations); hidden behind the GPU with async scheduling.
* ``spec_seq_host_s``: the per-request bookkeeping of speculation that blocks the GPU without async scheduling,
  ``SPEC_SEQ_HOST_S`` per sequence and step: the scheduler records each request's drafts, reconciles the
  accepted ones (rolling back the rejected, counting per-position acceptance) and stores the next drafts; the
  model runner writes the drafts into its token table, parses each verified row into a list and, for the
  padded drafter batch, looks up each request's backup next token (a Python loop over the batch). It grows with
  the batch, as the engine's own per-sequence overhead does; hidden behind the GPU with async scheduling.
* ``rejection_sampling_s``: the rejection sampler's passes over the target's full-vocabulary logits of every
  draft position: ``draft tokens x vocab x REJECTION_BYTES_PER_LOGIT[sampling]`` bytes at the GPU's memory
  bandwidth. Greedy requests take an argmax; random sampling materialises the target's probabilities and the
  recovery noise in fp32; top-k/top-p sorts every row first (vLLM applies ``apply_top_k_top_p`` to the draft
  positions, a full-vocabulary sort: vLLM PR #15063). It grows with batch x k, as the server's cost does.
* ``ngram_lookup_s``: prompt lookup on the CPU per sequence (``method: ngram``), before the next step.

``explain(step, k, target)`` gives these terms, the target's verification overhead over a plain decode of the
same sequences (``verification_extra_s``, already inside the target's step time) and the KV bytes the draft
tokens write (``draft_kv_write_bytes``, information, not time). The per-step call is a few sums over the
batch; everything else is computed once per deployment.

Priors (no speculative-decoding measurement in ../shared/ground-truth identifies them; they stay at these
values until a calibration does):
* ``HOST_OP_S`` = 10 us per eager PyTorch operation on the host (Python, the dispatcher and cudaLaunchKernel):
  launching a CUDA kernel alone costs a few microseconds (NVIDIA, CUDA C++ Best Practices Guide) and profiles
  of small PyTorch ops show 5-20 us of CPU each; 10 us is the middle.
* operation counts per draft pass, per step and per eager layer: counted from vLLM's EAGLE proposer loop
  (positions, clamping, sequence lengths, block-table gather and slot mapping, two input-buffer copies, the
  drafting attention metadata, the graph replay, LM head, argmax) and rejection sampler, rounded.
* ``SPEC_SEQ_HOST_S`` = 2.5 us per sequence and step: ``benchmarks/spec_host_bookkeeping.py`` re-enacts those
  per-request statements of vLLM 0.11 (scheduler ``schedule``/``update_from_output``/``update_draft_token_ids``,
  model runner ``_update_states``, ``parse_output``, the EAGLE proposer's backup next tokens, the drafts' list)
  with Python objects of the same kinds and measures 2.3-2.7 us per sequence at 8-256 sequences on this
  project's 2-core VM when idle (4.9-5.7 us when shared at load ~7, where the first prior came from). A lower
  bound: vLLM's objects carry more state than the re-enactment's.
* ``GRAPH_MAX_TOKENS`` = 512: vLLM's largest captured CUDA-graph batch by default.
* bytes per logit: fp32 reads and writes of each pass over a [draft tokens x vocab] matrix (below).
"""

from __future__ import annotations

from operator import mul

from twin.cost.base import StepShape
from twin.errors import TwinInputError
from twin.spec_decode.drafters import Drafter, ModelDrafter, NgramDrafter, PassShape

HOST_OP_S = 10.0e-6
DRAFT_PASS_HOST_OPS = 30            # per draft pass with its CUDA graph (see the module docstring)
DRAFT_ATTN_OPS_PER_LAYER = 3        # attention outside the piecewise graph: metadata, the kernel, the KV write
EAGER_OPS_PER_LAYER = 12            # a decoder layer run eagerly: norms, qkv, rope, attention, o, gate-up, act, down
SPEC_STEP_HOST_OPS = 60             # spec metadata (~10), rejection sampler (~25), drafter input preparation (~25)
SPEC_SEQ_HOST_S = 2.5e-6            # per sequence and step: spec bookkeeping (benchmarks/spec_host_bookkeeping.py)
GRAPH_MAX_TOKENS = 512
#: bytes moved per (draft position, vocabulary entry) by the rejection sampler, by what requests ask for
REJECTION_BYTES_PER_LOGIT = {
    "greedy": 10.0,       # the model's bf16 logits cast to fp32 for sampling (2 + 4), the argmax read (4)
    "random": 38.0,       # the cast (6), temperature (read + write 8), softmax to target_probs (3 passes, 12),
                          # recovery noise written and read (8), probabilities read for the recovered token (4)
    "top_k_top_p": 166.0,  # random + a radix sort of fp32 keys with int64 indices (4 digit passes x read+write
                           # x 12 B = 96), softmax/cumsum over the sorted row (16), the mask scattered back (16)
}


class SpecStepCost:
    """A drafter plus the host's and the rejection sampler's share of a speculative step (the ``Drafter``
    protocol: ``draft_time_s(step, k)`` is everything speculation adds beyond the target's forward pass)."""

    def __init__(self, drafter: Drafter, *, vocab_size: int, memory_bandwidth_bytes_per_s: float,
                 target_kv_bytes_per_token: int = 0, async_scheduling: bool = False, sampling: str = "random",
                 draft_pass_overhead_s: float | None = None, spec_step_overhead_s: float | None = None,
                 spec_seq_overhead_s: float | None = None, host_op_s: float = HOST_OP_S,
                 graph_max_tokens: int = GRAPH_MAX_TOKENS) -> None:
        if sampling not in REJECTION_BYTES_PER_LOGIT:
            raise TwinInputError(f"speculative_decoding.sampling = {sampling!r}: allowed: "
                                 f"{', '.join(REJECTION_BYTES_PER_LOGIT)}")
        if not memory_bandwidth_bytes_per_s > 0:
            raise TwinInputError(f"memory bandwidth = {memory_bandwidth_bytes_per_s!r}: must be > 0 bytes/s")
        self.drafter = drafter
        self.method = drafter.method
        self.weight_bytes = drafter.weight_bytes
        self.kv_bytes_per_token = drafter.kv_bytes_per_token
        self.async_scheduling = bool(async_scheduling)
        self.sampling = sampling
        self.target_kv_bytes_per_token = int(target_kv_bytes_per_token)
        self.model = drafter if isinstance(drafter, ModelDrafter) else None
        layers = self.model.num_layers if self.model is not None else 0
        if draft_pass_overhead_s is None:
            self.host_pass_s = (DRAFT_PASS_HOST_OPS + DRAFT_ATTN_OPS_PER_LAYER * layers) * host_op_s
        else:
            self.host_pass_s = float(draft_pass_overhead_s)
        self.host_pass_eager_s = self.host_pass_s + EAGER_OPS_PER_LAYER * layers * host_op_s
        self.graph_max_tokens = int(graph_max_tokens)
        self.spec_host_s = (SPEC_STEP_HOST_OPS * host_op_s if spec_step_overhead_s is None
                            else float(spec_step_overhead_s))
        self._exposed_step_host_s = 0.0 if self.async_scheduling else self.spec_host_s
        self.spec_seq_host_s = SPEC_SEQ_HOST_S if spec_seq_overhead_s is None else float(spec_seq_overhead_s)
        self._exposed_seq_host_s = 0.0 if self.async_scheduling else self.spec_seq_host_s
        self._k_rejection = vocab_size * REJECTION_BYTES_PER_LOGIT[sampling] / memory_bandwidth_bytes_per_s
        self.ngram_lookup_s_per_seq = drafter.lookup_s_per_seq if isinstance(drafter, NgramDrafter) else 0.0

    # ------------------------------------------------------------------------------------------------ hot path
    def draft_time_s(self, step: StepShape, k: int) -> float:
        nn = step.num_new_tokens
        n_seqs = len(nn)
        if not n_seqs:
            return 0.0
        t = (self._exposed_step_host_s + self._exposed_seq_host_s * n_seqs
             + self._k_rejection * sum(step.num_spec_tokens))
        model = self.model
        if model is None:
            return t + self.ngram_lookup_s_per_seq * n_seqs
        cc = step.num_computed_before
        tokens, context = sum(nn), sum(cc)
        gpu = model.pass_time_from_sums(n_seqs, tokens, context, sum(map(mul, nn, cc)), sum(map(mul, nn, nn)), True)
        t += self._pass(gpu, tokens)
        base = context + tokens
        for j in range(k - 1):
            t += self._pass(model.pass_time_from_sums(n_seqs, n_seqs, base + j * n_seqs, 0, n_seqs, False), n_seqs)
        return t

    def _pass(self, gpu_s: float, tokens: int) -> float:
        if self.async_scheduling:
            return gpu_s
        host = self.host_pass_s if tokens <= self.graph_max_tokens else self.host_pass_eager_s
        return gpu_s if gpu_s > host else host

    # ------------------------------------------------------------------------------------------------ reports
    def explain(self, step: StepShape, k: int, target=None) -> dict[str, float]:
        """The speculative terms of ``step`` in seconds (and the draft tokens' KV bytes); with ``target`` (the
        target's cost model) also the verification's extra time and the whole step's ``total_s``."""
        nn, cc, spec = list(step.num_new_tokens), list(step.num_computed_before), list(step.num_spec_tokens)
        n_seqs, drafts = len(nn), sum(spec)
        parts = dict.fromkeys(("draft_gpu_s", "draft_host_s", "spec_host_s", "spec_seq_host_s",
                               "rejection_sampling_s", "ngram_lookup_s"), 0.0)
        parts["draft_kv_write_bytes"] = 0.0
        if n_seqs:
            parts["spec_host_s"] = self._exposed_step_host_s
            parts["spec_seq_host_s"] = self._exposed_seq_host_s * n_seqs
            parts["rejection_sampling_s"] = self._k_rejection * drafts
            if self.model is None:
                parts["ngram_lookup_s"] = self.ngram_lookup_s_per_seq * n_seqs
            else:
                gpu = self.model.pass_times_s(step, k)
                sizes = [sum(nn)] + [n_seqs] * (k - 1)
                parts["draft_gpu_s"] = sum(gpu)
                parts["draft_host_s"] = sum(self._pass(g, s) - g for g, s in zip(gpu, sizes))
            parts["draft_kv_write_bytes"] = float(drafts * self.target_kv_bytes_per_token
                                                  + (sum(nn) + (k - 1) * n_seqs) * self.kv_bytes_per_token
                                                  * (self.model is not None))
        spec_total = sum(v for key, v in parts.items() if key.endswith("_s"))
        parts["spec_total_s"] = spec_total
        if target is not None:
            plain = PassShape([n - s for n, s in zip(nn, spec)], cc, [0] * n_seqs)
            verify = target.step_time_s(step)
            parts["verification_extra_s"] = verify - target.step_time_s(plain) if n_seqs else 0.0
            parts["target_step_s"] = verify
            parts["total_s"] = verify + spec_total
        return parts

    def __repr__(self) -> str:
        mode = "async" if self.async_scheduling else "sync"
        return (f"SpecStepCost({self.drafter!r}, {mode}, sampling={self.sampling}, "
                f"host {self.host_pass_s * 1e6:.0f} us/pass + {self.spec_host_s * 1e6:.0f} us/step + "
                f"{self.spec_seq_host_s * 1e6:g} us/seq)")
